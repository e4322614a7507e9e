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
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
)

// Register adds the controller to a manager. The KamajiControlPlane kind must be served:
// without it the watch could never start. The manager's indexer must have the
// operator's field indexes (operator.RegisterIndexes).
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	if _, err := mgr.GetRESTMapper().RESTMapping(kamaji.ControlPlaneGVK.GroupKind(), kamaji.ControlPlaneGVK.Version); err != nil {
		return fmt.Errorf("%s is not served (install the Kamaji control-plane provider): %w", kamaji.ControlPlaneGVK, err)
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}
	if r.Cache == nil {
		r.Cache = mgr.GetCache()
	}

	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		// Status updates of Clusters and control planes change nothing we read.
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, paused.AnnotationToggled()))).
		Watches(&v1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(ClusterOfPool), builder.WithPredicates(poolAddedOrRemoved())).
		Watches(kcp, handler.EnqueueRequestsFromMapFunc(r.clustersOf), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{RateLimiter: operator.Retries()}).
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

// ClustersOf maps a KamajiControlPlane to the Clusters of its namespace that name it,
// by the field index operator.ClustersByKamajiControlPlane.
func ClustersOf(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var clusters clusterv1.ClusterList
		if err := c.List(ctx, &clusters, client.InNamespace(obj.GetNamespace()), client.MatchingFields{operator.ClustersByKamajiControlPlane: obj.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(clusters.Items))
		for i := range clusters.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&clusters.Items[i])})
		}
		return out
	}
}
