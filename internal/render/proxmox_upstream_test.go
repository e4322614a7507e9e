package render_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestProxmoxObjectsPassUpstreamCRDs creates every rendered Proxmox object against
// the CRD that serves it, offline and as the API server would: unknown fields refused
// (strict), defaults, schema and CEL rules. The ProxmoxMachineTemplate and
// ProxmoxCluster against capmox v0.9.0's own CRDs, the pool's TalosConfigTemplate
// against CABPT's, and its MachineDeployment and health check and the satellite's
// Cluster against Cluster API's (shared/crds-upstream, checked by sha256), its SatelliteControlPlane
// against the operator's. The hostile case's template, whose tags and bridge the
// Location CRD would refuse, is refused by capmox's CRD too. The real API server checks
// the golden files as well (internal/controller/nodegroup,
// TestGoldenObjectsAcceptedByUpstreamCRDs).
func TestProxmoxObjectsPassUpstreamCRDs(t *testing.T) {
	crds, err := testenv.ProviderCRDs()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]*customresource.Kind{}
	add := func(crd []byte, version string) {
		k, err := customresource.Load(crd, version)
		if err != nil {
			t.Fatal(err)
		}
		kinds[k.GroupVersionKind().GroupVersion().String()+"/"+k.GroupVersionKind().Kind] = k
	}
	for _, crd := range crds {
		var version string
		switch {
		case strings.HasPrefix(crd.Name, "proxmox"):
			version = capmox.GroupVersion.Version
		case slices.Contains([]string{"clusters", "machinedeployments", "machinehealthchecks"}, crd.Spec.Names.Plural) && crd.Spec.Group == clusterv1.GroupVersion.Group:
			version = clusterv1.GroupVersion.Version
		case crd.Name == "talosconfigtemplates."+talos.GroupVersion.Group:
			version = talos.GroupVersion.Version
		default:
			continue
		}
		k, err := customresource.FromCRD(crd, version)
		if err != nil {
			t.Fatal(err)
		}
		kinds[k.GroupVersionKind().GroupVersion().String()+"/"+k.GroupVersionKind().Kind] = k
	}
	own, err := os.ReadFile(filepath.Join(testenv.CRDDir(), "controlplane.nodegroup.io_satellitecontrolplanes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	add(own, cpv1.GroupVersion.Version)
	if len(kinds) != 7 {
		t.Fatalf("want the ProxmoxMachineTemplate, ProxmoxCluster, Cluster, MachineDeployment, MachineHealthCheck, TalosConfigTemplate and SatelliteControlPlane CRDs, got %d", len(kinds))
	}
	checked := 0
	for name, objs := range render.ProxmoxObjectsForTest(t) {
		for _, obj := range objs {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			k := kinds[u.GetAPIVersion()+"/"+u.GetKind()]
			if k == nil {
				t.Fatalf("%s: rendered %s %s, which none of the CRDs serves", name, u.GetAPIVersion(), u.GetKind())
			}
			err = k.Create(context.Background(), u)
			switch {
			case name == "proxmox-hostile" && u.GetKind() == "ProxmoxMachineTemplate" && err == nil:
				t.Errorf("%s: capmox's CRD accepts the hostile template", name)
			case name != "proxmox-hostile" && err != nil:
				t.Errorf("%s: capmox's CRD refuses the %s: %v", name, u.GetKind(), err)
			}
			checked++
		}
	}
	if checked < 21 {
		t.Errorf("checked %d objects, want the seven objects of at least three cases", checked)
	}
}
