package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := env.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

func pool(ns, name string) *v1.NodeGroup {
	return &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
		ClusterName: "tenant", MinReplicas: 1, MaxReplicas: 3, Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")}}}
}

// line is the line of text that starts with the given words, separated by any spaces.
func line(text string, words ...string) string {
	re := regexp.MustCompile(`(?m)^` + strings.Join(words, `\s+`) + `\b.*$`)
	return re.FindString(text)
}

// TestGet lists pools against a real API server, through a kubeconfig file and its
// contexts, as the CRD's table, with -A, -o wide and -o yaml.
func TestGet(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pools-a"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pools-b"}})
	web, db := pool("pools-a", "web"), pool("pools-b", "db")
	create(t, web, db)
	web.Status = v1.NodeGroupStatus{Ready: "2/3", Summary: "RollingOut", KubernetesVersion: "v1.35.4", MachineDeploymentName: "tenant-web", UpToDateReplicas: 1, AvailableReplicas: 2}
	if err := env.Client.Status().Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	asTenant(t, "pools-a")

	code, out, errOut := cli("tenant", "get", "-n", "pools-a")
	if code != 0 || !strings.Contains(line(out, "NAME"), "CLASS") || line(out, "web", "tenant", "talos", "in-cluster", "1", "3", "2/3", "RollingOut", "v1.35.4") == "" ||
		strings.Contains(out, "MACHINEDEPLOYMENT") || strings.Contains(out, "db") {
		t.Fatalf("get -n pools-a: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli("admin", "get", "-A", "-o", "wide")
	if code != 0 || line(out, "pools-a", "web", "tenant") == "" || line(out, "pools-b", "db", "tenant") == "" ||
		!strings.Contains(line(out, "pools-a", "web"), "tenant-web") || !strings.Contains(line(out, "NAMESPACE"), "MACHINEDEPLOYMENT") {
		t.Fatalf("get -A -o wide: exit %d:\n%s%s", code, out, errOut)
	}
	// A namespace the tenant may not read is refused by the API server, not hidden.
	if code, out, errOut := cli("tenant", "get", "-n", "pools-b"); code != 2 || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("get -n pools-b as the tenant: exit %d:\n%s%s", code, out, errOut)
	}
	if code, _, errOut := cli("admin", "get", "-n", "pools-a", "web", "nope"); code != 1 || !strings.Contains(errOut, `NodeGroup "nope" not found in namespace pools-a`) {
		t.Fatalf("get web nope: exit %d: %s", code, errOut)
	}

	// -o yaml round-trips: the List reads back as the pools the API server holds.
	code, out, errOut = cli("admin", "get", "-A", "-o", "yaml")
	list := &v1.NodeGroupList{}
	if err := yaml.UnmarshalStrict([]byte(out), list); code != 0 || err != nil {
		t.Fatalf("get -A -o yaml: exit %d, %v:\n%s%s", code, err, out, errOut)
	}
	stored := &v1.NodeGroupList{}
	if err := env.Client.List(ctx, stored); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(stored.Items) {
		t.Fatalf("-o yaml printed %d pools, the API server holds %d", len(list.Items), len(stored.Items))
	}
	for i, ng := range list.Items {
		want := stored.Items[i]
		if ng.Kind != "NodeGroup" || ng.Namespace != want.Namespace || ng.Name != want.Name || ng.ResourceVersion != want.ResourceVersion ||
			!equalJSON(t, ng.Spec, want.Spec) || !equalJSON(t, ng.Status, want.Status) {
			t.Fatalf("-o yaml item %d:\n%+v\nthe API server holds:\n%+v", i, ng, want)
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

// TestClasses shows the classes and locations and which locations a namespace may use,
// as the admin, who reads the namespace's labels, and as a tenant, who may not.
func TestClasses(t *testing.T) {
	open := &metav1.LabelSelector{}
	gold := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	location := func(name string, sel *metav1.LabelSelector) *v1.Location {
		return &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.LocationSpec{
			Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}}, AllowedNamespaces: sel}}
	}
	create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gold-tenant", Labels: map[string]string{"tier": "gold"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain-tenant"}},
		location("everyone", open), location("gold-only", gold),
		&v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "kairos-v1-35"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSKairos,
			Image: &v1.ClassImage{Reference: "registry.example.com/kairos@sha256:" + strings.Repeat("a", 64), KubernetesVersion: "v1.35.4"}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nodegroup-catalog"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group},
			Resources: []string{"nodegroupclasses", "locations"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodegroup-catalog"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nodegroup-catalog"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}}},
	)
	for _, tc := range []struct {
		context, namespace string
		everyone, goldOnly string
	}{
		{"admin", "gold-tenant", "yes", "yes"},
		{"admin", "plain-tenant", "yes", "no"},
		{"tenant", "gold-tenant", "unknown (cannot read namespace labels)", "unknown (cannot read namespace labels)"},
	} {
		code, out, errOut := cli(tc.context, "classes", "-n", tc.namespace)
		if code != 0 || line(out, "kairos-v1-35", "Kairos") == "" || !strings.Contains(out, "namespace "+tc.namespace) ||
			!strings.HasSuffix(line(out, "everyone", "KubeVirt"), " "+tc.everyone) || !strings.HasSuffix(line(out, "gold-only", "KubeVirt"), " "+tc.goldOnly) {
			t.Fatalf("classes -n %s as %s: exit %d:\n%s%s", tc.namespace, tc.context, code, out, errOut)
		}
	}
}
