package autoscaler

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

// concurrency is how many Clusters are reconciled at once.
const concurrency = 4

var changed = builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})

// Register adds the controller to a manager.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}
	if r.Applier == nil {
		r.Applier = apply.New(mgr.GetClient(), mgr.GetAPIReader())
	}
	r.resolver = &resolve.Resolver{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(), Catalog: r.Catalog, Cache: mgr.GetCache()}
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named("autoscaler").
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// A pool's range, creation and deletion decide whether the cluster needs one.
		Watches(&v1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(controlplanedns.ClusterOfPool),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleting()))).
		// The control plane's version picks the autoscaler's release: an upgrade rolls
		// the autoscaler onto the one of the new minor.
		Watches(kcp, handler.EnqueueRequestsFromMapFunc(controlplanedns.ClustersOf(mgr.GetClient())),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A new MachineDeployment may use a machine template kind the Role lacks.
		Watches(&clusterv1.MachineDeployment{}, handler.EnqueueRequestsFromMapFunc(clusterOfMachineDeployment),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		// The tenant kubeconfig its copy is made from, and the copy (Secrets are not
		// cached; their metadata is watched, as the other controllers do).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(clusterOfKubeconfig),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		// Its own objects: a change or deletion by someone else is put back, and the
		// Deployment's availability is what the pools report. A resync (the same
		// resourceVersion) is no reason to look.
		Owns(&corev1.ServiceAccount{}, builder.OnlyMetadata, changed).
		Owns(&rbacv1.Role{}, builder.OnlyMetadata, changed).
		Owns(&rbacv1.RoleBinding{}, builder.OnlyMetadata, changed).
		Owns(&appsv1.Deployment{}, changed).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, RateLimiter: operator.Retries()}).
		Complete(r)
}

// clusterOfKubeconfig maps <cluster>-kubeconfig and the autoscaler's copy of it to the
// Cluster; other Secrets map to nothing.
func clusterOfKubeconfig(_ context.Context, obj client.Object) []reconcile.Request {
	name := strings.TrimSuffix(obj.GetName(), tenant.KubeconfigSuffix)
	if name == obj.GetName() || name == "" {
		return nil
	}
	out := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
	if cluster := strings.TrimSuffix(name, autoscaler.Suffix); cluster != name && cluster != "" {
		// Or the autoscaler's copy for the Cluster before the suffix.
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: cluster}})
	}
	return out
}

// clusterOfMachineDeployment is the tenant's Cluster of a MachineDeployment of the
// operator's: the tenant label, on a satellite's too.
func clusterOfMachineDeployment(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[names.LabelTenantCluster]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// deleting lets a pool's deletion through.
func deleting() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}
