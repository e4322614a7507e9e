package autoscaler_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A paused Cluster keeps its autoscaler when its last autoscaled pool is deleted (as
// clusterctl move deletes it on the source); resumed, the pool's deletion goes on and
// the autoscaler goes with it.
func TestPausedClusterKeepsItsAutoscaler(t *testing.T) {
	ns := newTenant(t)
	ng := newPool(t, ns, "workers", 1, 3)
	waitAll(t, ns)
	waitQuiet(t)
	before := liveObjects(t, ns)

	patchCluster(t, ns, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) })
	time.Sleep(time.Second)
	if err := env.Client.Delete(context.Background(), ng); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	reconcile(t, ns)
	after := liveObjects(t, ns)
	if len(after) != len(before) {
		t.Fatalf("a paused Cluster's autoscaler objects: %v, want %v", kinds(after), kinds(before))
	}
	for i := range before {
		if after[i].GetResourceVersion() != before[i].GetResourceVersion() {
			t.Errorf("%T %s changed while paused", after[i], after[i].GetName())
		}
	}

	patchCluster(t, ns, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(false) })
	waitNone(t, ns)
}
