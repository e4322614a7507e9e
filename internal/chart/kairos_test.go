package chart

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/packages"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// kairosExtraKindsFlag is the Kairos bootstrap manager's flag that widens the list of
// control-plane kinds a kubeadm worker may join.
const kairosExtraKindsFlag = "--kubeadm-extra-controlplane-kinds"

// TestKairosBootstrapProviderReadsSatellitesOnly: the Kairos provider pinned in
// packages/capi-providers/providers.yaml runs with the flag that makes it trust the
// operator's satellite control-plane kind (by group and kind, as the provider parses
// it); the chart's defaults bind nothing, and kairosBootstrap.serviceAccount set to
// that pin's ServiceAccount binds it alone, which, acting through the API server, may
// then read SatelliteControlPlanes and nothing more of what the operator or Cluster
// API keeps.
func TestKairosBootstrapProviderReadsSatellitesOnly(t *testing.T) {
	kairos := kairosPin(t)
	var kinds []schema.GroupKind
	for _, arg := range kairos.Args {
		if value, ok := strings.CutPrefix(arg, kairosExtraKindsFlag+"="); ok {
			for entry := range strings.SplitSeq(value, ",") {
				kind, group, _ := strings.Cut(strings.TrimSpace(entry), ".")
				kinds = append(kinds, schema.GroupKind{Group: group, Kind: kind})
			}
		}
	}
	satellite := controlplanev1.GroupVersion.WithKind("SatelliteControlPlane").GroupKind()
	if !slices.Contains(kinds, satellite) {
		t.Fatalf("the pinned Kairos provider's args %q do not add %s to %s", kairos.Args, satellite, kairosExtraKindsFlag)
	}

	for _, u := range objects(t, render(t, nil)) {
		if strings.HasSuffix(u.GetName(), "-kairos-satellites") {
			t.Errorf("the default values render %s %s: nothing of the Kairos provider's is bound unless asked", u.GetKind(), u.GetName())
		}
	}
	ns, name, _ := strings.Cut(kairos.ServiceAccount, "/")
	objs := objects(t, render(t, map[string]any{"kairosBootstrap": map[string]any{
		"serviceAccount": map[string]any{"name": name, "namespace": ns}}}))
	binding := find(t, objs, "ClusterRoleBinding", "nodegroup-operator-kairos-satellites")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if len(subjects) != 1 {
		t.Fatalf("the binding has %d subjects, want the provider's ServiceAccount alone", len(subjects))
	}
	subject := subjects[0].(map[string]any)
	if got := subject["namespace"].(string) + "/" + subject["name"].(string); got != kairos.ServiceAccount {
		t.Fatalf("the chart binds %s, the value names %s", got, kairos.ServiceAccount)
	}
	createRendered(t, objs, "ClusterRole/nodegroup-operator-kairos-satellites", "ClusterRoleBinding/nodegroup-operator-kairos-satellites")

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name}
	provider, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The RBAC authorizer sees the binding through its informers, a moment later.
	testenv.Eventually(t, "the provider lists SatelliteControlPlanes", func() bool {
		return provider.List(ctx, &controlplanev1.SatelliteControlPlaneList{}) == nil
	})
	forged := &controlplanev1.SatelliteControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "forged"}}
	for what, err := range map[string]error{
		"create a SatelliteControlPlane": provider.Create(ctx, forged, client.DryRunAll),
		"delete a SatelliteControlPlane": provider.Delete(ctx, forged.DeepCopy(), client.DryRunAll),
		"list Secrets":                   provider.List(ctx, &corev1.SecretList{}),
		"list Clusters":                  provider.List(ctx, &clusterv1.ClusterList{}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want forbidden", what, err)
		}
	}
}

// kairosPin is the Kairos bootstrap provider's entry in providers.yaml.
func kairosPin(t *testing.T) packages.Provider {
	t.Helper()
	providers, err := packages.Providers(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(providers, func(p packages.Provider) bool { return p.Name == "kairos" })
	if i < 0 {
		t.Fatal("providers.yaml pins no kairos provider")
	}
	return providers[i]
}
