package satellite

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
)

// Register adds the controller to a manager whose indexer has the operator's field
// indexes (operator.RegisterIndexes). The SatelliteControlPlane kind (the operator's
// CRDs chart) and the KamajiControlPlane kind must be served.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	for _, gvk := range []struct{ group, version, kind string }{
		{cpv1.GroupVersion.Group, cpv1.GroupVersion.Version, "SatelliteControlPlane"},
		{kamaji.ControlPlaneGVK.Group, kamaji.ControlPlaneGVK.Version, kamaji.ControlPlaneGVK.Kind},
	} {
		if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: gvk.group, Kind: gvk.kind}, gvk.version); err != nil {
			return fmt.Errorf("%s.%s is not served: %w", gvk.kind, gvk.group, err)
		}
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}
	if r.Cache == nil {
		r.Cache = mgr.GetCache()
	}
	r.applier = apply.NewCached(r.Client, r.APIReader, r.Cache)

	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	b := ctrl.NewControllerManagedBy(mgr)
	// A ProxmoxCluster someone deleted or changed is put back; without capmox installed
	// there is none to watch (and pools on Proxmox locations get no satellite anyway).
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: capmox.GroupVersion.Group, Kind: "ProxmoxCluster"}, capmox.GroupVersion.Version); err == nil {
		b = b.WatchesMetadata(&capmox.ProxmoxCluster{}, handler.EnqueueRequestsFromMapFunc(r.tenantOfOwned))
	}
	return b.
		Named(r.Name()).
		// A tenant Cluster's spec and pause, and any change to a satellite: Cluster
		// API's status updates change nothing read here.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.tenantOfCluster),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, paused.AnnotationToggled()))).
		// A satellite's deletion, once more: the tenants waiting for its location.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.waitingOnLocation), builder.WithPredicates(deleted())).
		Watches(&v1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(controlplanedns.ClusterOfPool), builder.WithPredicates(poolAddedOrRemoved())).
		// Its status too: the satellites mirror it.
		Watches(kcp, handler.EnqueueRequestsFromMapFunc(controlplanedns.ClustersOf(r.Client))).
		Watches(&cpv1.SatelliteControlPlane{}, handler.EnqueueRequestsFromMapFunc(tenantOfControlPlane)).
		Watches(&v1.Location{}, handler.EnqueueRequestsFromMapFunc(r.clustersOnLocation)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersOfSecret)).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.clustersInNamespace),
			builder.WithPredicates(labelsChanged())).
		// One tenant at a time, on purpose: keep reads the other tenants' satellites on
		// a location live before it makes one, and two reconciles at once could both
		// find the location free (policy.LocationTaken).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, RateLimiter: operator.Retries()}).
		Complete(r)
}

// deleted lets through deletions only.
func deleted() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// poolAddedOrRemoved: a pool's cluster never changes; its location may (a tenant moves
// a pool to another location), so of its updates only that one matters.
func poolAddedOrRemoved() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*v1.NodeGroup)
		cur, okNew := e.ObjectNew.(*v1.NodeGroup)
		return !okOld || !okNew || old.Spec.LocationName != cur.Spec.LocationName
	}}
}

// labelsChanged: a namespace's labels decide which locations admit it.
func labelsChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}

// tenantOfCluster maps a satellite Cluster to the tenant Cluster that controls it, and
// any other Cluster to itself.
func (r *Reconciler) tenantOfCluster(_ context.Context, obj client.Object) []reconcile.Request {
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "Cluster" && obj.GetLabels()[names.LabelManagedBy] == names.ManagedByValue {
		return request(obj.GetNamespace(), ref.Name)
	}
	return request(obj.GetNamespace(), obj.GetName())
}

