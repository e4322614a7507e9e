package nodegroup_test

import (
	"context"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestOtherWriters: what the operator does when someone else writes to the objects it
// made, each against the real API server with the controller running, counting what
// the controller sends.
func TestOtherWriters(t *testing.T) {
	t.Run("foreign labels and annotations are kept, with no write loop", func(t *testing.T) {
		ctx := context.Background()
		ng := renderedPool(t, "shared", nil)
		ns := ng.Namespace

		before := writes.Load()
		md := &clusterv1.MachineDeployment{}
		mustGet(t, ns, "tenant-shared", md)
		patch := client.MergeFrom(md.DeepCopy())
		md.Labels["team.example.com/owner"] = "platform"
		md.Annotations["team.example.com/note"] = "kept"
		if err := env.Client.Patch(ctx, md, patch, client.FieldOwner("kubectl-label")); err != nil {
			t.Fatal(err)
		}
		mhc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": clusterv1.GroupVersion.String(), "kind": "MachineHealthCheck",
			"metadata": map[string]any{"namespace": ns, "name": "tenant-shared",
				"labels": map[string]any{"team.example.com/owner": "platform"}, "annotations": map[string]any{"team.example.com/note": "kept"}},
		}}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(mhc), client.FieldOwner("gitops")); err != nil {
			t.Fatal(err)
		}
		// The MachineDeployment's change brings the pool back (the controller owns it);
		// the health check's does not, so the forced resyncs look at it.
		waitQuiet(t)
		assertSteady(t, ng)
		if n := writes.Load() - before; n != 0 {
			t.Errorf("the operator sent %d writes after another manager labelled its objects, want 0", n)
		}
		assertForeignMetadata(t, ns, "tenant-shared")

		// A change of the pool is applied, and the other manager's fields stay.
		mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.MaxReplicas = 5 })
		waitGeneration(t, ng)
		mustGet(t, ns, "tenant-shared", md)
		if md.Annotations[names.AnnotationMaxSize] != "5" {
			t.Fatalf("max-size annotation = %q after the change, want 5", md.Annotations[names.AnnotationMaxSize])
		}
		assertForeignMetadata(t, ns, "tenant-shared")
		assertSteady(t, ng)
	})

	t.Run("a deleted template a MachineSet uses is recreated with the same content", func(t *testing.T) {
		ctx := context.Background()
		ng := renderedPool(t, "recreated", nil)
		ns := ng.Namespace
		env.MustCreate(t, machineSet(ns, "tenant-recreated-a", "recreated", ng.Status.BootstrapTemplateName, ng.Status.InfrastructureTemplateName))
		waitQuiet(t)

		for _, name := range []string{ng.Status.BootstrapTemplateName, ng.Status.InfrastructureTemplateName} {
			kind := templateKind(t, ns, name)
			orig := template(t, ns, kind, name)
			before := writes.Load()
			if err := env.Client.Delete(ctx, orig.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			var again *unstructured.Unstructured
			testenv.Eventually(t, kind+" "+name+" recreated", func() bool {
				again = getTemplate(ns, kind, name)
				return again != nil && again.GetUID() != orig.GetUID()
			})
			waitQuiet(t)
			if !apiequality.Semantic.DeepEqual(again.Object["spec"], orig.Object["spec"]) {
				t.Errorf("%s %s recreated with another spec", kind, name)
			}
			if !apiequality.Semantic.DeepEqual(again.GetLabels(), orig.GetLabels()) || !apiequality.Semantic.DeepEqual(again.GetOwnerReferences(), orig.GetOwnerReferences()) {
				t.Errorf("%s %s recreated with labels %v and owners %v, want %v and %v", kind, name,
					again.GetLabels(), again.GetOwnerReferences(), orig.GetLabels(), orig.GetOwnerReferences())
			}
			if n := writes.Load() - before; n != 1 {
				t.Errorf("recreating %s %s took %d writes, want 1 (the create)", kind, name, n)
			}
		}
		assertSteady(t, ng)
	})

	t.Run("an edited template is named on the pool, left alone, and replaced at the pool's next change", func(t *testing.T) {
		ctx := context.Background()
		ng := renderedPool(t, "edited", nil)
		ns, name := ng.Namespace, ng.Status.BootstrapTemplateName

		before := writes.Load()
		tpl := template(t, ns, "TalosConfigTemplate", name)
		data, _, _ := unstructured.NestedString(tpl.Object, "spec", "template", "spec", "data")
		edited := data + "# edited by hand\n"
		if err := unstructured.SetNestedField(tpl.Object, edited, "spec", "template", "spec", "data"); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Update(ctx, tpl, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		modified := waitCondition(t, ng, v1.ConditionTemplatesIntact, metav1.ConditionFalse, nodegroup.ReasonTemplateModified)
		c := meta.FindStatusCondition(modified.Status.Conditions, v1.ConditionTemplatesIntact)
		for _, want := range []string{"someone else changed TalosConfigTemplate " + name + " after", "until a change of the pool"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("TemplatesIntact message %q does not say %q", c.Message, want)
			}
		}
		waitEvent(t, ng, corev1.EventTypeWarning, nodegroup.ReasonTemplateModified, name)
		assertSteady(t, ng)
		if n := writes.Load() - before; n != 1 {
			t.Errorf("the operator sent %d writes after its template was edited, want 1 (the status)", n)
		}
		after := template(t, ns, "TalosConfigTemplate", name)
		if d, _, _ := unstructured.NestedString(after.Object, "spec", "template", "spec", "data"); d != edited || after.GetGeneration() != 2 {
			t.Errorf("the edited template was written again (generation %d)", after.GetGeneration())
		}
		if !meta.IsStatusConditionTrue(modified.Status.Conditions, v1.ConditionReady) {
			t.Errorf("Ready = %+v: an edited template does not make a pool fail", meta.FindStatusCondition(modified.Status.Conditions, v1.ConditionReady))
		}

		// The pool's next change renders a new bootstrap template, and the pool says its
		// templates are intact again.
		mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.Labels = map[string]v1.LabelValue{"rack": "b"} })
		fresh := waitCondition(t, ng, v1.ConditionTemplatesIntact, metav1.ConditionTrue, nodegroup.ReasonTemplatesIntact)
		if fresh.Status.BootstrapTemplateName == name {
			t.Fatalf("the pool's change kept the edited bootstrap template %s", name)
		}
		md := &clusterv1.MachineDeployment{}
		mustGet(t, ns, "tenant-edited", md)
		if md.Spec.Template.Spec.Bootstrap.ConfigRef.Name != fresh.Status.BootstrapTemplateName {
			t.Errorf("MachineDeployment boots from %s, want %s", md.Spec.Template.Spec.Bootstrap.ConfigRef.Name, fresh.Status.BootstrapTemplateName)
		}
		if n := template(t, ns, "TalosConfigTemplate", fresh.Status.BootstrapTemplateName); n.GetGeneration() != 1 {
			t.Errorf("the new template has generation %d, want 1", n.GetGeneration())
		}
		assertSteady(t, ng)
	})

	t.Run("a fixed pool scaled by hand is brought back once, with an event", func(t *testing.T) {
		ctx := context.Background()
		ng := renderedPool(t, "fixed", func(s *v1.NodeGroupSpec) { s.MinReplicas, s.MaxReplicas = 2, 2 })
		ns := ng.Namespace
		// Cluster API seeds the replicas from the size annotations; the test control plane
		// runs no Cluster API webhook, so the test does it.
		autoscale(t, ns, "tenant-fixed", 2)
		waitQuiet(t)

		before := writes.Load()
		md := &clusterv1.MachineDeployment{}
		mustGet(t, ns, "tenant-fixed", md)
		scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
		if err := env.Client.SubResource("scale").Update(ctx, md, client.WithSubResourceBody(scale), client.FieldOwner("kubectl")); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ng, corev1.EventTypeWarning, nodegroup.ReasonReplicasRestored, `"kubectl"`)
		waitQuiet(t)
		mustGet(t, ns, "tenant-fixed", md)
		if md.Spec.Replicas == nil || *md.Spec.Replicas != 2 {
			t.Fatalf("replicas = %v after a hand scale to 5, want the pool's 2", md.Spec.Replicas)
		}
		if n := writes.Load() - before; n != 1 {
			t.Errorf("the operator sent %d writes to restore the replicas, want 1 (the scale)", n)
		}
		assertSteady(t, ng)
		if n := countEvents(t, ng, nodegroup.ReasonReplicasRestored); n != 1 {
			t.Errorf("%d %s events, want 1", n, nodegroup.ReasonReplicasRestored)
		}
	})

	t.Run("a resize that reaches the MachineDeployment late is the pool's, not someone else's", func(t *testing.T) {
		ng := renderedPool(t, "late", func(s *v1.NodeGroupSpec) { s.MinReplicas, s.MaxReplicas = 2, 2 })
		ns := ng.Namespace
		autoscale(t, ns, "tenant-late", 2)
		waitQuiet(t)
		// Resized while its class does not resolve: the reconciles stop before the apply
		// but still record the new generation in the status.
		mustUpdate(t, ng, func(n *v1.NodeGroup) {
			n.Spec.MinReplicas, n.Spec.MaxReplicas, n.Spec.NodeGroupClassName = 3, 3, "talos-published-late"
		})
		waitCondition(t, ng, v1.ConditionClassResolved, metav1.ConditionFalse, resolve.ReasonClassNotFound)
		waitQuiet(t)
		// The class is published: the next reconcile applies the new range, with no
		// change of the pool since its status recorded its generation.
		env.MustCreate(t, &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "talos-published-late"},
			Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos}})
		waitEvent(t, ng, corev1.EventTypeNormal, "Scaled", "from 2 to 3")
		waitQuiet(t)
		if n := countEvents(t, ng, nodegroup.ReasonReplicasRestored); n != 0 {
			t.Errorf("%d %s events for the pool's own resize, want 0", n, nodegroup.ReasonReplicasRestored)
		}
	})
}

