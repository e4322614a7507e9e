package autoscaler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	autoscalerctl "github.com/nodegroup-io/nodegroup-operator/internal/controller/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
)

// discovery is the autoscaler's node group discovery for the tenant's Cluster in ns.
func discovery(ns string) string {
	return fmt.Sprintf("--node-group-auto-discovery=clusterapi:namespace=%s,clusterName=%s,nodegroup.io/autoscaled=true", ns, cluster)
}

// templateRule is the Role's rule for the machine template kind the pool controller's
// MachineDeployments use (KubevirtMachineTemplate).
var templateRule = rbacv1.PolicyRule{
	APIGroups: []string{"infrastructure.cluster.x-k8s.io"}, Resources: []string{"kubevirtmachinetemplates"}, Verbs: []string{"get", "list", "watch"},
}

// waitTemplateRule waits until the tenant's Role grants the machine templates: the pool's
// MachineDeployment may appear after the Role is first applied.
func waitTemplateRule(t *testing.T, ns string) *rbacv1.Role {
	t.Helper()
	role := &rbacv1.Role{}
	eventually(t, "the Role grants kubevirtmachinetemplates", func() bool {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, role); err != nil {
			return false
		}
		return slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, templateRule.APIGroups) && slices.Equal(r.Resources, templateRule.Resources) && slices.Equal(r.Verbs, templateRule.Verbs)
		})
	})
	return role
}

// TestAutoscaledPoolGetsTheFourObjects: a Cluster with an autoscaled pool gets its
// ServiceAccount, Role, RoleBinding and Deployment, controlled by the Cluster and
// labelled as the operator's, and nothing else; the Deployment discovers exactly this
// cluster's pools and runs the catalog's autoscaler for the cluster's minor; the Role
// names the machine template kind of the pool's MachineDeployment. The state is Starting
// until the Deployment has an available replica, then Running, on the pool as well.
func TestAutoscaledPoolGetsTheFourObjects(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t)
	ng := newPool(t, ns, "workers", 0, 5)
	rendered := waitRendered(t, ng)
	objs := waitAll(t, ns)

	c := &clusterv1.Cluster{}
	mustGet(t, ns, cluster, c)
	for _, obj := range objs {
		if !metav1.IsControlledBy(obj, c) {
			t.Errorf("%T is not controlled by the Cluster: %v", obj, obj.GetOwnerReferences())
		} else if ref := metav1.GetControllerOf(obj); ref.Kind != "Cluster" || ref.APIVersion != clusterv1.GroupVersion.String() {
			t.Errorf("%T controller reference: %+v", obj, ref)
		}
		if got := obj.GetLabels()[render.LabelManagedBy]; got != render.ManagedByValue {
			t.Errorf("%T label %s = %q", obj, render.LabelManagedBy, got)
		}
	}

	// Exactly these four: no other object of these kinds carries the operator's label
	// or the autoscaler's name label in the namespace.
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &appsv1.DeploymentList{}} {
		for _, sel := range []client.MatchingLabels{{render.LabelManagedBy: render.ManagedByValue}, {autoscaler.LabelName: "cluster-autoscaler"}} {
			if err := env.Client.List(ctx, list, client.InNamespace(ns), sel); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, item := range mustItems(t, list) {
				names = append(names, item.GetName())
			}
			if !slices.Equal(names, []string{name}) {
				t.Errorf("%T with %v: %v, want only %s", list, sel, names, name)
			}
		}
	}

	binding := &rbacv1.RoleBinding{}
	mustGet(t, ns, name, binding)
	if binding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}) {
		t.Errorf("RoleBinding roleRef: %+v", binding.RoleRef)
	}
	if want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}; !slices.Equal(binding.Subjects, want) {
		t.Errorf("RoleBinding subjects: %+v, want %+v", binding.Subjects, want)
	}

	dep := &appsv1.Deployment{}
	mustGet(t, ns, name, dep)
	if dep.Spec.Template.Spec.ServiceAccountName != name {
		t.Errorf("Deployment runs as %q, want %s", dep.Spec.Template.Spec.ServiceAccountName, name)
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment containers: %d", len(dep.Spec.Template.Spec.Containers))
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	if !slices.Contains(ctr.Args, discovery(ns)) {
		t.Errorf("Deployment args lack %s: %v", discovery(ns), ctr.Args)
	}
	rel, ok := catalog.Default().Lookup("v1.35")
	if !ok || rel.ClusterAutoscaler == "" {
		t.Fatal("the catalog has no cluster-autoscaler for v1.35")
	}
	if want := "registry.k8s.io/autoscaling/cluster-autoscaler:" + rel.ClusterAutoscaler; ctr.Image != want {
		t.Errorf("image %s, want %s (the catalog's for the control plane's v1.35.4)", ctr.Image, want)
	}
	if !strings.HasPrefix(rel.ClusterAutoscaler, "v1.35.") {
		t.Errorf("the catalog pairs v1.35 with cluster-autoscaler %s", rel.ClusterAutoscaler)
	}

	// The Role names the template kind of the MachineDeployment the pool controller made.
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, rendered.Status.MachineDeploymentName, md)
	if ref := md.Spec.Template.Spec.InfrastructureRef; ref.APIGroup != "infrastructure.cluster.x-k8s.io" || ref.Kind != "KubevirtMachineTemplate" {
		t.Fatalf("the pool's MachineDeployment names %s %s", ref.APIGroup, ref.Kind)
	}
	role := waitTemplateRule(t, ns)
	if want := autoscaler.Rules([]schema.GroupResource{{Group: "infrastructure.cluster.x-k8s.io", Resource: "kubevirtmachinetemplates"}}); !rulesEqual(role.Rules, want) {
		t.Errorf("Role rules:\n%+v\nwant\n%+v", role.Rules, want)
	}

	// Nothing runs Deployments here: Starting until its status says a replica is
	// available, then Running, on the pool too.
	waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
	waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
	mustGet(t, ns, name, dep)
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	if err := env.Client.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, ns, metav1.ConditionTrue, autoscalerctl.ReasonRunning)
	if !strings.Contains(st.Message, ctr.Image) {
		t.Errorf("Running message does not name the image: %s", st.Message)
	}
	waitPoolCondition(t, ng, metav1.ConditionTrue, autoscalerctl.ReasonRunning)
}

