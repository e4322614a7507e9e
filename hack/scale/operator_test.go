package main

import (
	"reflect"
	"testing"
)

// scrape is a part of the operator's metrics as its endpoint serves them: two
// controllers' series, a histogram, and the pools gauge by class, location, OS and state.
const scrape = `# HELP controller_runtime_active_workers Number of currently used workers per controller
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller="controlplanedns"} 1
controller_runtime_active_workers{controller="nodegroup"} 3
# HELP controller_runtime_reconcile_time_seconds Length of time per reconciliation per controller
# TYPE controller_runtime_reconcile_time_seconds histogram
controller_runtime_reconcile_time_seconds_bucket{controller="nodegroup",le="0.005"} 80
controller_runtime_reconcile_time_seconds_bucket{controller="nodegroup",le="+Inf"} 120
controller_runtime_reconcile_time_seconds_sum{controller="nodegroup"} 4.5
controller_runtime_reconcile_time_seconds_count{controller="nodegroup"} 120
# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="controlplanedns",result="success"} 40
controller_runtime_reconcile_total{controller="nodegroup",result="error"} 2
controller_runtime_reconcile_total{controller="nodegroup",result="requeue"} 0
controller_runtime_reconcile_total{controller="nodegroup",result="requeue_after"} 18
controller_runtime_reconcile_total{controller="nodegroup",result="success"} 100
# HELP nodegroup_operator_pools Pools by class, location, OS and state.
# TYPE nodegroup_operator_pools gauge
nodegroup_operator_pools{class="kairos",location="in-cluster",os="Kairos",state="Ready"} 2
nodegroup_operator_pools{class="talos",location="in-cluster",os="Talos",state="Pending"} 1
nodegroup_operator_pools{class="talos",location="in-cluster",os="Talos",state="Ready"} 4
# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="controlplanedns",name="controlplanedns"} 7
workqueue_depth{controller="nodegroup",name="nodegroup"} 5
`

func TestControllerMetricsOf(t *testing.T) {
	got, err := controllerMetricsOf(scrape, "nodegroup")
	if err != nil {
		t.Fatal(err)
	}
	if want := (controllerMetrics{reconciles: 120, queued: 5, active: 3, pools: 7}); !reflect.DeepEqual(got, want) {
		t.Fatalf("nodegroup: %+v, want %+v", got, want)
	}
	if got.idle() {
		t.Fatal("a controller with work queued and running is idle")
	}
	other, err := controllerMetricsOf(scrape, "controlplanedns")
	if err != nil {
		t.Fatal(err)
	}
	if want := (controllerMetrics{reconciles: 40, queued: 7, active: 1, pools: 7}); !reflect.DeepEqual(other, want) {
		t.Fatalf("controlplanedns: %+v, want %+v", other, want)
	}
	if _, err := controllerMetricsOf("workqueue_depth{controller=\"nodegroup\" 5\n", "nodegroup"); err == nil {
		t.Fatal("a malformed scrape was read")
	}
}

// TestBusyOf: every controller's queued and running items count, and a scrape without
// the workers gauge is an error rather than an idle operator.
func TestBusyOf(t *testing.T) {
	// 7 + 5 queued, 1 + 3 in workers.
	if n, err := busyOf(scrape); err != nil || n != 16 {
		t.Errorf("busyOf(scrape) = %v, %v; want 16", n, err)
	}
	if n, err := busyOf("workqueue_depth{controller=\"nodegroup\",name=\"nodegroup\"} 0\n"); err == nil {
		t.Errorf("busyOf without controller_runtime_active_workers = %v, want an error", n)
	}
}
