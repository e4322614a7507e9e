package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestChartNamesServedMetrics checks that every operator metric the chart's dashboard
// (JSON) and alerts query, and the README's table documents, is one the operator
// serves, and that the README documents each: renaming a metric fails here, not on a
// dashboard.
func TestChartNamesServedMetrics(t *testing.T) {
	served := map[string]bool{}
	ch := make(chan *prometheus.Desc, 16)
	go func() {
		for _, c := range collectors(&Collector{}) {
			c.Describe(ch)
		}
		close(ch)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		served[fqName.FindStringSubmatch(d.String())[1]] = true
	}

	chart := filepath.Join(testenv.RepoRoot(), "charts", "nodegroup-operator")
	name := regexp.MustCompile(Prefix + `[a-z_]+`)
	for _, file := range []string{"files/grafana/nodegroup-operator.json", "templates/prometheusrule.yaml", "README.md"} {
		raw, err := os.ReadFile(filepath.Join(chart, file))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(file, ".json") && !json.Valid(raw) {
			t.Errorf("%s is not JSON", file)
		}
		found := name.FindAllString(string(raw), -1)
		if len(found) == 0 {
			t.Errorf("%s names no metric of the operator", file)
		}
		for _, n := range found {
			if !served[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] {
				t.Errorf("%s names %s, which the operator does not serve", file, n)
			}
		}
		if file == "README.md" {
			for n := range served {
				if !slices.Contains(found, n) {
					t.Errorf("README.md does not document %s", n)
				}
			}
		}
	}
}