// TestFixedSizePoolsGetNone: a cluster whose pools are all fixed-size gets no
// autoscaler; an autoscaled pool brings it, making that pool fixed removes all four
// objects, and deleting the last autoscaled pool removes them too.
func TestFixedSizePoolsGetNone(t *testing.T) {
	ns := newTenant(t)
	fixed := newPool(t, ns, "fixed", 2, 2)
	waitRendered(t, fixed)
	reconcile(t, ns) // the MachineDeployment's creation reconciled the Cluster too; this one surely ran
	if objs := liveObjects(t, ns); len(objs) != 0 {
		t.Fatalf("a cluster of fixed-size pools got %v", kinds(objs))
	}
	if st, ok := status.Autoscaler(key(ns)); ok {
		t.Errorf("a cluster of fixed-size pools has an autoscaler state: %+v", st)
	}

	scaled := newPool(t, ns, "scaled", 1, 3)
	waitAll(t, ns)
	waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonStarting)

	resize(t, scaled, 3, 3)
	waitNone(t, ns)
	waitNoState(t, ns)

	resize(t, scaled, 1, 4)
	waitAll(t, ns)
	waitPoolCondition(t, scaled, metav1.ConditionFalse, autoscalerctl.ReasonStarting)

	deletePool(t, scaled)
	waitNone(t, ns)
	waitNoState(t, ns)
	// The fixed pool is left alone, and never carried the condition.
	got := waitRendered(t, fixed)
	for _, c := range got.Status.Conditions {
		if c.Type == "AutoscalerReady" {
			t.Errorf("fixed-size pool carries %s=%s", c.Type, c.Status)
		}
	}
}

// TestManagedElsewhere: the Cluster's annotation nodegroup.io/managed-autoscaler=false
// removes the objects and reports ManagedElsewhere (True), on the pool too; removing the
// annotation brings them back.
func TestManagedElsewhere(t *testing.T) {
	ns := newTenant(t)
	ng := newPool(t, ns, "workers", 1, 3)
	waitAll(t, ns)

	patchCluster(t, ns, func(c *clusterv1.Cluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[autoscalerctl.AnnotationManaged] = "false"
	})
	waitNone(t, ns)
	st := waitState(t, ns, metav1.ConditionTrue, autoscalerctl.ReasonManagedElsewhere)
	if !strings.Contains(st.Message, autoscalerctl.AnnotationManaged) {
		t.Errorf("ManagedElsewhere message does not name the annotation: %s", st.Message)
	}
	waitPoolCondition(t, ng, metav1.ConditionTrue, autoscalerctl.ReasonManagedElsewhere)
	reconcile(t, ns)
	if objs := liveObjects(t, ns); len(objs) != 0 {
		t.Fatalf("a resync with the annotation made %v", kinds(objs))
	}

	patchCluster(t, ns, func(c *clusterv1.Cluster) { delete(c.Annotations, autoscalerctl.AnnotationManaged) })
	waitAll(t, ns)
	waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
	waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
}

