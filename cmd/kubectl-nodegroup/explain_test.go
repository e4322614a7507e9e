package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

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

// TestExplain asks a real API server about a pool whose status the operator would have
// written, and checks the plain-words answer.
func TestExplain(t *testing.T) {
	ctx := context.Background()
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
