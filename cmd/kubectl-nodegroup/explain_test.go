package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var (
	env *testenv.Env
	// kubeconfig is a kubeconfig file of the test API server with two contexts: admin
	// (current), and tenant, the admin's credentials impersonating the user "tenant" in
	// the namespace "default", as a tenant's kubeconfig names its own namespace.
	kubeconfig string
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		dir, err := os.MkdirTemp("", "kubectl-nodegroup")
		if err != nil {
			return err
		}
		e.BeforeStop(func() { _ = os.RemoveAll(dir) })
		kubeconfig = filepath.Join(dir, "kubeconfig")
		return writeKubeconfig(e.KubeConfig(), kubeconfig)
	})
}

func writeKubeconfig(admin []byte, path string) error {
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		return err
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	if cur == nil {
		return fmt.Errorf("the test API server's kubeconfig has no current context")
	}
	tenant := cfg.AuthInfos[cur.AuthInfo].DeepCopy()
	tenant.Impersonate = "tenant"
	cfg.AuthInfos["tenant"] = tenant
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: cur.Cluster, AuthInfo: cur.AuthInfo}
	cfg.Contexts["tenant"] = &clientcmdapi.Context{Cluster: cur.Cluster, AuthInfo: "tenant", Namespace: "default"}
	cfg.CurrentContext = "admin"
	return clientcmd.WriteToFile(*cfg, path)
}

// cli runs the plugin against the test API server in the kubeconfig's context.
func cli(context string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(append(args, "--kubeconfig", kubeconfig, "--context", context), &out, &errOut)
	return code, out.String(), errOut.String()
}

// asTenant grants the user "tenant" (the kubeconfig's tenant context) the reading of
// NodeGroups of the namespace and nothing else: no MachineDeployment, no Machine.
func asTenant(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-view"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"nodegroups"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}}}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
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

	// The tenant context's namespace is the pool's: no -n.
	code, text, errText := cli("tenant", "explain", "web")
	if code != 1 || !strings.Contains(text, `!! its cluster and control plane (ClusterNotFound): Cluster "tenant" does not exist`) ||
		!strings.Contains(text, "ok its class") || !strings.Contains(text, "?  its machines: not reported yet") ||
		!strings.Contains(text, "?  its Cluster API objects: not checked yet") ||
		!strings.Contains(text, "fix the first step marked !!") {
		t.Fatalf("exit %d, output:\n%s%s", code, text, errText)
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
	code, text, errText = cli("tenant", "explain", "web", "-n", "default")
	for _, want := range []string{
		"Machines (MachineDeployment tenant-web): RollingOut; 2/3 ready, 1 up to date, 3 available of 4",
		"Kubernetes v1.35.4, bootstrap template web-b2, infrastructure template web-i1",
		"ok Available=True: 3 of 3 machines available",
		"-> RollingOut=True: 1 of 3 machines up to date, rolling out bootstrap template web-b2",
		"machine tenant-web-x: Provisioning, InfrastructureReady WaitingForVM: VirtualMachine tenant-web-x is not scheduled",
		"and 2 more machines not running (kubectl get machines -n default -l nodegroup.io/pool=web)",
	} {
		if code != 1 || !strings.Contains(text, want) {
			t.Fatalf("exit %d, want %q in the output:\n%s%s", code, want, text, errText)
		}
	}

	set(v1.ConditionReady, metav1.ConditionTrue, "MachinesReady", "1 of 1 machines ready")
	set(v1.ConditionTalosIdentityReady, metav1.ConditionTrue, "Ready", "the join identity demo-talos is current")
	if err := env.Client.Status().Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	if code, text, _ := cli("tenant", "explain", "web"); code != 0 || !strings.Contains(text, "The pool is ready.") || strings.Contains(text, "TalosIdentityReady") {
		t.Fatalf("exit %d, output:\n%s", code, text)
	}
	// -o yaml prints the pool as read, and it reads back as it was.
	code, text, errText = cli("tenant", "explain", "web", "-o", "yaml")
	back := &v1.NodeGroup{}
	if err := yaml.UnmarshalStrict([]byte(text), back); code != 0 || err != nil || back.Status.Summary != "RollingOut" || back.Kind != "NodeGroup" {
		t.Fatalf("-o yaml: exit %d, %v:\n%s%s", code, err, text, errText)
	}
	if code, text, _ := cli("tenant", "explain", "web", "-o", "wide"); code != 0 || !strings.Contains(text, "The pool is ready.") ||
		!strings.Contains(text, "TalosIdentityReady=True (Ready): the join identity demo-talos is current") {
		t.Fatalf("-o wide: exit %d, output:\n%s", code, text)
	}

	if code, _, errText := cli("tenant", "explain", "nope"); code != 2 || !strings.Contains(errText, `NodeGroup default/nope`) {
		t.Fatalf("a missing pool: exit %d, %s", code, errText)
	}
}
