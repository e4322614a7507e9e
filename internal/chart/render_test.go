package chart

import (
	"testing"

	"github.com/nodegroup-io/nodegroup-operator/internal/golden"
)

// TestRenderGolden renders each values case as `helm template` would and compares the
// output with testdata/<case>.golden.yaml (UPDATE=1 rewrites them).
func TestRenderGolden(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			out := render(t, parseValues(t, tc.values))
			objects(t, out) // every document decodes strictly, with a kind and a name
			golden.Check(t, tc.name, manifest(out))
		})
	}
}
