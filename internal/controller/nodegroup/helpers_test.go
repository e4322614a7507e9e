package nodegroup_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

func mustCreateOnce(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func mustGet(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("getting %T %s/%s: %v", obj, ns, name, err)
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

// waitGeneration waits until the pool's status describes its current generation.
func waitGeneration(t *testing.T, ng *v1.NodeGroup) *v1.NodeGroup {
	t.Helper()
	got := &v1.NodeGroup{}
	testenv.Eventually(t, "status at the current generation", func() bool {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ng), got); err != nil {
			return false
		}
		return got.Status.ObservedGeneration == got.Generation
	})
	return got
}

func ptr[T any](v T) *T { return &v }

// waitQuiet waits until the controller has sent no write for a second: the reconciles
// that the watch events of earlier changes trigger are done.
func waitQuiet(t *testing.T) {
	t.Helper()
	testenv.WaitQuiet(t, "the controller's writes", writes.Load)
}

// autoscale sets the replicas of the MachineDeployment ns/name to n as
// cluster-autoscaler's field manager would, patching the object's spec.replicas.
func autoscale(t *testing.T, ns, name string, n int32) {
	t.Helper()
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, name, md)
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr(n)
	if err := env.Client.Patch(context.Background(), md, patch, client.FieldOwner("cluster-autoscaler")); err != nil {
		t.Fatal(err)
	}
}

// assertSteady forces ten resyncs of the pool once the controller is quiet, and fails
// the test if they send any write.
func assertSteady(t *testing.T, ng *v1.NodeGroup) {
	t.Helper()
	waitQuiet(t)
	before := writes.Load()
	for range 10 {
		if _, err := reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ng)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.Load() - before; n != 0 {
		t.Errorf("ten steady-state resyncs sent %d writes, want 0", n)
	}
}
