package inuse

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
)

// Register adds the class and the location controllers to a manager. The manager's
// indexer must have the operator's field indexes (operator.RegisterIndexes).
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}
	if err := register(mgr, r.Name(), classes, r.ReconcileClass); err != nil {
		return err
	}
	return register(mgr, r.Name(), locations, r.ReconcileLocation)
}

func register[T any, P object[T]](mgr ctrl.Manager, name string, k kind[T, P], rec reconcile.Func) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(name+"-"+k.suffix).
		For(P(new(T))).
		Watches(&v1.NodeGroup{}, namedBy(k.named)).
		WithOptions(controller.Options{RateLimiter: operator.Retries()}).
		Complete(rec)
}

// namedBy maps a pool to the object it names. An update is mapped only when the name
// changes, and then to the old and the new object, so a pool moving away releases the
// object it left; a deleted pool is mapped to the object it named.
func namedBy(named func(*v1.NodeGroup) string) handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			if ng, ok := o.(*v1.NodeGroup); ok && named(ng) != "" {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: named(ng)}})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, okOld := e.ObjectOld.(*v1.NodeGroup)
			cur, okNew := e.ObjectNew.(*v1.NodeGroup)
			if okOld && okNew && named(old) != named(cur) {
				enqueue(q, old, cur)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
	}
}
