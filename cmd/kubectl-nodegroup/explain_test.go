package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		restConfig = func() (*rest.Config, error) { return e.Config, nil }
		return nil
	})
}

// asTenant makes explain ask as a tenant who may read NodeGroups of the namespace and
// nothing else: no MachineDeployment, no Machine.
func asTenant(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-view"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"nodegroups"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}}}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
	tenant, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := tenant.List(ctx, &clusterv1.MachineList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant may list Machines (%v): the test proves nothing", err)
	}
	restConfig = func() (*rest.Config, error) { return cfg, nil }
	t.Cleanup(func() { restConfig = func() (*rest.Config, error) { return env.Config, nil } })
}

// TestExplain asks a real API server, as a tenant who may read only NodeGroups, about a
// pool whose status the operator would have written, and checks the plain-words answer.
func TestExplain(t *testing.T) {
	ctx := context.Background()
	asTenant(t, "default")
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: v1.NodeGroupSpec{
		ClusterName: "tenant", MaxReplicas: 3, Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")}}}
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&ng.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: ng.Generation})
	}
	set(v1.ConditionClassResolved, metav1.ConditionTrue, "Resolved", `class "talos": Talos`)
	set(v1.ConditionLocationResolved, metav1.ConditionTrue, "Resolved", `location "in-cluster"`)
	set(v1.ConditionClusterFound, metav1.ConditionFalse, "ClusterNotFound", `Cluster "tenant" does not exist in namespace "default"`)
	set(v1.ConditionRendered, metav1.ConditionUnknown, "NotChecked", "not checked yet")
	ng.Status.ObservedGeneration = ng.Generation
	if err := env.Client.Status().Update(ctx, ng); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	code := run([]string{"explain", "web", "-n", "default"}, &out, &errOut)
	text := out.String()
	if code != 1 || !strings.Contains(text, `!! its cluster and control plane (ClusterNotFound): Cluster "tenant" does not exist`) ||
		!strings.Contains(text, "ok its class") || !strings.Contains(text, "?  its machines: not reported yet") ||
		!strings.Contains(text, "?  its Cluster API objects: not checked yet") ||
		!strings.Contains(text, "fix the first step marked !!") {
		t.Fatalf("exit %d, output:\n%s%s", code, text, errOut.String())
	}

	set(v1.ConditionClusterFound, metav1.ConditionTrue, "Resolved", `cluster "tenant"`)
	set(v1.ConditionRendered, metav1.ConditionTrue, "Applied", "the pool's objects are applied and current")
	set(v1.ConditionReady, metav1.ConditionFalse, "MachinesNotReady", "2 of 3 machines ready")
	set(v1.ConditionRollingOut, metav1.ConditionTrue, "RollingOut", "1 of 3 machines up to date, rolling out bootstrap template web-b2")
	set(v1.ConditionAvailable, metav1.ConditionTrue, "Available", "3 of 3 machines available")
	st := &ng.Status
	st.MachineDeploymentName, st.KubernetesVersion, st.BootstrapTemplateName, st.InfrastructureTemplateName = "tenant-web", "v1.35.4", "web-b2", "web-i1"
	st.Replicas, st.ReadyReplicas, st.UpToDateReplicas, st.AvailableReplicas, st.Ready, st.Summary = 4, 2, 1, 3, "2/3", "RollingOut"
	st.NotRunningMachines = []v1.MachineNotRunning{{Name: "tenant-web-x", Phase: "Provisioning", Condition: "InfrastructureReady",
		Reason: "WaitingForVM", Message: "VirtualMachine tenant-web-x is not scheduled"}}
	st.NotRunningMachineCount = 3
	if err := env.Client.Status().Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	code = run([]string{"explain", "web", "-n", "default"}, &out, &errOut)
	text = out.String()
	for _, want := range []string{
		"Machines (MachineDeployment tenant-web): RollingOut; 2/3 ready, 1 up to date, 3 available of 4",
		"Kubernetes v1.35.4, bootstrap template web-b2, infrastructure template web-i1",
		"ok Available=True: 3 of 3 machines available",
		"-> RollingOut=True: 1 of 3 machines up to date, rolling out bootstrap template web-b2",
		"machine tenant-web-x: Provisioning, InfrastructureReady WaitingForVM: VirtualMachine tenant-web-x is not scheduled",
		"and 2 more machines not running (kubectl get machines -n default -l nodegroup.io/pool=web)",
	} {
		if code != 1 || !strings.Contains(text, want) {
			t.Fatalf("exit %d, want %q in the output:\n%s%s", code, want, text, errOut.String())
		}
	}

	set(v1.ConditionReady, metav1.ConditionTrue, "MachinesReady", "1 of 1 machines ready")
	if err := env.Client.Status().Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"explain", "web", "-n", "default"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "The pool is ready.") {
		t.Fatalf("exit %d, output:\n%s", code, out.String())
	}

	out.Reset()
	errOut.Reset()
	if code := run([]string{"explain", "nope", "-n", "default"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `NodeGroup default/nope`) {
		t.Fatalf("a missing pool: exit %d, %s", code, errOut.String())
	}
}