// renderedPool creates a pool named name in a new tenant namespace and waits until its
// objects are applied and the controller is quiet; it returns the pool as it is then.
func renderedPool(t *testing.T, name string, mutate func(*v1.NodeGroupSpec)) *v1.NodeGroup {
	t.Helper()
	ng := pool(tenant(t), name, mutate)
	env.MustCreate(t, ng)
	got := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, nodegroup.ReasonApplied)
	waitQuiet(t)
	return got
}

// assertForeignMetadata fails unless the MachineDeployment and health check ns/name hold
// the label and annotation another manager added.
func assertForeignMetadata(t *testing.T, ns, name string) {
	t.Helper()
	for _, obj := range []client.Object{&clusterv1.MachineDeployment{}, &clusterv1.MachineHealthCheck{}} {
		mustGet(t, ns, name, obj)
		if obj.GetLabels()["team.example.com/owner"] != "platform" || obj.GetAnnotations()["team.example.com/note"] != "kept" {
			t.Errorf("%T %s lost another manager's metadata: labels %v, annotations %v", obj, name, obj.GetLabels(), obj.GetAnnotations())
		}
	}
}

// machineSet is a MachineSet of pool that uses the two templates, as Cluster API's.
func machineSet(ns, name, pool, bootstrap, infrastructure string) *clusterv1.MachineSet {
	return &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
		names.LabelPool: pool, clusterv1.MachineDeploymentNameLabel: "tenant-" + pool, names.LabelClusterName: "tenant"}},
		Spec: clusterv1.MachineSetSpec{ClusterName: "tenant",
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"x": "y"}}, Spec: clusterv1.MachineSpec{
				ClusterName: "tenant", Version: "v1.35.4",
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "TalosConfigTemplate", Name: bootstrap}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachineTemplate", Name: infrastructure},
			}}}}
}

