package nodegroup

import (
	"context"
	"runtime"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// DefaultConcurrency is how many pools are reconciled in parallel by default: two per
// core the operator may use. A reconcile mostly waits for the API server, so one per
// core would leave the operator idle; more than a few per core only queue at the API
// server, whose cost per pool (not the operator's) bounds a cold start (hack/scale
// measures both).
func DefaultConcurrency() int { return max(2, 2*runtime.GOMAXPROCS(0)) }

// Register adds the controller to a manager. The manager's indexer must have the
// operator's field indexes (operator.RegisterIndexes).
func (r *Reconciler) Register(mgr ctrl.Manager, concurrency int) error {
	if r.Cache == nil {
		r.Cache = mgr.GetCache()
	}
	r.wire(mgr.GetRESTMapper())
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}

	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(&v1.NodeGroup{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, deletionPredicate(), paused.AnnotationToggled()))).
		Owns(&clusterv1.MachineDeployment{}).
		Watches(&clusterv1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(r.poolsByLabel), builder.WithPredicates(machineSetChanged())).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.poolsByLabel), builder.WithPredicates(machineChanged())).
		Watches(&v1.NodeGroupClass{}, handler.EnqueueRequestsFromMapFunc(r.poolsBy(operator.PoolsByClass, false))).
		Watches(&v1.Location{}, handler.EnqueueRequestsFromMapFunc(r.poolsBy(operator.PoolsByLocation, false))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.poolsBy(operator.PoolsByCluster, true))).
		// Render reads Service ClusterIPs (the tenant API server, the management DNS).
		// A ClusterIP never changes in place, so a Service's creation and deletion are the
		// events that matter; metadata is all the cache keeps of them.
		WatchesMetadata(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfService),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		// A class's pull secret is copied into the tenant namespaces; a change to the
		// source reaches the copies through the pools of the classes that name it.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfPullSecret),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(concurrency, 1), RateLimiter: operator.Retries()})
	// A pool's templates, watched as the metadata the cache keeps of them: one of its
	// current templates, deleted, is created again (an older one, whose render is no
	// longer known, is not), and one whose spec someone changed is reported on the pool.
	for _, gvk := range r.templateKinds {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		b = b.Watches(m, handler.EnqueueRequestsFromMapFunc(r.poolsByLabel), builder.WithPredicates(templateChanged()))
	}
	if r.Tenants != nil {
		pools := r.poolsBy(operator.PoolsByCluster, true)
		b = b.WatchesRawSource(r.Tenants.Source(func(ctx context.Context, cluster types.NamespacedName) []reconcile.Request {
			return pools(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name}})
		}))
	}
	return b.Complete(r)
}

// wire makes the resolver and the applier from the reconciler's client and readers.
// Register wires with the manager's; the benchmarks wire a Reconciler without a
// manager the same way (bench_test.go).
func (r *Reconciler) wire(mapper meta.RESTMapper) {
	r.resolver = &resolve.Resolver{
		Client: r.Client, APIReader: r.APIReader, Mapper: mapper, Catalog: r.Catalog,
		ManagementDNS: r.ManagementDNS, ManagementDNSDomain: r.ManagementDNSDomain, Cache: r.Cache,
	}
	r.applier = apply.NewCached(r.Client, r.APIReader, r.Cache)
	r.templateKinds = servedTemplateKinds(mapper)
}

// servedTemplateKinds are the template kinds a pool's templates may be of
// (names.TemplateKinds) and, when capmox is installed, its ProxmoxMachineTemplate:
// watching or listing a kind the API server does not serve fails. Install capmox
// before the operator starts, or restart the operator after.
func servedTemplateKinds(mapper meta.RESTMapper) []schema.GroupVersionKind {
	kinds := slices.Clip(names.TemplateKinds)
	gvk := names.ProxmoxTemplateKind
	if mapper != nil {
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			kinds = append(kinds, gvk)
		}
	}
	return kinds
}

