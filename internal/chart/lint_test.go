package chart

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs `helm lint` (lint.All: Chart.yaml, values, templates rendered and parsed)
// with each values case. Errors and warnings both fail; the only
// message allowed is Info (the chart has no icon).
func TestLint(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			linter := lint.All(chartDir(), parseValues(t, tc.values), releaseNamespace, true)
			for _, m := range linter.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
			if linter.HighestSeverity > support.InfoSev {
				t.Errorf("helm lint: highest severity %d (0 unknown, 1 info, 2 warning, 3 error)", linter.HighestSeverity)
			}
		})
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
