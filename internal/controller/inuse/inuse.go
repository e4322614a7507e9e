package inuse

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
)

// Finalizer holds a class or location while pools name it.
const Finalizer = "nodegroup.io/in-use"

// Reasons of the InUse condition and of the event of a held deletion.
const (
	ReasonPoolsUseIt = "PoolsUseIt"
	ReasonUnused     = "Unused"
	// ReasonDeletionWaits is the event of a deletion held by the finalizer.
	ReasonDeletionWaits = "DeletionWaits"
)

// Reconciler protects NodeGroupClasses and Locations that pools name.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader confirms, before a deleting object is released, that no pool names it;
	// Register sets it when nil.
	APIReader client.Reader
	// Recorder emits the event of a held deletion; Register sets it when nil.
	Recorder events.EventRecorder
}

// Name of the controller; its two instances are Name()+"-class" and Name()+"-location".
func (r *Reconciler) Name() string { return "inuse" }

// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroupclasses;locations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroupclasses/status;locations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroupclasses/finalizers;locations/finalizers,verbs=update
// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ReconcileClass brings one NodeGroupClass's finalizer and InUse condition in line with
// the pools that name it.
func (r *Reconciler) ReconcileClass(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileKind(ctx, r, classes, req)
}

// ReconcileLocation does the same for one Location.
func (r *Reconciler) ReconcileLocation(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileKind(ctx, r, locations, req)
}

// object is a pointer to a kind this package protects.
type object[T any] interface {
	*T
	client.Object
}

// kind is what the class and location controllers do not share.
type kind[T any, P object[T]] struct {
	suffix     string // of the controller's name
	index      string // the NodeGroup field index by the object's name
	named      func(*v1.NodeGroup) string
	conditions func(P) *[]metav1.Condition
}

var (
	classes = kind[v1.NodeGroupClass, *v1.NodeGroupClass]{
		suffix:     "class",
		index:      operator.PoolsByClass,
		named:      func(ng *v1.NodeGroup) string { return ng.Spec.NodeGroupClassName },
		conditions: func(c *v1.NodeGroupClass) *[]metav1.Condition { return &c.Status.Conditions },
	}
	locations = kind[v1.Location, *v1.Location]{
		suffix:     "location",
		index:      operator.PoolsByLocation,
		named:      func(ng *v1.NodeGroup) string { return ng.Spec.LocationName },
		conditions: func(l *v1.Location) *[]metav1.Condition { return &l.Status.Conditions },
	}
)

func reconcileKind[T any, P object[T]](ctx context.Context, r *Reconciler, k kind[T, P], req ctrl.Request) (ctrl.Result, error) {
	obj := P(new(T))
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !obj.GetDeletionTimestamp().IsZero()
	held := controllerutil.ContainsFinalizer(obj, Finalizer)
	if deleting && !held {
		return ctrl.Result{}, nil // released already, or deleted before we could hold it
	}

	pools, err := r.cachedPools(ctx, k.index, obj.GetName())
	if err != nil {
		return ctrl.Result{}, err
	}
	if deleting && len(pools) == 0 {
		// The cache may not have seen a pool created a moment ago; releasing a deleting
		// object cannot be undone, so the API server has the last word.
		if pools, err = r.livePools(ctx, k.named, obj.GetName()); err != nil {
			return ctrl.Result{}, err
		}
	}

	used := len(pools) > 0
	if used != held {
		if err := r.setFinalizer(ctx, obj, used); err != nil {
			return ctrl.Result{}, err
		}
		if deleting {
			return ctrl.Result{}, nil // released: the API server removes the object now
		}
	}

	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	cond := condition(pools, deleting, obj.GetGeneration())
	if !meta.SetStatusCondition(k.conditions(obj), cond) {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Status().Patch(ctx, obj, patch); err != nil {
		return ctrl.Result{}, err
	}
	if deleting && r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonDeletionWaits, "HoldDeletion", "%s", cond.Message)
	}
	return ctrl.Result{}, nil
}

// cachedPools lists, as sorted namespace/name, the pools whose field names the object.
func (r *Reconciler) cachedPools(ctx context.Context, index, name string) ([]string, error) {
	var list v1.NodeGroupList
	// Only the names are read: no copies of the thousands of pools a class may have.
	if err := r.Client.List(ctx, &list, client.MatchingFields{index: name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the pools that name %q: %w", name, err)
	}
	return poolNames(list.Items, func(*v1.NodeGroup) bool { return true }), nil
}

// livePools is cachedPools from the API server, which has no index of the field.
func (r *Reconciler) livePools(ctx context.Context, named func(*v1.NodeGroup) string, name string) ([]string, error) {
	var list v1.NodeGroupList
	if err := r.APIReader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing the pools that name %q: %w", name, err)
	}
	return poolNames(list.Items, func(ng *v1.NodeGroup) bool { return named(ng) == name }), nil
}

func poolNames(items []v1.NodeGroup, keep func(*v1.NodeGroup) bool) []string {
	var out []string
	for i := range items {
		if keep(&items[i]) {
			out = append(out, items[i].Namespace+"/"+items[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

// setFinalizer adds or removes the finalizer. The optimistic lock keeps a merge patch,
// which replaces the list whole, from dropping a finalizer someone else just added.
func (r *Reconciler) setFinalizer(ctx context.Context, obj client.Object, on bool) error {
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	if on {
		controllerutil.AddFinalizer(obj, Finalizer)
	} else {
		controllerutil.RemoveFinalizer(obj, Finalizer)
	}
	return r.Client.Patch(ctx, obj, patch)
}

// condition is the InUse condition for the sorted pools that name an object.
func condition(pools []string, deleting bool, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1.ConditionInUse, ObservedGeneration: generation}
	if len(pools) == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonUnused, "no pool names it"
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, ReasonPoolsUseIt
	c.Message = fmt.Sprintf("used by %s", listPools(pools))
	if deleting {
		c.Message = fmt.Sprintf("deletion waits for %s", listPools(pools))
	}
	return c
}

// listPools counts the pools ("namespace/name", sorted) and their namespaces. It names
// none of them: classes and locations are cluster-scoped and every tenant may read them
// (the chart's catalog-reader role), so a pool's name or namespace in their status would
// tell one tenant about another. `kubectl get nodegroups -A` lists them for the platform.
func listPools(pools []string) string {
	namespaces := map[string]bool{}
	for _, p := range pools {
		ns, _, _ := strings.Cut(p, "/")
		namespaces[ns] = true
	}
	return fmt.Sprintf("%s in %s", plural(len(pools), "pool"), plural(len(namespaces), "namespace"))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