// TestForeignObjectsAreNeverTouched: a ServiceAccount or a Deployment <cluster>-autoscaler
// that the operator did not make (no managed-by label) is reported as a Conflict that
// names it, and is never modified, adopted or deleted, also not once the cluster's last
// autoscaled pool goes.
func TestForeignObjectsAreNeverTouched(t *testing.T) {
	t.Run("ServiceAccount", func(t *testing.T) {
		ns := newTenant(t)
		foreign := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "platform"}}}
		mustCreate(t, foreign)
		before := identityOf(foreign)

		ng := newPool(t, ns, "workers", 1, 3)
		st := waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonConflict)
		if want := "ServiceAccount " + ns + "/" + name; !strings.Contains(st.Message, want) {
			t.Errorf("Conflict message does not name %s: %s", want, st.Message)
		}
		waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonConflict)
		waitRendered(t, ng)
		// Its deletion is no event (it is not cached): the controller looks again.
		res, err := reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: key(ns)})
		if err != nil || res.RequeueAfter <= 0 {
			t.Errorf("a Conflict is not looked at again: %+v, %v", res, err)
		}
		checkUntouched(t, ns, &corev1.ServiceAccount{}, before)
		// The autoscaler would run under someone else's ServiceAccount: nothing is made.
		if objs := liveObjects(t, ns); len(objs) != 1 {
			t.Errorf("beside a foreign ServiceAccount the controller made %v", kinds(objs))
		}

		deletePool(t, ng)
		waitNoState(t, ns)
		reconcile(t, ns)
		checkUntouched(t, ns, &corev1.ServiceAccount{}, before)
	})

	t.Run("DeletedByItsOwner", func(t *testing.T) {
		// The Conflict message says to delete it; once it is gone, the next look (the
		// requeue above, run here directly) makes the autoscaler.
		ns := newTenant(t)
		mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		ng := newPool(t, ns, "workers", 1, 3)
		waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonConflict)
		if err := env.Client.Delete(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		reconcile(t, ns)
		waitAll(t, ns)
		waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
		waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
	})

	t.Run("Deployment", func(t *testing.T) {
		ns := newTenant(t)
		labels := map[string]string{"app": "their-autoscaler"}
		foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "ca", Image: "example.org/their/cluster-autoscaler:v1"}},
			}},
		}}
		mustCreate(t, foreign)
		before := identityOf(foreign)

		ng := newPool(t, ns, "workers", 1, 3)
		st := waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonConflict)
		if want := "Deployment " + ns + "/" + name; !strings.Contains(st.Message, want) {
			t.Errorf("Conflict message does not name %s: %s", want, st.Message)
		}
		waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonConflict)
		waitRendered(t, ng)
		reconcile(t, ns)
		checkUntouched(t, ns, &appsv1.Deployment{}, before)
		if objs := liveObjects(t, ns); len(objs) != 4 {
			t.Errorf("objects: %v", kinds(objs))
		}

		// The pool goes: the operator's three are removed, the foreign one stays. The
		// Deployment is looked at first, so once the ServiceAccount is gone it was passed.
		deletePool(t, ng)
		eventually(t, "the operator's ServiceAccount, Role and RoleBinding removed", func() bool {
			objs := liveObjects(t, ns)
			return len(objs) == 1 && kinds(objs)[0] == "*v1.Deployment"
		})
		reconcile(t, ns)
		checkUntouched(t, ns, &appsv1.Deployment{}, before)
	})
}

// checkUntouched holds that the object <cluster>-autoscaler of obj's kind is the one
// that was created, unmodified, and neither labelled nor owned by the operator.
func checkUntouched(t *testing.T, ns string, obj client.Object, want identity) {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			t.Fatalf("the foreign %T was deleted", obj)
		}
		t.Fatal(err)
	}
	if got := identityOf(obj); got != want {
		t.Errorf("the foreign %T changed: %+v, was %+v", obj, got, want)
	}
	if len(obj.GetOwnerReferences()) != 0 || obj.GetLabels()[render.LabelManagedBy] != "" {
		t.Errorf("the foreign %T was adopted: owners %v, labels %v", obj, obj.GetOwnerReferences(), obj.GetLabels())
	}
}