// machineSetChanged lets through what a pool reads of a MachineSet, which templates it
// uses: its creation, deletion, spec and labels; not the status Cluster API rewrites
// with every machine it creates, drains or deletes.
func machineSetChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, deletionPredicate())
}

// machineChanged lets through what a pool's status reads of a Machine (its phase and
// the conditions the cache keeps of it, operator.CacheOptions): its creation, deletion,
// and a change of its status or deletion timestamp. The cache drops everything else of
// the status, and the conditions' times, so a heartbeat of Cluster API brings no pool.
func machineChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*clusterv1.Machine)
		cur, okNew := e.ObjectNew.(*clusterv1.Machine)
		return !okOld || !okNew || !old.DeletionTimestamp.Equal(cur.DeletionTimestamp) ||
			!equality.Semantic.DeepEqual(old.Status, cur.Status)
	}}
}

// templateChanged lets through what a pool does something about of its templates:
// their deletion and a change of their spec (the generation). Not their creation, which
// is the operator's own or, at a start, the cache's first list.
func templateChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// deletionPredicate lets an object's deletion through (it changes no generation).
func deletionPredicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }}
}

// poolsBy maps an object to the pools that name it through a field index; namespaced
// objects (Clusters) only concern pools of their own namespace.
func (r *Reconciler) poolsBy(field string, namespaced bool) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		opts := []client.ListOption{client.MatchingFields{field: obj.GetName()}}
		if namespaced {
			opts = append(opts, client.InNamespace(obj.GetNamespace()))
		}
		return r.requests(ctx, opts...)
	}
}

// poolsOfService maps a Service to the pools that may render its address: the pools of
// its namespace (the tenant API server), or every pool for the management DNS. The
// resolver forgets the address it remembered of the Service.
func (r *Reconciler) poolsOfService(ctx context.Context, obj client.Object) []reconcile.Request {
	r.resolver.ForgetService(client.ObjectKeyFromObject(obj))
	if obj.GetNamespace() == r.ManagementDNS.Namespace && obj.GetName() == r.ManagementDNS.Name {
		return r.requests(ctx)
	}
	return r.requests(ctx, client.InNamespace(obj.GetNamespace()))
}

// poolsOfPullSecret maps a Secret to the pools of the classes that use it as their pull
// secret, or a cluster's Talos identity to the cluster's pools; most Secrets map to
// nothing at the cost of one index lookup. The resolver forgets what it remembered of
// the Secret.
func (r *Reconciler) poolsOfPullSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	r.resolver.ForgetSecret(client.ObjectKeyFromObject(obj))
	if cluster, ok := strings.CutSuffix(obj.GetName(), resolve.TalosSecretSuffix); ok && cluster != "" {
		// A cluster's Talos identity: its pools render from it.
		return r.requests(ctx, client.InNamespace(obj.GetNamespace()), client.MatchingFields{operator.PoolsByCluster: cluster})
	}
	var classes v1.NodeGroupClassList
	if err := r.Client.List(ctx, &classes, client.MatchingFields{operator.ClassesByPullSecret: client.ObjectKeyFromObject(obj).String()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range classes.Items {
		out = append(out, r.requests(ctx, client.MatchingFields{operator.PoolsByClass: c.Name})...)
	}
	return out
}

// poolsByLabel maps a MachineSet to its pool through the pool label.
func (r *Reconciler) poolsByLabel(ctx context.Context, obj client.Object) []reconcile.Request {
	value, ok := obj.GetLabels()[names.LabelPool]
	if !ok {
		return nil
	}
	return r.requests(ctx, client.InNamespace(obj.GetNamespace()), client.MatchingFields{operator.PoolsByLabel: value})
}

func (r *Reconciler) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var pools v1.NodeGroupList
	// Only the names are read: the cache's own objects, not copies of thousands of pools
	// on a change of the location they share.
	if err := r.Client.List(ctx, &pools, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(pools.Items))
	for _, p := range pools.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}