// waitingOnLocation maps a satellite Cluster that is gone to the tenant Clusters with
// pools on its location, so one that waits for the location to be free
// (policy.LocationTaken) gets its satellite then.
func (r *Reconciler) waitingOnLocation(ctx context.Context, obj client.Object) []reconcile.Request {
	location := obj.GetLabels()[names.LabelLocation]
	if obj.GetLabels()[names.LabelManagedBy] != names.ManagedByValue || location == "" {
		return nil
	}
	return r.clustersOnLocations(ctx, func(loc *v1.Location) bool { return names.LabelValue(loc.Name) == location })
}

// clustersOnLocations maps the Locations that match to the Clusters with pools on them.
func (r *Reconciler) clustersOnLocations(ctx context.Context, match func(*v1.Location) bool) []reconcile.Request {
	locations := &v1.LocationList{}
	if err := r.Client.List(ctx, locations); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range locations.Items {
		if match(&locations.Items[i]) {
			out = append(out, r.clustersOnLocation(ctx, &locations.Items[i])...)
		}
	}
	return out
}

// tenantOfControlPlane maps a SatelliteControlPlane to its tenant Cluster.
func tenantOfControlPlane(_ context.Context, obj client.Object) []reconcile.Request {
	scp, ok := obj.(*cpv1.SatelliteControlPlane)
	if !ok || scp.Spec.ClusterName == "" {
		return nil
	}
	return request(scp.Namespace, scp.Spec.ClusterName)
}

// tenantOfOwned maps an object a satellite Cluster controls (its ProxmoxCluster) to the
// tenant Cluster.
func (r *Reconciler) tenantOfOwned(ctx context.Context, obj client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Cluster" {
		return nil
	}
	sat := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, sat); err != nil {
		return nil
	}
	return r.tenantOfCluster(ctx, sat)
}

// clustersOnLocation maps a Location to the Clusters with pools on it.
func (r *Reconciler) clustersOnLocation(ctx context.Context, obj client.Object) []reconcile.Request {
	pools := &v1.NodeGroupList{}
	if err := r.Client.List(ctx, pools, client.MatchingFields{operator.PoolsByLocation: obj.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for i := range pools.Items {
		key := types.NamespacedName{Namespace: pools.Items[i].Namespace, Name: pools.Items[i].Spec.ClusterName}
		if !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// clustersOfSecret maps a Secret to the tenant Clusters it matters to: a Cluster's
// kubeconfig (or a satellite's) to the tenant Cluster, the operator's credentials copy
// to the tenants of the satellites that own it, and a Location's credentials Secret
// to the Clusters with pools on that Location.
//
// Only those: a Cluster's other Secrets (its Machines' bootstrap data, say) change
// nothing here.
func (r *Reconciler) clustersOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	labels := obj.GetLabels()
	if cluster, ok := strings.CutSuffix(obj.GetName(), "-kubeconfig"); ok {
		// By name, not by label: a Secret of that name someone else made blocks the
		// satellite's, and its deletion must bring the tenant back.
		c := &clusterv1.Cluster{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: cluster}, c); err == nil {
			return r.tenantOfCluster(ctx, c)
		}
		return nil
	}
	if labels[names.LabelManagedBy] == names.ManagedByValue && labels[names.LabelLocation] != "" {
		if tenant := labels[names.LabelTenantCluster]; tenant != "" {
			return request(obj.GetNamespace(), tenant)
		}
		return nil
	}
	return r.clustersOnLocations(ctx, func(loc *v1.Location) bool {
		pve := loc.Spec.Provider.Proxmox
		return pve != nil && pve.CredentialsRef.Namespace == obj.GetNamespace() && pve.CredentialsRef.Name == obj.GetName()
	})
}

// clustersInNamespace maps a Namespace to the Kamaji Clusters in it.
func (r *Reconciler) clustersInNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	clusters := &clusterv1.ClusterList{}
	if err := r.Client.List(ctx, clusters, client.InNamespace(obj.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range clusters.Items {
		if kamaji.IsControlPlaneOf(&clusters.Items[i]) {
			out = append(out, request(obj.GetName(), clusters.Items[i].Name)...)
		}
	}
	return out
}

func request(namespace, name string) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}
