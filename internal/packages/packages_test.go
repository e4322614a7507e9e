package packages

import (
	"slices"
	"strings"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// pins reads packages/capi-providers/providers.yaml.
func pins(t *testing.T) []Provider {
	t.Helper()
	providers, err := Providers(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	return providers
}

// emitted are the API versions the operator writes or reads on providers' kinds.
var emitted = map[string]string{
	clusterv1.GroupVersion.String():                "MachineDeployment, MachineHealthCheck",
	capk.GroupVersion.String():                     "KubevirtMachineTemplate",
	capmox.GroupVersion.String():                   "ProxmoxMachineTemplate, ProxmoxCluster",
	talos.GroupVersion.String():                    "TalosConfigTemplate",
	kairos.GroupVersion.String():                   "KairosConfigTemplate",
	kamaji.ControlPlaneGVK.GroupVersion().String(): "KamajiControlPlane",
}

// rendersFor says whether the operator writes or reads a kind p serves.
func rendersFor(p Provider) bool {
	return slices.ContainsFunc(p.Serves, func(gv string) bool { return emitted[gv] != "" })
}

// TestProviderPinsServeWhatTheRendererEmits: every API version the operator writes or
// reads on a provider's kinds is served by exactly one pinned provider, and every pin
// says why.
func TestProviderPinsServeWhatTheRendererEmits(t *testing.T) {
	providers := pins(t)
	for gv, kinds := range emitted {
		var by []string
		for _, p := range providers {
			if slices.Contains(p.Serves, gv) {
				by = append(by, p.Name)
			}
		}
		if len(by) != 1 {
			t.Errorf("%s (%s) is served by %v, want exactly one pinned provider", gv, kinds, by)
		}
	}
	for _, p := range providers {
		if p.Version == "" || p.Reason == "" || p.Contract == "" {
			t.Errorf("provider %s: version %q, contract %q, reason %q: all are required", p.Name, p.Version, p.Contract, p.Reason)
		}
		for _, arg := range p.Args {
			if name, value, ok := strings.Cut(arg, "="); !ok || !strings.HasPrefix(name, "--") || value == "" {
				t.Errorf("provider %s: arg %q is not --flag=value", p.Name, arg)
			}
		}
		if ns, name, ok := strings.Cut(p.ServiceAccount, "/"); len(p.Args) > 0 && (!ok || ns == "" || name == "") {
			t.Errorf("provider %s has args but its serviceAccount %q is not namespace/name", p.Name, p.ServiceAccount)
		}
		// A provider none of whose kinds the operator uses is pinned only for another
		// pinned provider that the operator does use.
		if !rendersFor(p) {
			i := slices.IndexFunc(providers, func(o Provider) bool { return o.Name == p.RequiredBy })
			if i < 0 || !rendersFor(providers[i]) {
				t.Errorf("provider %s serves nothing the operator uses and names no pinned provider it is required by (requiredBy %q)", p.Name, p.RequiredBy)
			}
		}
	}
}

// TestProviderPinsMatchTheTestedCRDs: the tests validate rendered objects against the
// CRDs of exactly the pinned versions (of the providers whose kinds the operator uses).
func TestProviderPinsMatchTheTestedCRDs(t *testing.T) {
	tested := map[string]bool{}
	for _, u := range testenv.UpstreamCRDs() {
		tested[u.Version] = true
		tested[u.Ref] = true
	}
	for _, p := range pins(t) {
		if rendersFor(p) && !tested[p.Version] {
			t.Errorf("provider %s is pinned at %s, but the tests take CRDs of no such version", p.Name, p.Version)
		}
	}
}
