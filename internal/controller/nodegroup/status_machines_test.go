package nodegroup_test

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestStatusSaysWhatTheMachinesDo: the pool's status carries the MachineDeployment's
// counts and conditions, the machines that do not run and why, and what a rollout rolls
// out, so a tenant needs to read nothing else; a steady state still writes nothing.
func TestStatusSaysWhatTheMachinesDo(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t)
	ng := pool(ns, "web", nil)
	env.MustCreate(t, ng)
	got := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
	autoscale(t, ns, "tenant-web", 2)

	ref := func(kind, name string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: "x.cluster.x-k8s.io", Kind: kind, Name: name}
	}
	labels := map[string]string{names.LabelPool: "web", clusterv1.ClusterNameLabel: "tenant", clusterv1.MachineDeploymentNameLabel: "tenant-web"}
	oldSet := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-web-old", Labels: labels},
		Spec: clusterv1.MachineSetSpec{ClusterName: "tenant", Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels}, Spec: clusterv1.MachineSpec{
				ClusterName: "tenant", Bootstrap: clusterv1.Bootstrap{ConfigRef: ref("TalosConfigTemplate", "web-old")},
				InfrastructureRef: ref("KubevirtMachineTemplate", got.Status.InfrastructureTemplateName)}}}}
	env.MustCreate(t, oldSet)
	for _, name := range []string{"web-b", "web-a"} {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: clusterv1.MachineSpec{
			ClusterName: "tenant", Bootstrap: clusterv1.Bootstrap{ConfigRef: ref("TalosConfig", name)}, InfrastructureRef: ref("KubevirtMachine", name)}}
		env.MustCreate(t, m)
		m.Status.Phase = "Provisioning"
		m.Status.Conditions = []metav1.Condition{{Type: "InfrastructureReady", Status: metav1.ConditionFalse, Reason: "WaitingForVM",
			Message: "* VirtualMachine " + name + ":\n  * not scheduled", LastTransitionTime: metav1.Now()}}
		if name == "web-a" {
			m.Status.Phase = "Running"
			m.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
		}
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, "tenant-web", md)
	md.Status.Replicas, md.Status.ReadyReplicas, md.Status.AvailableReplicas, md.Status.UpToDateReplicas = new(int32(2)), new(int32(1)), new(int32(1)), new(int32(1))
	md.Status.Conditions = []metav1.Condition{{Type: "RollingOut", Status: metav1.ConditionTrue, Reason: "RollingOut",
		Message: "Rolling out 1 not up-to-date replicas", LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, md); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, "the pool's status shows the machines", func() bool {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), got); err != nil {
			return false
		}
		return got.Status.NotRunningMachineCount == 1 && got.Status.Summary == "RollingOut" && got.Status.UpToDateReplicas == 1
	})
	st := got.Status
	want := v1.MachineNotRunning{Name: "web-b", Phase: "Provisioning", Condition: "InfrastructureReady", Reason: "WaitingForVM",
		Message: "VirtualMachine web-b:; not scheduled"}
	if len(st.NotRunningMachines) != 1 || st.NotRunningMachines[0] != want {
		t.Errorf("notRunningMachines %+v, want %+v", st.NotRunningMachines, want)
	}
	if st.Ready != "1/2" || st.AvailableReplicas != 1 || st.Replicas != 2 {
		t.Errorf("ready %q, available %d, replicas %d", st.Ready, st.AvailableReplicas, st.Replicas)
	}
	c := meta.FindStatusCondition(st.Conditions, v1.ConditionRollingOut)
	wantMsg := "1 of 2 machines up to date, rolling out bootstrap template " + st.BootstrapTemplateName + ": Rolling out 1 not up-to-date replicas"
	if c == nil || c.Status != metav1.ConditionTrue || c.Message != wantMsg || c.ObservedGeneration != got.Generation {
		t.Errorf("RollingOut %+v, want True %q", c, wantMsg)
	}

	assertSteady(t, ng)
}

// TestStatusShowsOnlyThePoolsOwnMachines: the machines a pool's status names, with
// their providers' messages, are those its MachineDeployment made in its namespace; a
// machine that only carries the pool's label (made by another MachineDeployment, or in
// another namespace) never reaches the tenant.
func TestStatusShowsOnlyThePoolsOwnMachines(t *testing.T) {
	ctx := context.Background()
	ns, elsewhere := tenant(t), tenant(t)
	ng := pool(ns, "own", nil)
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")

	machine := func(ns, name, deployment, message string) {
		t.Helper()
		labels := map[string]string{names.LabelPool: "own", clusterv1.ClusterNameLabel: "tenant", clusterv1.MachineDeploymentNameLabel: deployment}
		ref := func(kind string) clusterv1.ContractVersionedObjectReference {
			return clusterv1.ContractVersionedObjectReference{APIGroup: "x.cluster.x-k8s.io", Kind: kind, Name: name}
		}
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: clusterv1.MachineSpec{
			ClusterName: "tenant", Bootstrap: clusterv1.Bootstrap{ConfigRef: ref("TalosConfig")}, InfrastructureRef: ref("KubevirtMachine")}}
		env.MustCreate(t, m)
		m.Status.Phase = "Provisioning"
		m.Status.Conditions = []metav1.Condition{{Type: "InfrastructureReady", Status: metav1.ConditionFalse, Reason: "WaitingForVM",
			Message: message, LastTransitionTime: metav1.Now()}}
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	machine(elsewhere, "foreign-namespace", "tenant-own", "secret of another tenant")
	machine(ns, "foreign-deployment", "other-own", "not this pool's")
	machine(ns, "own-a", "tenant-own", "mine")

	got := &v1.NodeGroup{}
	testenv.Eventually(t, "the pool's status names its machine", func() bool {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), got); err != nil {
			return false
		}
		// A machine is seen first as created, then with the status written after.
		return slices.ContainsFunc(got.Status.NotRunningMachines, func(m v1.MachineNotRunning) bool { return m.Name == "own-a" && m.Message == "mine" })
	})
	want := []v1.MachineNotRunning{{Name: "own-a", Phase: "Provisioning", Condition: "InfrastructureReady", Reason: "WaitingForVM", Message: "mine"}}
	if got.Status.NotRunningMachineCount != 1 || !slices.Equal(got.Status.NotRunningMachines, want) {
		t.Errorf("notRunningMachines (%d) %+v, want only %+v", got.Status.NotRunningMachineCount, got.Status.NotRunningMachines, want)
	}
}
