package nodegroup

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
)

// pausedBy says why the pool is left alone (paused.Why), empty when it is not: its
// Cluster, read from the cache, or the pool itself is paused. A Cluster that does not
// exist pauses nothing (the resolve step reports it); clusterGone says so.
func (r *Reconciler) pausedBy(ctx context.Context, ng *v1.NodeGroup) (why string, clusterGone bool, err error) {
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ng.Namespace, Name: ng.Spec.ClusterName}, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", false, err
		}
		return paused.Why(nil, ng), true, nil
	}
	return paused.Why(c, ng), false, nil
}

// movedAway says whether a deleting pool is clusterctl move's to delete: marked for it
// and its Cluster already gone (while the Cluster exists, clusterctl keeps it paused,
// which pausedBy covers). Its objects now belong to the target, and clusterctl removes
// the finalizer itself, so nothing is cleaned up. The mark alone is not enough: a
// tenant may write a pool's annotations, and a move that failed leaves them behind.
func movedAway(ng *v1.NodeGroup, clusterGone bool) bool {
	return !ng.DeletionTimestamp.IsZero() && clusterGone && paused.BeingMoved(ng)
}

// ReasonWaitingForMove is the event of a deleting pool that clusterctl move marked and
// whose Cluster is gone: the finalizer is the move's to remove.
const ReasonWaitingForMove = "WaitingForMove"

// waitForMove says why a deleting pool stays: a move removes the finalizer itself
// within moments, so a pool that stays names the way out, since a move that failed (or
// a tenant) can leave the mark behind. Removing it lets the pool be finalized (every
// update of a deleting pool queues it: deletionPredicate).
func (r *Reconciler) waitForMove(ng *v1.NodeGroup) {
	r.event(ng, corev1.EventTypeWarning, ReasonWaitingForMove, "Finalize",
		"clusterctl move marked this pool for deletion (annotation %s) and its Cluster is gone: the operator cleans nothing up and leaves the finalizer to the move; if no move is running, remove the annotation and the pool is finalized",
		clusterctlv1.DeleteForMoveAnnotation)
}
