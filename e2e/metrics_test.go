//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
)

// metricsScraper is the ServiceAccount that scrapes the operator's metrics, bound to the
// chart's metrics reader role as a platform binds its Prometheus.
const metricsScraper = "e2e-metrics"

// readyInMetrics scrapes the operator's metrics as Prometheus does (over HTTPS, with the
// token of a ServiceAccount bound to the chart's metrics reader role) once pools became
// Ready: the time-to-Ready histogram counts at least one observation, and the pools gauge
// reports as Ready the pools whose Ready condition is True (at least ready of them). It
// logs the operator's own series of the last scrape.
func readyInMetrics(t *testing.T, ready int) {
	t.Helper()
	scraper, err := localrun.ServiceAccountConfig(context.Background(), env.Config, framework.ReleaseNamespace, metricsScraper,
		framework.ReleaseName+"-metrics-reader", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	// The RoleBinding reaches the authorizer's cache within seconds.
	eventually(t, short, "the operator's metrics", func(ctx context.Context) error {
		text, err := env.OperatorMetrics(ctx, scraper.BearerToken)
		if err != nil {
			return err
		}
		lines = lines[:0]
		for l := range strings.Lines(text) {
			if strings.HasPrefix(l, metrics.Prefix) {
				lines = append(lines, strings.TrimSpace(l))
			}
		}
		scraped, err := metrics.Parse(text)
		if err != nil {
			return err
		}
		timings, err := metrics.Gather(scraped, metrics.Prefix+"pool_ready_seconds")
		if err != nil {
			return err
		}
		observed := metrics.Sum(timings, nil)
		if observed < 1 {
			return fmt.Errorf("%spool_ready_seconds counts %v observations, want at least 1", metrics.Prefix, observed)
		}
		poolSeries, err := metrics.Gather(scraped, metrics.Prefix+"pools")
		if err != nil {
			return err
		}
		reported := metrics.Sum(poolSeries, map[string]string{"state": metrics.StateReady})
		var pools v1.NodeGroupList
		if err := env.Client.List(ctx, &pools); err != nil {
			return err
		}
		want := 0
		for _, ng := range pools.Items {
			if ng.DeletionTimestamp.IsZero() && meta.IsStatusConditionTrue(ng.Status.Conditions, v1.ConditionReady) {
				want++
			}
		}
		if int(reported) != want || want < ready {
			return fmt.Errorf("%spools reports %v Ready, the API %d (at least %d)", metrics.Prefix, reported, want, ready)
		}
		return nil
	})
	for _, l := range lines {
		t.Log(l)
	}
}
