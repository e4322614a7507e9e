package metrics

import (
	"testing"
)

// TestScrapedReadsAScrape reads a scrape as the operator serves it: a gauge and a
// histogram of controller-runtime's work queue, with their labels, the histogram's
// count, sum and cumulative buckets.
func TestScrapedReadsAScrape(t *testing.T) {
	const text = `# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="nodegroup",name="nodegroup"} 3
workqueue_depth{controller="other",name="other"} 4
# HELP workqueue_queue_duration_seconds How long in seconds an item stays in workqueue before being requested
# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{controller="nodegroup",name="nodegroup",le="0.001"} 5
workqueue_queue_duration_seconds_bucket{controller="nodegroup",name="nodegroup",le="0.1"} 9
workqueue_queue_duration_seconds_bucket{controller="nodegroup",name="nodegroup",le="+Inf"} 10
workqueue_queue_duration_seconds_sum{controller="nodegroup",name="nodegroup"} 1.25
workqueue_queue_duration_seconds_count{controller="nodegroup",name="nodegroup"} 10
`
	g, err := Scraped(text)
	if err != nil {
		t.Fatal(err)
	}
	depth, err := Gather(g, "workqueue_depth")
	if err != nil {
		t.Fatal(err)
	}
	if got := Sum(depth, map[string]string{"controller": "nodegroup"}); got != 3 {
		t.Errorf("nodegroup depth %v, want 3", got)
	}
	if got := Sum(depth, nil); got != 7 {
		t.Errorf("depth of every queue %v, want 7", got)
	}
	latency, err := Gather(g, "workqueue_queue_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if len(latency) != 1 {
		t.Fatalf("%d latency series, want 1", len(latency))
	}
	h := latency[0]
	// The parser keeps the +Inf bucket; the count says the same.
	want := []Bucket{{0.001, 5}, {0.1, 9}}
	if h.Value != 10 || h.Sum != 1.25 || len(h.Buckets) < 2 || h.Buckets[0] != want[0] || h.Buckets[1] != want[1] {
		t.Errorf("latency: count %v, sum %v, buckets %v; want 10, 1.25, %v", h.Value, h.Sum, h.Buckets, want)
	}
	if _, err := Scraped("workqueue_depth{controller=\"nodegroup\" 3\n"); err == nil {
		t.Error("a malformed line parsed")
	}
}