// TestTwoTenants: two clusters in two namespaces each get their own objects, which
// discover only their own cluster's pools, and neither Role grants anything in the
// other's namespace.
func TestTwoTenants(t *testing.T) {
	a, b := newTenant(t), newTenant(t)
	newPool(t, a, "workers", 1, 3)
	newPool(t, b, "workers", 0, 2)
	for _, ns := range []string{a, b} {
		objs := waitAll(t, ns)
		c := &clusterv1.Cluster{}
		mustGet(t, ns, cluster, c)
		for _, obj := range objs {
			if obj.GetNamespace() != ns || !metav1.IsControlledBy(obj, c) {
				t.Errorf("%T %s/%s is not its own cluster's", obj, obj.GetNamespace(), obj.GetName())
			}
		}
		dep := objs[3].(*appsv1.Deployment)
		if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, discovery(ns)) {
			t.Errorf("%s: args lack %s: %v", ns, discovery(ns), args)
		}
		binding := objs[2].(*rbacv1.RoleBinding)
		if len(binding.Subjects) != 1 || binding.Subjects[0].Namespace != ns {
			t.Errorf("%s: RoleBinding subjects %+v", ns, binding.Subjects)
		}
		waitTemplateRule(t, ns)
	}
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		own, other := pair[0], pair[1]
		for _, p := range needed {
			if allowed, reason := canI(t, own, other, p); allowed {
				t.Errorf("the autoscaler of %s may %s in %s: %s", own, p, other, reason)
			}
		}
	}
}

// TestSteadyStateWritesNothing: once a cluster's autoscaler is in place, a reconcile of
// the Cluster, direct or caused by an event, sends no write: each of the four objects is
// compared by a dry run and left alone, and no resourceVersion moves.
func TestSteadyStateWritesNothing(t *testing.T) {
	ns := newTenant(t)
	ng := newPool(t, ns, "workers", 1, 3)
	waitRendered(t, ng)
	waitAll(t, ns)
	waitTemplateRule(t, ns)
	waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
	waitQuiet(t)

	versions := func() map[string]identity {
		out := map[string]identity{}
		for _, obj := range liveObjects(t, ns) {
			out[fmt.Sprintf("%T", obj)] = identityOf(obj)
		}
		return out
	}
	rvBefore := versions()
	if len(rvBefore) != 4 {
		t.Fatalf("objects: %v", rvBefore)
	}
	stats, written := reconciler.Applier.Stats(), writes.Load()

	const resyncs = 5
	for range resyncs {
		reconcile(t, ns)
	}
	after := reconciler.Applier.Stats()
	// Every reconcile ran to the end: a dry run and a skip for each of the four objects.
	if d := after.DryRuns - stats.DryRuns; d < 4*resyncs {
		t.Errorf("%d resyncs made %d dry runs, want at least %d: they did not reach the objects", resyncs, d, 4*resyncs)
	}
	if d := after.Skipped - stats.Skipped; d < 4*resyncs {
		t.Errorf("%d resyncs left %d objects alone, want at least %d", resyncs, d, 4*resyncs)
	}
	if d := after.Applies - stats.Applies; d != 0 {
		t.Errorf("%d steady-state resyncs sent %d applies, want 0", resyncs, d)
	}
	if n := writes.Load() - written; n != 0 {
		t.Errorf("%d steady-state resyncs sent %d writes, want 0", resyncs, n)
	}

	// An event: an annotation of no meaning to the controller brings the Cluster back
	// (the controller watches annotation changes), and that reconcile writes nothing
	// either.
	stats = after
	patchCluster(t, ns, func(c *clusterv1.Cluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations["example.org/touched"] = "yes"
	})
	eventually(t, "a reconcile after the Cluster's annotation changed", func() bool {
		return reconciler.Applier.Stats().Skipped-stats.Skipped >= 4
	})
	waitQuiet(t)
	after = reconciler.Applier.Stats()
	if d := after.Applies - stats.Applies; d != 0 {
		t.Errorf("the reconcile after an unrelated change sent %d applies, want 0", d)
	}
	if rvAfter := versions(); !equality.Semantic.DeepEqual(rvAfter, rvBefore) {
		t.Errorf("steady state moved objects:\n%v\nwas\n%v", rvAfter, rvBefore)
	}
}