// templateKind is the kind of the pool's template ns/name.
func templateKind(t *testing.T, ns, name string) string {
	t.Helper()
	for _, gvk := range names.TemplateKinds {
		if getTemplate(ns, gvk.Kind, name) != nil {
			return gvk.Kind
		}
	}
	t.Fatalf("no template %s/%s", ns, name)
	return ""
}

// template reads the template ns/name of kind.
func template(t *testing.T, ns, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := getTemplate(ns, kind, name)
	if u == nil {
		t.Fatalf("%s %s/%s does not exist", kind, ns, name)
	}
	return u
}

// getTemplate is the template ns/name of kind, nil when there is none.
func getTemplate(ns, kind, name string) *unstructured.Unstructured {
	for _, gvk := range names.TemplateKinds {
		if gvk.Kind != kind {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
			return nil
		}
		return u
	}
	return nil
}

// events are the events of the pool with the reason.
func events(t *testing.T, ng *v1.NodeGroup, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ng.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "NodeGroup" && e.Regarding.Name == ng.Name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func countEvents(t *testing.T, ng *v1.NodeGroup, reason string) int {
	t.Helper()
	n := 0
	for _, e := range events(t, ng, reason) {
		n++
		if e.Series != nil {
			n += int(e.Series.Count) - 1 // a series counts every occurrence
		}
	}
	return n
}

// waitEvent waits for an event of the pool of the type and reason whose note says
// what.
func waitEvent(t *testing.T, ng *v1.NodeGroup, typ, reason, what string) {
	t.Helper()
	testenv.Eventually(t, "a "+typ+" "+reason+" event saying "+what, func() bool {
		for _, e := range events(t, ng, reason) {
			if e.Type == typ && strings.Contains(e.Note, what) {
				return true
			}
		}
		return false
	})
}
