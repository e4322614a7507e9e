package controlplanedns

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// Field indexes of this controller. The names are its own: the nodegroup controller
// registers "spec.clusterName" on NodeGroups in the same manager, and an index name can
// be registered only once, so sharing it would make the two controllers depend on
// their registration order.
const (
	// indexPoolCluster: a NodeGroup by spec.clusterName.
	indexPoolCluster = "controlplanedns.spec.clusterName"
	// indexControlPlane: a Cluster by the name of its KamajiControlPlane (other control
	// plane kinds are not indexed).
	indexControlPlane = "controlplanedns.spec.controlPlaneRef.kamaji"
)

// Register adds the controller to a manager. The KamajiControlPlane kind must be served:
// without it the watch could never start.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	if _, err := mgr.GetRESTMapper().RESTMapping(KamajiControlPlaneGVK.GroupKind(), KamajiControlPlaneGVK.Version); err != nil {
		return fmt.Errorf("%s is not served (install the Kamaji control-plane provider): %w", KamajiControlPlaneGVK, err)
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}
	if r.Cache == nil {
		r.Cache = mgr.GetCache()
	}

	idx := mgr.GetFieldIndexer()
	ctx := context.Background()
	if err := idx.IndexField(ctx, &v1.NodeGroup{}, indexPoolCluster, func(o client.Object) []string {
		return []string{o.(*v1.NodeGroup).Spec.ClusterName}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &clusterv1.Cluster{}, indexControlPlane, func(o client.Object) []string {
		if c := o.(*clusterv1.Cluster); isKamaji(c) {
			return []string{c.Spec.ControlPlaneRef.Name}
		}
		return nil
	}); err != nil {
		return err
	}

	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KamajiControlPlaneGVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		// Status updates of Clusters and control planes change nothing we read.
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(ClusterOfPool), builder.WithPredicates(poolAddedOrRemoved())).
		Watches(kcp, handler.EnqueueRequestsFromMapFunc(r.clustersOf), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// poolAddedOrRemoved: only the existence of a pool matters (its spec.clusterName is
// immutable), so updates are dropped.
func poolAddedOrRemoved() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
}

// ClusterOfPool maps a NodeGroup to its Cluster (same namespace, spec.clusterName): the
// mapping of every controller that works per Cluster and watches pools.
func ClusterOfPool(_ context.Context, obj client.Object) []reconcile.Request {
	ng, ok := obj.(*v1.NodeGroup)
	if !ok || ng.Spec.ClusterName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ng.Namespace, Name: ng.Spec.ClusterName}}}
}

// clustersOf maps a KamajiControlPlane to the Clusters of its namespace that name it.
func (r *Reconciler) clustersOf(ctx context.Context, obj client.Object) []reconcile.Request {
	return ClustersOf(r.Client)(ctx, obj)
}

// ClustersOf maps a control plane to the Clusters of its namespace that name it, by the
// field index this controller registers (register this controller with the manager
// before it starts, in any order).
func ClustersOf(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var clusters clusterv1.ClusterList
		if err := c.List(ctx, &clusters, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexControlPlane: obj.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(clusters.Items))
		for i := range clusters.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&clusters.Items[i])})
		}
		return out
	}
}
