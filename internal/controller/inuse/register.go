package inuse

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// NodeGroup field indexes by the class and the location a pool names. The names and
// values are the nodegroup controller's own indexes of the same fields: whichever
// registers first serves both controllers.
const (
	IndexClass    = "spec.nodeGroupClassName"
	IndexLocation = "spec.locationName"
)

// RegisterIndexes registers IndexClass and IndexLocation on NodeGroups, keeping an
// index that already exists under the same name.
//
// The cache refuses a second indexer of a name with client-go's "indexer conflict"
// error; exactly that error is accepted, because the existing indexer extracts the same
// field. Call it after anything that registers the indexes without that tolerance (the
// nodegroup controller's Register), which would otherwise fail on the conflict.
func RegisterIndexes(mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	for _, k := range []struct {
		field string
		named func(*v1.NodeGroup) string
	}{{classes.index, classes.named}, {locations.index, locations.named}} {
		err := idx.IndexField(context.Background(), &v1.NodeGroup{}, k.field, func(o client.Object) []string {
			return []string{k.named(o.(*v1.NodeGroup))}
		})
		if err != nil && !strings.Contains(err.Error(), "indexer conflict") {
			return err
		}
	}
	return nil
}

// Register adds the class and the location controllers to a manager, with the indexes
// they need (RegisterIndexes).
func (r *Reconciler) Register(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("nodegroup-operator")
	}
	if err := RegisterIndexes(mgr); err != nil {
		return err
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
