package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/gobuild"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestTenantReadsTheCatalogAndItsOwnNamespace installs the chart's tenant-view and
// catalog-reader roles and the catalog binding (default values), binds a ServiceAccount
// of tenant-a to tenant-view in tenant-a only, as a platform binds a tenant, and then acts
// as that ServiceAccount (impersonation, so the API server adds its groups): it reads
// the catalog and its own Namespace, and nothing of tenant-b. `kubectl nodegroup classes`
// run as it then says for each location whether tenant-a may use it.
func TestTenantReadsTheCatalogAndItsOwnNamespace(t *testing.T) {
	ctx := context.Background()
	createRendered(t, objects(t, render(t, nil)),
		"ClusterRole/nodegroup-operator-tenant-view", "ClusterRole/nodegroup-operator-catalog-reader", "ClusterRoleBinding/nodegroup-operator-catalog-reader")
	ensureNamespace(t, "tenant-a")
	ensureNamespace(t, "tenant-b")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "catalog-viewer"}}
	open := location("catalog-open", &metav1.LabelSelector{})
	gold := location("catalog-gold", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}})
	class := &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "catalog-class"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos}}
	for _, obj := range []client.Object{sa, open, gold, class} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	bind(t, "tenant-a", "catalog-viewer", "nodegroup-operator-tenant-view",
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name})

	user := "system:serviceaccount:tenant-a:catalog-viewer"
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	tenant, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer sees the bindings through its informers, a moment later.
	testenv.Eventually(t, "the ServiceAccount reads its Namespace and the catalog", func() bool {
		return tenant.Get(ctx, client.ObjectKey{Name: "tenant-a"}, &corev1.Namespace{}) == nil &&
			tenant.List(ctx, &v1.LocationList{}) == nil
	})

	classes := &v1.NodeGroupClassList{}
	if err := tenant.List(ctx, classes); err != nil || !containsName(classes.Items, class.Name) {
		t.Errorf("list NodeGroupClasses: %v, %d listed", err, len(classes.Items))
	}
	locations := &v1.LocationList{}
	if err := tenant.List(ctx, locations); err != nil || !containsName(locations.Items, open.Name) || !containsName(locations.Items, gold.Name) {
		t.Errorf("list Locations: %v, %d listed", err, len(locations.Items))
	}
	if err := tenant.List(ctx, &v1.NodeGroupList{}, client.InNamespace("tenant-a")); err != nil {
		t.Errorf("list NodeGroups in tenant-a: %v", err)
	}
	for what, err := range map[string]error{
		"get Namespace tenant-b":      tenant.Get(ctx, client.ObjectKey{Name: "tenant-b"}, &corev1.Namespace{}),
		"list Namespaces":             tenant.List(ctx, &corev1.NamespaceList{}),
		"list NodeGroups in tenant-b": tenant.List(ctx, &v1.NodeGroupList{}, client.InNamespace("tenant-b")),
		"list NodeGroups, all":        tenant.List(ctx, &v1.NodeGroupList{}),
		"create a NodeGroupClass":     tenant.Create(ctx, &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "forged"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos}}, client.DryRunAll),
		"update the Namespace":        tenant.Update(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}, client.DryRunAll),
		"delete a Location":           tenant.Delete(ctx, open.DeepCopy(), client.DryRunAll),
		"list Secrets in tenant-a":    tenant.List(ctx, &corev1.SecretList{}, client.InNamespace("tenant-a")),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want forbidden", what, err)
		}
	}

	// The plugin, as the ServiceAccount (kubectl's --as), computes USABLE for tenant-a; for
	// tenant-b, whose labels it may not read, it says so.
	plugin := filepath.Join(t.TempDir(), "kubectl-nodegroup")
	if err := gobuild.Build(ctx, testenv.RepoRoot(), "./cmd/kubectl-nodegroup", gobuild.Host(), "", plugin); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ namespace, open, gold string }{
		{"tenant-a", "yes", "no"},
		{"tenant-b", "unknown (cannot read namespace labels)", "unknown (cannot read namespace labels)"},
	} {
		out, err := exec.Command(plugin, "classes", "-n", tc.namespace, "--kubeconfig", kubeconfig, "--as", user).CombinedOutput()
		if err != nil || !regexp.MustCompile(`(?m)^catalog-class\s+Talos\b`).Match(out) ||
			!regexp.MustCompile(`(?m)^catalog-open\s+KubeVirt\b.*\s`+regexp.QuoteMeta(tc.open)+`$`).Match(out) ||
			!regexp.MustCompile(`(?m)^catalog-gold\s+KubeVirt\b.*\s`+regexp.QuoteMeta(tc.gold)+`$`).Match(out) {
			t.Errorf("kubectl nodegroup classes -n %s --as %s: %v\n%s", tc.namespace, user, err, out)
		}
		if tc.namespace == "tenant-a" && strings.Contains(string(out), "unknown") {
			t.Errorf("classes -n tenant-a still says unknown:\n%s", out)
		}
	}
}

func location(name string, allowed *metav1.LabelSelector) *v1.Location {
	return &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.LocationSpec{
		Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}}, AllowedNamespaces: allowed}}
}

func containsName[T any, PT interface {
	*T
	client.Object
}](items []T, name string) bool {
	for i := range items {
		if PT(&items[i]).GetName() == name {
			return true
		}
	}
	return false
}
