package resolve_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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

// satelliteOf is the satellite Cluster of tenant Cluster namespace/cluster on location,
// as the operator makes it: labelled with the location, controlled by the tenant Cluster.
func satelliteOf(namespace, cluster, location string) *clusterv1.Cluster {
	sat := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names.SatelliteName(cluster, location),
		Labels: render.SatelliteLabels(&render.SatelliteInput{Cluster: render.Cluster{Name: cluster}, LocationName: location})}}
	tenant := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster, UID: "tenant-uid"}}
	sat.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(tenant, clusterv1.GroupVersion.WithKind("Cluster"))}
	return sat
}

// TestProxmoxLocationServesOneTenantCluster: a pool on a Proxmox location another tenant
// cluster's satellite is on fails LocationResolved (waiting), without naming the other
// tenant, when the location admits its namespace; once its own cluster has its
// satellite there, it resolves.
func TestProxmoxLocationServesOneTenantCluster(t *testing.T) {
	pool := rulecases.Pool("workers", func(s *v1.NodeGroupSpec) {
		s.ClusterName, s.NodeGroupClassName, s.LocationName = testenv.TenantCluster, v1.BuiltinTalosClass, "pve-lab"
		s.EphemeralStorage = resource.MustParse("20Gi")
	})
	pool.Namespace = "tenant-a"
	other := satelliteOf("tenant-b", "cluster-b", "pve-lab")

	open := rulecases.ProxmoxLocation("pve-lab", nil)
	open.Spec.AllowedNamespaces = &metav1.LabelSelector{} // every namespace

	// Another tenant's satellite on another location takes nothing here.
	r := tenantResolver(t, open, satelliteOf("tenant-b", "cluster-b", "pve-wan"))
	if _, err := r.Resolve(context.Background(), pool); err != nil {
		t.Fatalf("beside a satellite on another location: %v", err)
	}

	r = tenantResolver(t, open, other)
	_, err := r.Resolve(context.Background(), pool)
	var rerr *resolve.Error
	if !errors.As(err, &rerr) || rerr.Condition != v1.ConditionLocationResolved || rerr.Reason != resolve.ReasonLocationInUse || !rerr.Wait {
		t.Fatalf("a pool on a location another tenant cluster's satellite is on: %v, want LocationResolved=False %s, waiting", err, resolve.ReasonLocationInUse)
	}
	if strings.Contains(rerr.Message, "tenant-b") || strings.Contains(rerr.Message, "cluster-b") {
		t.Errorf("the message names the other tenant: %q", rerr.Message)
	}

	// A satellite that lost its owner (an orphaning delete of its tenant Cluster) still
	// holds the addresses of its machines.
	orphan := satelliteOf("tenant-b", "cluster-b", "pve-lab")
	orphan.OwnerReferences = nil
	r = tenantResolver(t, open, orphan)
	if _, err := r.Resolve(context.Background(), pool); !errors.As(err, &rerr) || rerr.Reason != resolve.ReasonLocationInUse {
		t.Fatalf("beside an orphaned satellite of another tenant: %v, want %s", err, resolve.ReasonLocationInUse)
	}

	// A location that does not admit the namespace says nothing of who is on it: the
	// policy refuses the pool for that, after resolve.
	closed := rulecases.ProxmoxLocation("pve-lab", nil)
	closed.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	r = tenantResolver(t, closed, other)
	if _, err := r.Resolve(context.Background(), pool); err != nil {
		t.Fatalf("a pool on a location that does not admit its namespace: %v, want resolved (and refused by the policy)", err)
	}

	r = tenantResolver(t, open, other, satelliteOf("tenant-a", testenv.TenantCluster, "pve-lab"))
	if _, err := r.Resolve(context.Background(), pool); err != nil {
		t.Fatalf("a pool whose own cluster has its satellite there: %v", err)
	}
}
