package nodegroup_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
)

// A pool reconciled to Ready shows on the pools gauge and in the time-to-Ready
// histogram; one that cannot resolve its class is counted as a failed reconcile, with
// no class label, and on the gauge as its tenant's to fix.
func TestMetricsOfAPool(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, &metrics.Collector{Pools: env.Client, Cause: nodegroup.Cause}); err != nil {
		t.Fatal(err)
	}
	gather := func(name string, labels map[string]string) float64 {
		t.Helper()
		samples, err := metrics.Gather(reg, metrics.Prefix+name)
		if err != nil {
			t.Fatal(err)
		}
		return metrics.Sum(samples, labels)
	}
	created := gather("pool_ready_seconds", map[string]string{"trigger": metrics.TriggerCreated})
	templates := gather("templates_total", map[string]string{"action": "created"})
	classNotFound := gather("reconcile_errors_total", map[string]string{"reason": "ClassNotFound"})

	ns := tenant(t)
	ng := pool(ns, "metrics", nil)
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, nodegroup.ReasonApplied)
	// Cluster API's part: the replicas seeded from the minimum (its webhook does not run
	// here), and the machines the MachineDeployment wants, all ready.
	autoscale(t, ns, "tenant-metrics", 1)
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, "tenant-metrics", md)
	patch := client.MergeFrom(md.DeepCopy())
	md.Status.Replicas, md.Status.ReadyReplicas = ptr(int32(1)), ptr(int32(1))
	if err := env.Client.Status().Patch(context.Background(), md, patch); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ng, v1.ConditionReady, metav1.ConditionTrue, nodegroup.ReasonMachinesReady)

	if got := gather("pools", map[string]string{"class": "talos", "location": v1.BuiltinLocation, "os": string(v1.OSTalos), "state": metrics.StateReady}); got < 1 {
		t.Errorf("pools gauge: %v Ready Talos pools, want at least 1", got)
	}
	if got := gather("pool_ready_seconds", map[string]string{"trigger": metrics.TriggerCreated}) - created; got < 1 {
		t.Errorf("time to Ready: %v new observations, want at least 1", got)
	}
	if got := gather("templates_total", map[string]string{"action": "created"}) - templates; got < 2 {
		t.Errorf("templates created: %v, want at least 2 (bootstrap and infrastructure)", got)
	}

	lost := pool(ns, "lost", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = "no-such-class" })
	env.MustCreate(t, lost)
	waitCondition(t, lost, v1.ConditionClassResolved, metav1.ConditionFalse, "ClassNotFound")
	if got := gather("reconcile_errors_total", map[string]string{"reason": "ClassNotFound"}) - classNotFound; got < 1 {
		t.Errorf("reconcile errors ClassNotFound: %v, want at least 1", got)
	}
	if got := gather("pools", map[string]string{"class": "no-such-class"}); got != 0 {
		t.Errorf("an unresolved class is a label: %v pools", got)
	}
	// The tenant named the class: no failure of the platform's.
	if got := gather("pools", map[string]string{"state": metrics.StateNotReady, "reason": "ClassNotFound", "cause": metrics.CauseTenant}); got < 1 {
		t.Errorf("pools gauge: %v NotReady pools of a class not found caused by their tenant, want at least 1", got)
	}
	if got := gather("pools", map[string]string{"reason": "ClassNotFound", "cause": metrics.CausePlatform}); got != 0 {
		t.Errorf("pools gauge: %v pools of a class not found counted as the platform's to fix", got)
	}
}
