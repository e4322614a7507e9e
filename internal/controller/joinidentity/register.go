package joinidentity

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

// concurrency is how many Clusters are reconciled at once: a tenant API server that
// does not answer holds one worker for at most the request timeout, never all.
const concurrency = 8

// Register adds the controller to a manager. Status must be set; it is what the pool
// controller reports.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}
	// What changes in a tenant (a watched token Secret, a failed watch) queues its
	// Cluster through the rate limiter: a tenant that keeps changing the token is
	// answered at most about once a second, and never in a loop.
	changes := &tenant.Queue{RateLimited: true}
	if r.Conns == nil {
		r.Conns = &tenant.Connections{Secrets: r.APIReader, Versions: mgr.GetCache(), UserAgent: "nodegroup-operator"}
	}
	r.Conns.Changed = changes.Add
	return ctrl.NewControllerManagedBy(mgr).
		Named("joinidentity").
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(controlplanedns.ClusterOfPool),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleting()))).
		// <cluster>-ca, <cluster>-kubeconfig and <cluster>-talos; metadata is enough.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(clusterOfSecret),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WatchesRawSource(changes).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, RateLimiter: operator.TenantRetries()}).
		Complete(r)
}

// clusterOfSecret maps the Secrets a cluster's identity is made from or is to its
// Cluster, by name; another Secret maps to a Cluster that usually does not exist.
func clusterOfSecret(_ context.Context, obj client.Object) []reconcile.Request {
	for _, suffix := range []string{clusterCASuffix, tenant.KubeconfigSuffix, resolve.TalosSecretSuffix} {
		if name, ok := strings.CutSuffix(obj.GetName(), suffix); ok && name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
		}
	}
	return nil
}

// deleting lets a pool's deletion through: its last Talos pool gone, a cluster's token
// goes too.
func deleting() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}
