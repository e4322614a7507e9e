package chart

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// parentChartDir is a platform's chart that has this one as a dependency
// (testdata/parent; its charts/nodegroup-operator links to the chart itself).
func parentChartDir() string { return filepath.Join("testdata", "parent") }

// TestParentChartGolden renders the parent chart as `helm template` would, with the
// values a platform passes (global, the dependency's condition, the operator's values
// under its name), and compares it with testdata/parent.golden.yaml. The operator's
// objects are checked as the plain renders are: every document decodes strictly.
func TestParentChartGolden(t *testing.T) {
	out := renderChart(t, loadDir(t, parentChartDir()), nil)
	objs := objects(t, out)
	golden.Check(t, "parent", manifest(out))

	// What the parent passed reached the operator's objects.
	deploy := find(t, objs, "Deployment", "nodegroup-operator")
	secrets, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "imagePullSecrets")
	if len(secrets) != 1 || secrets[0].(map[string]any)["name"] != "platform-registry" {
		t.Errorf("global.imagePullSecrets did not reach the pods: %v", secrets)
	}
	if args := operatorArgs(t, deploy); args["zap-encoder"] != "console" {
		t.Errorf("extraArgs did not reach the operator: %v", args)
	}
	find(t, objs, "NetworkPolicy", "nodegroup-operator")
	find(t, objs, "ConfigMap", "platform-settings")
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			t.Errorf("CRD %s rendered: crds.enabled defaults to false", o.GetName())
		}
	}

	// The operator's schema still refuses an unknown key under the parent's values.
	_, err := renderValues(loadDir(t, parentChartDir()), parseValues(t, "nodegroup-operator:\n  replicas: 3\n"))
	if err == nil || !strings.Contains(err.Error(), "nodegroup-operator:\n- at '': additional properties 'replicas' not allowed") {
		t.Errorf("an unknown key under the parent's values: %v", err)
	}
}
