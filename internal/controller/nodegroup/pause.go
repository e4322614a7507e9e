package nodegroup

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
