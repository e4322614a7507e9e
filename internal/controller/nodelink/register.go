package nodelink

import (
	"context"

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

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch

// Register adds the controller to a manager. It reconciles a tenant Cluster when one of
// its pools' Machines reaches Provisioned (its VM exists; Cluster API then looks for
// its Node), and rechecks while a Machine on Proxmox waits for its Node.
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}
	if r.Conns == nil {
		r.Conns = &tenant.Connections{Secrets: r.APIReader, Versions: mgr.GetCache(), UserAgent: "nodegroup-operator"}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.tenantOfMachine), builder.WithPredicates(provisioned())).
		// A paused tenant is not looked at: look again when it resumes.
		Watches(&clusterv1.Cluster{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(resumed())).
		// A tenant API server that does not answer is asked again after a second, then
		// less and less often, up to once a minute (operator.TenantRetries): never in a
		// loop.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, RateLimiter: operator.TenantRetries()}).
		Complete(r)
}

// provisioned lets through a Machine that is Provisioned when it appears or becomes
// so: its VM exists and its Node is awaited.
func provisioned() predicate.Funcs {
	is := func(obj client.Object) bool {
		m, ok := obj.(*clusterv1.Machine)
		return ok && m.Status.Phase == string(clusterv1.MachinePhaseProvisioned)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return is(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return is(e.ObjectNew) && !is(e.ObjectOld) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// resumed lets through a Cluster that stops being paused.
func resumed() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*clusterv1.Cluster)
			cur, okNew := e.ObjectNew.(*clusterv1.Cluster)
			return okOld && okNew && paused.Cluster(old) && !paused.Cluster(cur)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// tenantOfMachine maps a pool's Machine to its tenant Cluster: the tenant label of the
// MachineDeployment that made it (the cache keeps its labels), which names the
// tenant's Cluster for pools under satellites too.
func (r *Reconciler) tenantOfMachine(ctx context.Context, obj client.Object) []reconcile.Request {
	md := obj.GetLabels()[clusterv1.MachineDeploymentNameLabel]
	if md == "" {
		return nil
	}
	d := &clusterv1.MachineDeployment{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: md}, d); err != nil {
		return nil
	}
	cluster := d.Labels[names.LabelTenantCluster]
	if cluster == "" || d.Spec.ClusterName == cluster {
		return nil // not under a satellite: its Node carries the providerID its provider gave
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: cluster}}}
}
