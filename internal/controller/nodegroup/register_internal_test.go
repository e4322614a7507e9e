package nodegroup

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestMachineSetChanged: a MachineSet's status alone wakes no pool; its spec, labels,
// deletion, creation and removal do.
func TestMachineSetChanged(t *testing.T) {
	old := &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant-workers-abc", Generation: 2, ResourceVersion: "10",
			Labels: map[string]string{"nodegroup.io/pool": "workers"}},
		Status: clusterv1.MachineSetStatus{Replicas: new(int32(1))},
	}
	change := func(f func(ms *clusterv1.MachineSet)) *clusterv1.MachineSet {
		ms := old.DeepCopy()
		ms.ResourceVersion = "11"
		f(ms)
		return ms
	}
	p := machineSetChanged()
	for _, tc := range []struct {
		name string
		new  *clusterv1.MachineSet
		want bool
	}{
		{"status only", change(func(ms *clusterv1.MachineSet) { ms.Status.ReadyReplicas = new(int32(1)) }), false},
		{"spec", change(func(ms *clusterv1.MachineSet) { ms.Generation++ }), true},
		{"labels", change(func(ms *clusterv1.MachineSet) { ms.Labels = map[string]string{"nodegroup.io/pool": "other"} }), true},
		{"deletion", change(func(ms *clusterv1.MachineSet) { now := metav1.Now(); ms.DeletionTimestamp = &now }), true},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if !p.Create(event.CreateEvent{Object: old}) || !p.Delete(event.DeleteEvent{Object: old}) {
		t.Error("a MachineSet's creation or removal is filtered out")
	}
}

// TestMachineChanged: a Machine wakes its pool when what the cache keeps of its status
// changes, or its deletion starts; a new resourceVersion alone does not.
func TestMachineChanged(t *testing.T) {
	old := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant-workers-x", ResourceVersion: "10"},
		Status:     clusterv1.MachineStatus{Phase: "Provisioning"},
	}
	change := func(f func(m *clusterv1.Machine)) *clusterv1.Machine {
		m := old.DeepCopy()
		m.ResourceVersion = "11"
		f(m)
		return m
	}
	p := machineChanged()
	for _, tc := range []struct {
		name string
		new  *clusterv1.Machine
		want bool
	}{
		{"nothing the cache keeps", change(func(*clusterv1.Machine) {}), false},
		{"phase", change(func(m *clusterv1.Machine) { m.Status.Phase = "Running" }), true},
		{"condition", change(func(m *clusterv1.Machine) {
			m.Status.Conditions = []metav1.Condition{{Type: "InfrastructureReady", Status: metav1.ConditionFalse, Reason: "WaitingForVM"}}
		}), true},
		{"deletion", change(func(m *clusterv1.Machine) { now := metav1.Now(); m.DeletionTimestamp = &now }), true},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTemplateChanged: a template wakes its pool when it is deleted or its spec changes;
// not when it is created (by the operator, or listed at a start), nor when only its
// metadata changes.
func TestTemplateChanged(t *testing.T) {
	old := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "workers-0123456789",
		Generation: 1, ResourceVersion: "10", Labels: map[string]string{"nodegroup.io/pool": "workers"}}}
	change := func(f func(m *metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
		m := old.DeepCopy()
		m.ResourceVersion = "11"
		f(m)
		return m
	}
	p := templateChanged()
	for _, tc := range []struct {
		name string
		new  *metav1.PartialObjectMetadata
		want bool
	}{
		{"spec", change(func(m *metav1.PartialObjectMetadata) { m.Generation++ }), true},
		{"labels", change(func(m *metav1.PartialObjectMetadata) {
			m.Labels = map[string]string{"nodegroup.io/pool": "workers", "x": "y"}
		}), false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if p.Create(event.CreateEvent{Object: old}) || !p.Delete(event.DeleteEvent{Object: old}) {
		t.Error("want a template's removal, and not its creation")
	}
}
