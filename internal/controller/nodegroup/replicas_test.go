package nodegroup_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// A pool's range moving past the autoscaler's count brings the MachineDeployment into it:
// a fixed pool resized ends at its new size, in either direction.
func TestReplicasClampedIntoThePoolsRange(t *testing.T) {
	ns := tenant(t)
	ng := pool(ns, "clamped", nil) // 1..3
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")

	autoscale(t, ns, "tenant-clamped", 2)
	replicas := func() int32 {
		got := &clusterv1.MachineDeployment{}
		mustGet(t, ns, "tenant-clamped", got)
		if got.Spec.Replicas == nil {
			return -1
		}
		return *got.Spec.Replicas
	}

	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.MinReplicas, n.Spec.MaxReplicas = 4, 4 })
	testenv.Eventually(t, "replicas raised to the new fixed size 4", func() bool { return replicas() == 4 })

	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.MinReplicas, n.Spec.MaxReplicas = 1, 1 })
	testenv.Eventually(t, "replicas lowered to the new fixed size 1", func() bool { return replicas() == 1 })

	// Inside the range the count is the autoscaler's: widening the range changes nothing.
	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.MinReplicas, n.Spec.MaxReplicas = 0, 5 })
	waitGeneration(t, ng)
	waitQuiet(t)
	if got := replicas(); got != 1 {
		t.Fatalf("replicas = %d after widening the range to 0..5, want the current 1", got)
	}
}
