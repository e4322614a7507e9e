package autoscaler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// access is one request of the autoscaler's ServiceAccount to the management cluster.
type access struct {
	verb, group, resource, subresource, name string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	if a.name != "" {
		r += " " + a.name
	}
	return a.verb + " " + r
}

const (
	capi  = "cluster.x-k8s.io"
	infra = "infrastructure.cluster.x-k8s.io"
)

// scaledPool is the autoscaled pool of the tenants in these tests, and scaledMD its
// MachineDeployment: the only one whose scale the autoscaler may read and change.
const scaledPool = "workers"

var scaledMD = names.MachineDeploymentName(cluster, scaledPool)

// needed is what cluster-autoscaler's clusterapi provider does on the management side:
// informers on the scalable resources and Machines, the scale subresource of the
// autoscaled pool's MachineDeployment, marking a Machine for deletion, and the machine
// templates it sizes an empty node group from.
var needed = []access{
	{verb: "list", group: capi, resource: "machinedeployments"},
	{verb: "watch", group: capi, resource: "machinedeployments"},
	{verb: "list", group: capi, resource: "machinesets"},
	{verb: "watch", group: capi, resource: "machinesets"},
	{verb: "list", group: capi, resource: "machines"},
	{verb: "watch", group: capi, resource: "machines"},
	{verb: "list", group: capi, resource: "machinepools"},
	{verb: "watch", group: capi, resource: "machinepools"},
	{verb: "get", group: capi, resource: "machinedeployments", subresource: "scale", name: scaledMD},
	{verb: "patch", group: capi, resource: "machinedeployments", subresource: "scale", name: scaledMD},
	{verb: "get", group: capi, resource: "machines"},
	{verb: "update", group: capi, resource: "machines"},
	{verb: "get", group: infra, resource: "kubevirtmachinetemplates"},
	{verb: "list", group: infra, resource: "kubevirtmachinetemplates"},
	{verb: "watch", group: infra, resource: "kubevirtmachinetemplates"},
}

// forbidden is what it must not be able to do.
var forbidden = []access{
	{verb: "delete", group: capi, resource: "machinedeployments"},
	{verb: "update", group: capi, resource: "machinedeployments"},
	{verb: "patch", group: capi, resource: "machinedeployments"},
	{verb: "create", group: capi, resource: "machinedeployments"},
	{verb: "delete", group: capi, resource: "machines"},
	{verb: "create", group: capi, resource: "machines"},
	{verb: "get", resource: "secrets"},
	{verb: "list", group: capi, resource: "clusters"},
	{verb: "update", group: capi, resource: "machinesets"},
	// The scale of a fixed pool's MachineDeployment, of any other (another cluster's in
	// the same namespace), or of all of them: only the autoscaled pools' are named.
	{verb: "get", group: capi, resource: "machinedeployments", subresource: "scale", name: fixedMD},
	{verb: "patch", group: capi, resource: "machinedeployments", subresource: "scale", name: fixedMD},
	{verb: "get", group: capi, resource: "machinedeployments", subresource: "scale", name: "other-workers"},
	{verb: "patch", group: capi, resource: "machinedeployments", subresource: "scale", name: "other-workers"},
	{verb: "get", group: capi, resource: "machinedeployments", subresource: "scale"},
	{verb: "patch", group: capi, resource: "machinedeployments", subresource: "scale"},
	{verb: "update", group: capi, resource: "machinedeployments", subresource: "scale", name: scaledMD},
}

// fixedPool is a fixed-size pool beside the autoscaled one, and fixedMD its
// MachineDeployment.
const fixedPool = "fixed"

var fixedMD = names.MachineDeploymentName(cluster, fixedPool)

// canI asks the API server's authorizer (SubjectAccessReview) whether the autoscaler's
// ServiceAccount of the tenant in ns may make the request in the namespace target (""
// is every namespace), as its token authenticates: the user
// system:serviceaccount:<ns>:<cluster>-autoscaler in the groups system:serviceaccounts,
// system:serviceaccounts:<ns> and system:authenticated.
func canI(t *testing.T, ns, target string, a access) (bool, string) {
	t.Helper()
	return review(t, "system:serviceaccount:"+ns+":"+name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}, target, a)
}

