package nodegroup

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments/scale,verbs=get;update

// clampReplicas brings the MachineDeployment's replicas into the pool's [min, max]
// through the scale subresource, the way cluster-autoscaler changes them, and returns
// the count the MachineDeployment wants afterwards.
//
// The applied MachineDeployment never carries spec.replicas: Cluster API defaults it on
// create and the autoscaler owns it. Cluster API clamps it into the annotations' range
// only on an update that leaves it unset, and after creation no field manager owns it,
// so the operator's apply never unsets it: without this, resizing a fixed pool or
// raising a minimum above the current count would never take effect. Inside the range
// nothing is written, so the autoscaler's choice stands and a steady state stays quiet.
func (r *Reconciler) clampReplicas(ctx context.Context, ng *v1.NodeGroup, md *clusterv1.MachineDeployment) (int32, error) {
	if md.Spec.Replicas == nil || !md.DeletionTimestamp.IsZero() {
		return deref(md.Spec.Replicas), nil
	}
	current := *md.Spec.Replicas
	want := min(max(current, ng.Spec.MinReplicas), ng.Spec.MaxReplicas)
	if want == current {
		return current, nil
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: want}}
	if err := r.Client.SubResource("scale").Update(ctx, md, client.WithSubResourceBody(scale)); err != nil {
		return 0, fmt.Errorf("scaling MachineDeployment %s from %d to %d: %w", md.Name, current, want, err)
	}
	r.event(ng, corev1.EventTypeNormal, "Scaled", "ScaleMachineDeployment", "scaled MachineDeployment %s from %d to %d machines, into the pool's range %d..%d",
		md.Name, current, want, ng.Spec.MinReplicas, ng.Spec.MaxReplicas)
	return want, nil
}
