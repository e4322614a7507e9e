package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/golden"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestOperatorClusterRoleIsGeneratedFromMarkers runs controller-gen over the
// +kubebuilder:rbac markers in internal/ (the command `make generate` runs) and checks
// that the ClusterRole the chart renders grants exactly those rules, and that the
// checked-in files/rbac/role.yaml is current. A marker added to a controller without
// `make generate`, or a rule edited in the chart, fails here.
func TestOperatorClusterRoleIsGeneratedFromMarkers(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run controller-gen: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(goBin, "tool", "controller-gen", "rbac:roleName=nodegroup-operator", "paths=./internal/...", "output:rbac:artifacts:config="+dir)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, out)
	}
	generated, err := os.ReadFile(filepath.Join(dir, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checkedIn, err := os.ReadFile(filepath.Join(chartDir(), "files", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(checkedIn) != string(generated) {
		t.Errorf("charts/nodegroup-operator/files/rbac/role.yaml is not what the markers generate: run `make generate`\n%s", golden.Diff(string(generated), string(checkedIn)))
	}
	want := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(generated, want); err != nil {
		t.Fatal(err)
	}
	if len(want.Rules) == 0 {
		t.Fatal("controller-gen generated no rules")
	}

	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			got := &rbacv1.ClusterRole{}
			u := find(t, objects(t, render(t, parseValues(t, tc.values))), "ClusterRole", "nodegroup-operator")
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Rules, want.Rules) {
				gotYAML, _ := yaml.Marshal(got.Rules)
				wantYAML, _ := yaml.Marshal(want.Rules)
				t.Errorf("the chart's operator ClusterRole differs from the markers' rules:\n%s", golden.Diff(string(wantYAML), string(gotYAML)))
			}
		})
	}
}

// TestTenantsManagePoolsButNeverPublishClassesOrLocations installs the chart's tenant
// ClusterRoles and asks the API server's RBAC authorizer (SubjectAccessReview) what a
// tenant may do.
//
// The test API server runs no kube-controller-manager, so nothing aggregates the
// labelled roles into edit, admin and view. The test does what the
// clusterrole-aggregation controller does, with the aggregation rules read from the
// server's own built-in roles: it writes into each the rules of every ClusterRole its
// selectors match. A tenant is then bound to the real edit role, as platforms bind
// tenants; and, as the aggregation-free case, straight to the tenant-edit role.
func TestTenantsManagePoolsButNeverPublishClassesOrLocations(t *testing.T) {
	createRendered(t, objects(t, render(t, nil)), "ClusterRole/nodegroup-operator-tenant-edit", "ClusterRole/nodegroup-operator-tenant-view")
	ensureNamespace(t, "tenant-a")
	ensureNamespace(t, "tenant-b")
	alice := subject{user: "alice", groups: []string{"system:authenticated"}}   // edit in tenant-a
	bob := subject{user: "bob", groups: []string{"system:authenticated"}}       // tenant-edit in tenant-a, directly
	carol := subject{user: "carol", groups: []string{"system:authenticated"}}   // admin in tenant-a
	victor := subject{user: "victor", groups: []string{"system:authenticated"}} // view in tenant-a
	bind(t, "tenant-a", "alice-edit", "edit", userSubject(alice.user))
	bind(t, "tenant-a", "bob-tenant-edit", "nodegroup-operator-tenant-edit", userSubject(bob.user))
	bind(t, "tenant-a", "carol-admin", "admin", userSubject(carol.user))
	bind(t, "tenant-a", "victor-view", "view", userSubject(victor.user))

	pools := func(ns, verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "nodegroup.io", Resource: "nodegroups"}
	}
	// Before aggregation the built-in roles grant nothing on pools: what alice, carol
	// and victor get below comes from the chart's labels.
	for _, s := range []subject{alice, carol, victor} {
		expectAccess(t, s, false, pools("tenant-a", "get"))
	}
	for _, name := range []string{"edit", "admin", "view"} {
		aggregate(t, name)
	}
	for _, s := range []subject{alice, bob, carol} {
		for _, verb := range []string{"create", "update", "patch", "delete", "get", "list", "watch"} {
			expectAccess(t, s, true, pools("tenant-a", verb))
		}
		expectAccess(t, s, false, pools("tenant-b", "create"))
		expectAccess(t, s, false, authorizationv1.ResourceAttributes{Namespace: "tenant-a", Verb: "update", Group: "nodegroup.io", Resource: "nodegroups", Subresource: "status"})
		for _, resource := range []string{"nodegroupclasses", "locations"} {
			for _, verb := range []string{"create", "update", "patch", "delete"} {
				expectAccess(t, s, false, authorizationv1.ResourceAttributes{Verb: verb, Group: "nodegroup.io", Resource: resource})
				// A namespaced binding never reaches cluster-scoped objects, even if
				// asked about in the tenant's namespace.
				expectAccess(t, s, false, authorizationv1.ResourceAttributes{Namespace: "tenant-a", Verb: verb, Group: "nodegroup.io", Resource: resource})
			}
		}
	}
	for _, verb := range []string{"get", "list", "watch"} {
		expectAccess(t, victor, true, pools("tenant-a", verb))
	}
	for _, verb := range []string{"create", "update", "delete"} {
		expectAccess(t, victor, false, pools("tenant-a", verb))
	}
}