func review(t *testing.T, user string, groups []string, ns string, a access) (bool, string) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Name: a.name,
		},
	}}
	if err := env.Client.Create(context.Background(), sar); err != nil {
		t.Fatalf("SubjectAccessReview %s for %s: %v", a, user, err)
	}
	if sar.Status.EvaluationError != "" {
		t.Fatalf("SubjectAccessReview %s for %s: evaluation error %s", a, user, sar.Status.EvaluationError)
	}
	return sar.Status.Allowed, sar.Status.Reason
}

// TestRBACExactlyEnough holds that the Role and RoleBinding the controller made let the
// autoscaler do what the clusterapi provider does, and nothing it must not: no deletes,
// no writes to MachineDeployments or MachineSets but the scale of its autoscaled pools'
// (not a fixed pool's, not any other name), no Secrets, no Clusters, nothing in another
// tenant's namespace. It first proves the API server decides by RBAC: before the
// controller makes the binding, the same requests are denied, and an allowed one is
// allowed by that binding. A fixed pool made autoscaled gets its scale granted.
func TestRBACExactlyEnough(t *testing.T) {
	ns, other := newTenant(t), newTenant(t)

	// No AlwaysAllow: envtest runs kube-apiserver with --authorization-mode=RBAC, and
	// the ServiceAccount can do nothing yet.
	for _, a := range needed {
		if allowed, reason := canI(t, ns, ns, a); allowed {
			t.Fatalf("before the autoscaler exists, its ServiceAccount may %s (%s): the API server does not authorize by RBAC", a, reason)
		}
	}
	if allowed, _ := review(t, "nobody", []string{"system:authenticated"}, ns, access{verb: "get", resource: "secrets"}); allowed {
		t.Fatal("an unknown user may read Secrets: the API server does not authorize by RBAC")
	}

	newPool(t, ns, scaledPool, 0, 3)
	fixed := newPool(t, ns, fixedPool, 2, 2)
	newPool(t, other, scaledPool, 1, 3)
	waitRendered(t, fixed)
	waitAll(t, ns)
	waitAll(t, other)
	waitTemplateRule(t, ns)
	waitTemplateRule(t, other)

	binding := fmt.Sprintf("RoleBinding %q", name+"/"+ns)
	for _, a := range needed {
		allowed, reason := canI(t, ns, ns, a)
		switch {
		case !allowed:
			t.Errorf("the autoscaler may not %s in its namespace: %s", a, reason)
		case !strings.Contains(reason, binding):
			t.Errorf("%s is allowed, but not by the autoscaler's %s: %s", a, binding, reason)
		}
	}
	for _, a := range forbidden {
		if allowed, reason := canI(t, ns, ns, a); allowed {
			t.Errorf("the autoscaler may %s in its namespace: %s", a, reason)
		}
	}
	for _, a := range append([]access{{verb: "get", group: capi, resource: "machinedeployments"}}, needed...) {
		if allowed, reason := canI(t, ns, other, a); allowed {
			t.Errorf("the autoscaler of %s may %s in %s: %s", ns, a, other, reason)
		}
	}
	// Cluster-wide, nothing at all.
	for _, a := range needed {
		if allowed, reason := canI(t, ns, metav1.NamespaceAll, a); allowed {
			t.Errorf("the autoscaler of %s may %s in every namespace: %s", ns, a, reason)
		}
	}

	// The fixed pool made autoscaled: its MachineDeployment's scale is granted too,
	// and still no other name.
	resize(t, fixed, 1, 3)
	for _, verb := range []string{"get", "patch"} {
		a := access{verb: verb, group: capi, resource: "machinedeployments", subresource: "scale", name: fixedMD}
		testenv.Eventually(t, "the autoscaler may "+a.String(), func() bool {
			allowed, _ := canI(t, ns, ns, a)
			return allowed
		})
		if allowed, reason := canI(t, ns, ns, access{verb: verb, group: capi, resource: "machinedeployments", subresource: "scale", name: scaledMD}); !allowed {
			t.Errorf("the autoscaler may no longer %s the scale of %s: %s", verb, scaledMD, reason)
		}
		for _, n := range []string{"other-workers", ""} {
			if allowed, reason := canI(t, ns, ns, access{verb: verb, group: capi, resource: "machinedeployments", subresource: "scale", name: n}); allowed {
				t.Errorf("the autoscaler may %s the scale of %q: %s", verb, n, reason)
			}
		}
	}
}

// rulesEqual compares rules as the API server returns them (nil and empty lists equal).
func rulesEqual(got, want []rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(got, want) }

func mustItems(t *testing.T, list client.ObjectList) []client.Object {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		out = append(out, item.(client.Object))
	}
	return out
}
