package render_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestProxmoxObjectsPassUpstreamCRDs creates every rendered Proxmox object against
// capmox v0.9.0's own CRDs (shared/crds-upstream, checked by sha256), offline and as the
// API server would: unknown fields refused (strict), defaults, schema and CEL rules. The
// hostile case's template, whose tags and bridge the Location CRD would refuse, is
// refused by capmox's CRD too. The real API server checks the golden files as well
// (internal/controller/nodegroup, TestGoldenObjectsAcceptedByUpstreamCRDs).
func TestProxmoxObjectsPassUpstreamCRDs(t *testing.T) {
	crds, err := testenv.ProviderCRDs()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]*customresource.Kind{}
	for _, crd := range crds {
		if !strings.HasPrefix(crd.Name, "proxmox") {
			continue
		}
		k, err := customresource.FromCRD(crd, capmox.GroupVersion.Version)
		if err != nil {
			t.Fatal(err)
		}
		kinds[k.GroupVersionKind().Kind] = k
	}
	if len(kinds) != 2 {
		t.Fatalf("want the ProxmoxMachineTemplate and ProxmoxCluster CRDs, got %d", len(kinds))
	}
	checked := 0
	for name, objs := range render.ProxmoxObjectsForTest(t) {
		for _, obj := range objs {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			k := kinds[u.GetKind()]
			if k == nil || u.GetAPIVersion() != capmox.GroupVersion.String() {
				t.Fatalf("%s: rendered %s %s, which no capmox CRD serves", name, u.GetAPIVersion(), u.GetKind())
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
	if checked < 6 {
		t.Errorf("checked %d objects, want the template and cluster of at least three cases", checked)
	}
}
