package inuse_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/inuse"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

const timeout = testenv.Timeout

func TestClassDeletionWaitsForItsLastPool(t *testing.T) {
	ns := newNamespace(t)
	class := newClass(t, "held")
	pool := newPool(t, ns, "workers", class.Name, "")

	got := waitInUse(t, class, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 1 pool in 1 namespace")
	if !controllerutil.ContainsFinalizer(got, inuse.Finalizer) {
		t.Fatalf("finalizers = %v, want %s", got.GetFinalizers(), inuse.Finalizer)
	}

	mustDelete(t, class)
	got = waitInUse(t, class, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "deletion waits for 1 pool in 1 namespace")
	if got.GetDeletionTimestamp().IsZero() {
		t.Fatal("the class has no deletionTimestamp")
	}
	waitEvent(t, class.Name, inuse.ReasonDeletionWaits, "deletion waits for 1 pool in 1 namespace")
	time.Sleep(time.Second)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(class), &v1.NodeGroupClass{}); err != nil {
		t.Fatalf("the deletion of a used class was not held: %v", err)
	}

	mustDelete(t, pool)
	waitGone(t, class)
}

func TestPoolMovingAwayReleasesItsOldClass(t *testing.T) {
	ns := newNamespace(t)
	a, b := newClass(t, "from"), newClass(t, "to")
	pool := newPool(t, ns, "mover", a.Name, "")
	waitInUse(t, a, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 1 pool in 1 namespace")
	if got := waitInUse(t, b, metav1.ConditionFalse, inuse.ReasonUnused, "no pool names it"); len(got.GetFinalizers()) != 0 {
		t.Fatalf("an unused class has finalizers %v", got.GetFinalizers())
	}

	mustUpdate(t, pool, func(ng *v1.NodeGroup) { ng.Spec.NodeGroupClassName = b.Name })
	if got := waitInUse(t, a, metav1.ConditionFalse, inuse.ReasonUnused, "no pool names it"); controllerutil.ContainsFinalizer(got, inuse.Finalizer) {
		t.Fatal("the class the pool left keeps the finalizer")
	}
	if got := waitInUse(t, b, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 1 pool in 1 namespace"); !controllerutil.ContainsFinalizer(got, inuse.Finalizer) {
		t.Fatal("the class the pool moved to has no finalizer")
	}

	mustDelete(t, a)
	waitGone(t, a)
}

func TestLocationDeletionWaitsAndMovingAwayReleasesIt(t *testing.T) {
	ns := newNamespace(t)
	here, there := newLocation(t, "here"), newLocation(t, "there")
	pool := newPool(t, ns, "travels", unique("no-class"), here.Name)
	got := waitInUse(t, here, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 1 pool in 1 namespace")
	if !controllerutil.ContainsFinalizer(got, inuse.Finalizer) {
		t.Fatalf("finalizers = %v, want %s", got.GetFinalizers(), inuse.Finalizer)
	}

	mustDelete(t, here)
	waitInUse(t, here, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "deletion waits for 1 pool in 1 namespace")
	waitEvent(t, here.Name, inuse.ReasonDeletionWaits, "deletion waits for 1 pool in 1 namespace")

	mustUpdate(t, pool, func(ng *v1.NodeGroup) { ng.Spec.LocationName = there.Name })
	waitGone(t, here)
	waitInUse(t, there, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 1 pool in 1 namespace")
}

func TestMessageCountsPoolsAndNamespacesNamingNone(t *testing.T) {
	class := newClass(t, "busy")
	for _, ns := range []string{newNamespace(t), newNamespace(t)} {
		for i := range 6 {
			newPool(t, ns, fmt.Sprintf("pool-%02d", i), class.Name, "")
		}
	}
	// The whole message: every tenant may read a class, so it names no pool.
	waitInUse(t, class, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 12 pools in 2 namespaces")
}

func TestSteadyStateWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	class, loc := newClass(t, "steady"), newLocation(t, "steady")
	pool := newPool(t, ns, "idle", class.Name, loc.Name)
	waitInUse(t, class, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 1 pool in 1 namespace")
	waitInUse(t, loc, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 1 pool in 1 namespace")
	time.Sleep(time.Second) // the manager handles the events of its own writes

	before := writes.count(writeKey(class)) + writes.count(writeKey(loc))
	ctx := context.Background()
	for range 5 {
		if _, err := reconciler.ReconcileClass(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(class)}); err != nil {
			t.Fatal(err)
		}
		if _, err := reconciler.ReconcileLocation(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(loc)}); err != nil {
			t.Fatal(err)
		}
	}
	// Events the controllers see without anything changing for them.
	mustUpdate(t, pool, func(ng *v1.NodeGroup) { ng.Labels = map[string]string{"touched": "yes"} })
	mustLabel(t, class)
	mustLabel(t, loc)
	time.Sleep(2 * time.Second)

	if after := writes.count(writeKey(class)) + writes.count(writeKey(loc)); after != before {
		t.Fatalf("a steady state sent %d writes, want none", after-before)
	}
}

func TestBuiltinTalosClassIsProtectedLikeAnyOther(t *testing.T) {
	ns := newNamespace(t)
	talos := &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: v1.BuiltinTalosClass}, Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos}}
	env.MustCreate(t, talos)
	pool := newPool(t, ns, "default-class", "", "") // the API server defaults the class to talos

	waitInUse(t, talos, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "used by 1 pool in 1 namespace")
	mustDelete(t, talos)
	waitInUse(t, talos, metav1.ConditionTrue, inuse.ReasonPoolsUseIt, "deletion waits for 1 pool in 1 namespace")
	mustDelete(t, pool)
	waitGone(t, talos)

	if n := writes.count("delete"); n != 0 {
		t.Fatalf("the controller sent %d deletes, want none", n)
	}
}

