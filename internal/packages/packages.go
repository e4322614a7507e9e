// Package packages reads the platform packages under packages/. Its tests hold the
// Cluster API provider pins there to what the operator renders; the chart's tests read
// the pins here too, for what the chart must grant a provider.
package packages

import (
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Provider is one pinned Cluster API provider of packages/capi-providers/providers.yaml.
type Provider struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Version  string   `json:"version"`
	Contract string   `json:"contract"`
	Serves   []string `json:"serves"`
	// RequiredBy names the pinned provider that needs this one, for a provider whose
	// kinds the operator neither renders nor reads (capmox's IPAM provider).
	RequiredBy string `json:"requiredBy,omitempty"`
	Reason     string `json:"reason"`
	// Args are flags its manager must run with for the objects the operator makes, and
	// ServiceAccount (namespace/name) that manager's identity, which the chart grants
	// what those flags need (internal/chart checks the grant).
	Args           []string `json:"args,omitempty"`
	ServiceAccount string   `json:"serviceAccount,omitempty"`
}

// Providers reads packages/capi-providers/providers.yaml under the repository root,
// refusing a field it does not know.
func Providers(root string) ([]Provider, error) {
	data, err := os.ReadFile(filepath.Join(root, "packages", "capi-providers", "providers.yaml"))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Providers []Provider `json:"providers"`
	}
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return nil, err
	}
	return doc.Providers, nil
}
