package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs `helm lint --strict` (action.Lint with Strict: Chart.yaml, values,
// templates rendered and parsed, dependencies; a warning fails as an error does) on the
// chart with each values case, on the CRD chart, and on a parent chart that embeds this
// one. The only message allowed is Info (the charts have no icon).
func TestLint(t *testing.T) {
	// The oldest Kubernetes the charts support (kubeVersion), so an API deprecated by
	// then is a warning.
	kubeVersion := &chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}
	lint := func(t *testing.T, dir string, values map[string]any) {
		t.Helper()
		l := action.NewLint()
		l.Strict, l.Namespace, l.KubeVersion = true, releaseNamespace, kubeVersion
		res := l.Run([]string{dir}, values)
		if res.TotalChartsLinted != 1 {
			t.Errorf("%d charts linted, want 1", res.TotalChartsLinted)
		}
		for _, err := range res.Errors {
			t.Errorf("helm lint --strict: %v", err)
		}
		for _, m := range res.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("helm lint: %s", m)
			}
		}
	}
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) { lint(t, chartDir(), parseValues(t, tc.values)) })
	}
	t.Run("crds", func(t *testing.T) { lint(t, crdChartDir(), nil) })
	t.Run("parent", func(t *testing.T) { lint(t, parentChartDir(), nil) })

	// Strict is strict: a template that renders nothing but a deprecated API is a
	// warning, and fails.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(crdChartDir())); err != nil {
		t.Fatal(err)
	}
	old := "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: old\nspec:\n  minAvailable: 1\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "old.yaml"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	l := action.NewLint()
	l.Strict, l.KubeVersion = true, kubeVersion
	if res := l.Run([]string{dir}, nil); len(res.Errors) == 0 {
		t.Errorf("helm lint --strict passed a deprecated API: %v", res.Messages)
	}
}

// TestSchemaRefuses checks that values.schema.json refuses unknown keys and wrong types
// at install, with the whole message `helm install` prints: it names the chart, the
// key's path and what is wrong.
func TestSchemaRefuses(t *testing.T) {
	const header = "values don't meet the specifications of the schema(s) in the following chart(s):\nnodegroup-operator:\n"
	c := loadChart(t)
	for _, tc := range []struct{ name, values, want string }{
		{"unknown top-level key", "replicas: 3\n",
			"- at '': additional properties 'replicas' not allowed\n"},
		{"unknown nested key", "webhook:\n  certmanager:\n    enabled: true\n",
			"- at '/webhook': additional properties 'certmanager' not allowed\n"},
		{"unknown key in a built-in", "builtins:\n  location:\n    inCluster:\n      storageClass: fast\n",
			"- at '/builtins/location/inCluster': additional properties 'storageClass' not allowed\n"},
		{"string for an integer", "replicaCount: three\n",
			"- at '/replicaCount': got string, want integer\n"},
		{"string for a boolean", "webhook:\n  enabled: \"yes\"\n",
			"- at '/webhook/enabled': got string, want boolean\n"},
		{"list for a map", "commonLabels: [team]\n",
			"- at '/commonLabels': got array, want object\n"},
		{"label value not a string", "commonLabels:\n  tier: 1\n",
			"- at '/commonLabels/tier': got number, want string\n"},
		{"value outside an enum", "image:\n  pullPolicy: Sometimes\n",
			"- at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'\n"},
		{"port out of range", "webhook:\n  port: 70000\n",
			"- at '/webhook/port': maximum: got 70,000, want 65,535\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderValues(c, parseValues(t, tc.values))
			if err == nil {
				t.Fatalf("values accepted:\n%s", tc.values)
			}
			if err.Error() != header+tc.want {
				t.Errorf("message:\n%s\nwant:\n%s", err, header+tc.want)
			}
		})
	}
	// The defaults and every values case pass the schema.
	for _, vc := range valueCases {
		if _, err := renderValues(c, parseValues(t, vc.values)); err != nil {
			t.Errorf("%s: %v", vc.name, err)
		}
	}
}

// TestTemplatesRefuseContradictions checks the combinations the schema cannot express,
// which the templates refuse with a message.
func TestTemplatesRefuseContradictions(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct{ name, values, want string }{
		{"replicas without a leader", "replicaCount: 2\nleaderElection:\n  enabled: false\n",
			"leaderElection.enabled=false needs replicaCount: 1: replicas without a leader would reconcile the same pools at once"},
		{"a ServiceMonitor without metrics", "metrics:\n  enabled: false\n  serviceMonitor:\n    enabled: true\n",
			"metrics.serviceMonitor.enabled needs metrics.enabled: there is no metrics endpoint to scrape"},
		{"a dashboard without metrics", "metrics:\n  enabled: false\n  dashboard:\n    enabled: true\n",
			"metrics.dashboard.enabled needs metrics.enabled: there is no metrics endpoint to scrape"},
		{"alerts without metrics", "metrics:\n  enabled: false\n  prometheusRule:\n    enabled: true\n",
			"metrics.prometheusRule.enabled needs metrics.enabled: there is no metrics endpoint to scrape"},
		{"a catalog binding without subjects", "tenantCatalog:\n  subjects: []\n",
			"tenantCatalog.enabled needs at least one subject in tenantCatalog.subjects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv, err := renderValues(c, parseValues(t, tc.values))
			if err != nil {
				t.Fatal(err)
			}
			_, err = engine.Render(c, rv)
			if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("got %v, want an error ending in %q", err, tc.want)
			}
		})
	}
}