// --- helpers

var seq atomic.Int64

// unique makes a name no other test uses: the API server outlives each test.
func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unique("inuse")}}
	env.MustCreate(t, ns)
	return ns.Name
}

func newClass(t *testing.T, prefix string) *v1.NodeGroupClass {
	t.Helper()
	c := &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: unique(prefix)}, Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos}}
	env.MustCreate(t, c)
	return c
}

func newLocation(t *testing.T, prefix string) *v1.Location {
	t.Helper()
	l := &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: unique(prefix)}, Spec: v1.LocationSpec{
		Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
	}}
	env.MustCreate(t, l)
	return l
}

// newPool creates a pool; an empty class or location is left to the API server's default.
func newPool(t *testing.T, ns, name, class, location string) *v1.NodeGroup {
	t.Helper()
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
		ClusterName: "tenant", NodeGroupClassName: class, LocationName: location, MinReplicas: 1, MaxReplicas: 3,
		Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
	}}
	env.MustCreate(t, ng)
	return ng
}

func mustDelete(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), obj); err != nil {
		t.Fatalf("deleting %T %s: %v", obj, obj.GetName(), err)
	}
}

func mustUpdate(t *testing.T, ng *v1.NodeGroup, change func(*v1.NodeGroup)) {
	t.Helper()
	for range 10 {
		cur := &v1.NodeGroup{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ng), cur); err != nil {
			t.Fatal(err)
		}
		change(cur)
		err := env.Client.Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("could not update the pool: conflicts")
}

// mustLabel adds a label by merge patch, an update event that changes nothing we read.
func mustLabel(t *testing.T, obj client.Object) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))
	if err := env.Client.Patch(context.Background(), obj.DeepCopyObject().(client.Object), patch); err != nil {
		t.Fatal(err)
	}
}

func conditions(obj client.Object) []metav1.Condition {
	switch o := obj.(type) {
	case *v1.NodeGroupClass:
		return o.Status.Conditions
	case *v1.Location:
		return o.Status.Conditions
	}
	panic(fmt.Sprintf("no conditions on %T", obj))
}

// waitInUse waits until the object's InUse condition is the one given, at its current
// generation, and returns the object.
func waitInUse(t *testing.T, obj client.Object, status metav1.ConditionStatus, reason, message string) client.Object {
	t.Helper()
	got := obj.DeepCopyObject().(client.Object)
	last := "no condition"
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err == nil {
			if c := meta.FindStatusCondition(conditions(got), v1.ConditionInUse); c != nil {
				last = fmt.Sprintf("%s %s %q (generation %d of %d)", c.Status, c.Reason, c.Message, c.ObservedGeneration, got.GetGeneration())
				if c.Status == status && c.Reason == reason && c.Message == message && c.ObservedGeneration == got.GetGeneration() {
					return got
				}
			}
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%T %s: InUse is %s, want %s %s %q", obj, obj.GetName(), last, status, reason, message)
	return nil
}

func waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%T %s is still there", obj, obj.GetName())
}

// waitEvent waits for an event on a cluster-scoped object (recorded in "default").
func waitEvent(t *testing.T, name, reason, message string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var events corev1.EventList
		if err := env.Client.List(context.Background(), &events, client.InNamespace(metav1.NamespaceDefault)); err == nil {
			for _, e := range events.Items {
				if e.InvolvedObject.Name == name && e.Reason == reason && e.Message == message && e.Type == corev1.EventTypeWarning {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %s event %q on %s", reason, message, name)
}