// aggregate does what the clusterrole-aggregation controller does for the built-in role
// name: its rules become those of every ClusterRole its aggregationRule selects. The
// role's rules are restored when the test ends.
func aggregate(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, role); err != nil {
		t.Fatal(err)
	}
	if role.AggregationRule == nil || len(role.AggregationRule.ClusterRoleSelectors) == 0 {
		t.Fatalf("the built-in %s role has no aggregation rule", name)
	}
	all := &rbacv1.ClusterRoleList{}
	if err := env.Client.List(ctx, all); err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range all.Items {
			if other.Name != name && selector.Matches(labels.Set(other.Labels)) {
				rules = append(rules, other.Rules...)
			}
		}
	}
	before := role.Rules
	role.Rules = rules
	if err := env.Client.Update(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		restored := &rbacv1.ClusterRole{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Name: name}, restored); err == nil {
			restored.Rules = before
			_ = env.Client.Update(context.Background(), restored)
		}
	})
}

// createRendered creates the rendered objects named kind/name, and deletes them when
// the test ends.
func createRendered(t *testing.T, objs []*unstructured.Unstructured, kindNames ...string) {
	t.Helper()
	for _, kn := range kindNames {
		kind, name, _ := strings.Cut(kn, "/")
		obj := find(t, objs, kind, name).DeepCopy()
		if err := env.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}
}

// bind binds a subject to a ClusterRole in a namespace, as a platform binds a tenant.
func bind(t *testing.T, ns, name, clusterRole string, who rbacv1.Subject) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{who},
	}
	if err := env.Client.Create(context.Background(), rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), rb, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
}

// TestOnlyTheOperatorReadsSecrets checks every role the chart renders: only the
// operator's own ClusterRole may read Secrets in any namespace (the tenants' Talos join
// identities, with the machine CA key, are Secrets), and the webhook's Role only its
// certificate's Secret, by name.
func TestOnlyTheOperatorReadsSecrets(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, u := range objects(t, render(t, parseValues(t, tc.values))) {
				if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
					continue
				}
				role := &rbacv1.ClusterRole{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil {
					t.Fatal(err)
				}
				for _, rule := range role.Rules {
					if !slicesContainAny(rule.APIGroups, "", "*") || !slicesContainAny(rule.Resources, "secrets", "*") ||
						!slicesContainAny(rule.Verbs, "get", "list", "watch", "*") {
						continue
					}
					switch {
					case u.GetKind() == "ClusterRole" && u.GetName() == "nodegroup-operator":
					case u.GetKind() == "Role" && len(rule.ResourceNames) > 0:
					default:
						t.Errorf("%s %s lets its subjects read Secrets: %+v", u.GetKind(), u.GetName(), rule)
					}
				}
			}
		})
	}
}

func slicesContainAny(list []string, values ...string) bool {
	for _, v := range values {
		if slices.Contains(list, v) {
			return true
		}
	}
	return false
}
