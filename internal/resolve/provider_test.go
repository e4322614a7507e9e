package resolve_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/rulecases"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// tenantResolver resolves pools of the test tenant's namespace from an offline store
// holding the tenant's objects, its Service with the address the API server would give
// it, and extra.
func tenantResolver(t *testing.T, extra ...client.Object) *resolve.Resolver {
	t.Helper()
	store := offline.NewStore(scheme.New())
	once, objs, err := testenv.TenantObjects("tenant-a", testenv.TenantOptions{TalosSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range append(append(once, objs...), extra...) {
		if svc, ok := obj.(*corev1.Service); ok {
			svc.Spec.ClusterIP = "10.96.12.34"
		}
		if err := store.AddObject(obj); err != nil {
			t.Fatal(err)
		}
	}
	return &resolve.Resolver{Client: store, APIReader: store, Mapper: offline.Mapper(), Catalog: catalog.Default()}
}

// TestLocationProviders: a pool on a Proxmox location resolves and renders, its
// machines under the tenant's satellite there; a provider with no renderer at all fails
// LocationResolved.
func TestLocationProviders(t *testing.T) {
	hcloud := rulecases.KubeVirtLocation("hel1")
	hcloud.Spec.Provider = v1.LocationProvider{Type: v1.ProviderHCloud,
		HCloud: &v1.HCloudProvider{CredentialsRef: v1.SecretReference{Namespace: "platform", Name: "hcloud"}, Location: "hel1"}}
	r := tenantResolver(t, rulecases.ProxmoxLocation("pve-lab", nil), hcloud)
	pool := func(location string) *v1.NodeGroup {
		ng := rulecases.Pool("workers", func(s *v1.NodeGroupSpec) {
			s.ClusterName, s.NodeGroupClassName, s.LocationName = testenv.TenantCluster, v1.BuiltinTalosClass, location
			s.EphemeralStorage = resource.MustParse("20Gi") // the API's default
		})
		ng.Namespace = "tenant-a"
		return ng
	}

	in, err := r.Resolve(context.Background(), pool("pve-lab"))
	if err != nil {
		t.Fatalf("a pool on a Proxmox location does not resolve: %v", err)
	}
	out, err := render.Render(in)
	if err != nil {
		t.Fatalf("a pool on a Proxmox location does not render: %v", err)
	}
	if got, want := out.MachineDeployment.Spec.ClusterName, names.SatelliteName(testenv.TenantCluster, "pve-lab"); got != want {
		t.Errorf("MachineDeployment under %q, want the satellite %s", got, want)
	}

	_, err = r.Resolve(context.Background(), pool("hel1"))
	var rerr *resolve.Error
	if !errors.As(err, &rerr) || rerr.Condition != v1.ConditionLocationResolved || rerr.Reason != resolve.ReasonProviderNotSupported {
		t.Fatalf("a pool on an HCloud location: %v, want LocationResolved=False %s", err, resolve.ReasonProviderNotSupported)
	}
}
