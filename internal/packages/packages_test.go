// Package packages holds the tests of the platform packages under packages/.
package packages

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

type provider struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Version  string   `json:"version"`
	Contract string   `json:"contract"`
	Serves   []string `json:"serves"`
	Reason   string   `json:"reason"`
}

// TestProviderPinsServeWhatTheRendererEmits: every API version the operator writes or
// reads on a provider's kinds is served by exactly one pinned provider, and every pin
// says why.
func TestProviderPinsServeWhatTheRendererEmits(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "packages", "capi-providers", "providers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Providers []provider `json:"providers"`
	}
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		t.Fatal(err)
	}
	emitted := map[string]string{
		clusterv1.GroupVersion.String():                "MachineDeployment, MachineHealthCheck",
		capk.GroupVersion.String():                     "KubevirtMachineTemplate",
		talos.GroupVersion.String():                    "TalosConfigTemplate",
		kairos.GroupVersion.String():                   "KairosConfigTemplate",
		kamaji.ControlPlaneGVK.GroupVersion().String(): "KamajiControlPlane",
	}
	for gv, kinds := range emitted {
		var by []string
		for _, p := range doc.Providers {
			if slices.Contains(p.Serves, gv) {
				by = append(by, p.Name)
			}
		}
		if len(by) != 1 {
			t.Errorf("%s (%s) is served by %v, want exactly one pinned provider", gv, kinds, by)
		}
	}
	for _, p := range doc.Providers {
		if p.Version == "" || p.Reason == "" || p.Contract == "" {
			t.Errorf("provider %s: version %q, contract %q, reason %q: all are required", p.Name, p.Version, p.Contract, p.Reason)
		}
	}
}

// TestProviderPinsMatchTheTestedCRDs: the tests validate rendered objects against the
// CRDs of exactly the pinned versions.
func TestProviderPinsMatchTheTestedCRDs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "packages", "capi-providers", "providers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Providers []provider `json:"providers"`
	}
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, u := range testenv.UpstreamCRDs() {
		tested[u.Version] = true
		tested[u.Ref] = true
	}
	for _, p := range doc.Providers {
		if !tested[p.Version] {
			t.Errorf("provider %s is pinned at %s, but the tests take CRDs of no such version", p.Name, p.Version)
		}
	}
}
