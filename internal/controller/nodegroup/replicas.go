package nodegroup

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
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
//
// When this reconcile did not write the MachineDeployment (so its range is the one
// last applied), someone else moved the replicas out of it (scaled a fixed pool by
// hand): they are brought back once, and a Warning event (ReplicasRestored) names who
// set them. The scale's own watch event finds them in range, so nothing fights back
// unless that writer does. When it did (wrote), the pool's range is new, or reaches the
// MachineDeployment only now, after reconciles that stopped before the apply: that is a
// resize (Scaled).
func (r *Reconciler) clampReplicas(ctx context.Context, ng *v1.NodeGroup, md *clusterv1.MachineDeployment, wrote bool) (int32, error) {
	if md.Spec.Replicas == nil || !md.DeletionTimestamp.IsZero() {
		return deref(md.Spec.Replicas), nil
	}
	current := *md.Spec.Replicas
	want := min(max(current, ng.Spec.MinReplicas), ng.Spec.MaxReplicas)
	if want == current {
		return current, nil
	}
	restore := !wrote
	who := "someone else"
	if restore {
		who = r.replicasWriter(ctx, md)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: want}}
	if err := r.Client.SubResource("scale").Update(ctx, md, client.WithSubResourceBody(scale), client.FieldOwner(apply.FieldManager)); err != nil {
		return 0, fmt.Errorf("scaling MachineDeployment %s from %d to %d: %w", md.Name, current, want, err)
	}
	if restore {
		r.event(ng, corev1.EventTypeWarning, ReasonReplicasRestored, "ScaleMachineDeployment",
			"%s set MachineDeployment %s to %d machines, outside the pool's range %d..%d; scaled it back to %d (change spec.minReplicas and spec.maxReplicas of the NodeGroup to resize the pool)",
			who, md.Name, current, ng.Spec.MinReplicas, ng.Spec.MaxReplicas, want)
		return want, nil
	}
	r.event(ng, corev1.EventTypeNormal, "Scaled", "ScaleMachineDeployment", "scaled MachineDeployment %s from %d to %d machines, into the pool's range %d..%d",
		md.Name, current, want, ng.Spec.MinReplicas, ng.Spec.MaxReplicas)
	return want, nil
}

// replicasPath is spec.replicas in managed fields.
var replicasPath = fieldpath.MakePathOrDie("spec", "replicas")

// replicasWriter names the field managers other than the operator that own the
// replicas of the live MachineDeployment (the cache keeps no managed fields), for
// example `"kubectl" (through the scale subresource)`; "someone else" when it cannot
// tell. It reads the object once, and only when replicas left the pool's range.
func (r *Reconciler) replicasWriter(ctx context.Context, md *clusterv1.MachineDeployment) string {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("MachineDeployment"))
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(md), live); err != nil {
		return "someone else"
	}
	var who []string
	for _, mf := range live.ManagedFields {
		if mf.Manager == apply.FieldManager || mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil || !set.Has(replicasPath) {
			continue
		}
		name := strconv.Quote(mf.Manager)
		if mf.Subresource != "" {
			name += " (through the " + mf.Subresource + " subresource)"
		}
		who = append(who, name)
	}
	if len(who) == 0 {
		return "someone else"
	}
	slices.Sort(who)
	return strings.Join(slices.Compact(who), " and ")
}
