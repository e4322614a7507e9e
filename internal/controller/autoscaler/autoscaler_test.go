package autoscaler_test

import (
	"bytes"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	autoscalerctl "github.com/nodegroup-io/nodegroup-operator/internal/controller/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// discovery is the autoscaler's node group discovery for the tenant's Cluster in ns.
func discovery(ns string) string {
	return fmt.Sprintf("--node-group-auto-discovery=clusterapi:namespace=%s,nodegroup.io/tenant-cluster=%s,nodegroup.io/autoscaled=true", ns, cluster)
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
	testenv.Eventually(t, "the Role grants kubevirtmachinetemplates", func() bool {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, role); err != nil {
			return false
		}
		return slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, templateRule.APIGroups) && slices.Equal(r.Resources, templateRule.Resources) && slices.Equal(r.Verbs, templateRule.Verbs)
		})
	})
	return role
}

// TestAutoscaledPoolGetsTheFiveObjects: a Cluster with an autoscaled pool gets its
// ServiceAccount, Role, RoleBinding, kubeconfig Secret and Deployment, controlled by the
// Cluster and labelled as the operator's, and nothing else; the Deployment discovers
// exactly this cluster's pools, runs the catalog's autoscaler for the cluster's minor
// and mounts the copy of the tenant kubeconfig, not <cluster>-kubeconfig; the Role names
// the machine template kind of the pool's MachineDeployment and that MachineDeployment
// alone for its scale. The state is Starting until the Deployment's current template
// has an available replica and no old one runs, then Running, on the pool as well.
func TestAutoscaledPoolGetsTheFiveObjects(t *testing.T) {
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
		if got := obj.GetLabels()[names.LabelManagedBy]; got != names.ManagedByValue {
			t.Errorf("%T label %s = %q", obj, names.LabelManagedBy, got)
		}
	}

	// Exactly these five: no other object of these kinds carries the autoscaler's name
	// label in the namespace, nor, but Secrets (the pool controller makes some), the
	// operator's label.
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &corev1.SecretList{}, &appsv1.DeploymentList{}} {
		want := name
		if _, ok := list.(*corev1.SecretList); ok {
			want = secretName
		}
		for _, sel := range []client.MatchingLabels{{names.LabelManagedBy: names.ManagedByValue}, {autoscaler.LabelName: "cluster-autoscaler"}} {
			if err := env.Client.List(ctx, list, client.InNamespace(ns), sel); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, item := range mustItems(t, list) {
				got = append(got, item.GetName())
			}
			if _, ok := list.(*corev1.SecretList); ok && sel[names.LabelManagedBy] != "" {
				if !slices.Contains(got, want) {
					t.Errorf("%T with %v: %v, want %s among them", list, sel, got, want)
				}
				continue
			}
			if !slices.Equal(got, []string{want}) {
				t.Errorf("%T with %v: %v, want only %s", list, sel, got, want)
			}
		}
	}

	// The Secret holds the tenant kubeconfig as the operator cleans it, and the
	// Deployment mounts it.
	secret := &corev1.Secret{}
	mustGet(t, ns, secretName, secret)
	clean, err := tenant.CleanKubeconfig(validKubeconfig(ns))
	if err != nil {
		t.Fatal(err)
	}
	if secret.Type != corev1.SecretTypeOpaque || len(secret.Data) != 1 || !bytes.Equal(secret.Data[tenant.KubeconfigKey], clean) {
		t.Errorf("Secret %s: type %s, data %q, want %q at %q", secretName, secret.Type, secret.Data, clean, tenant.KubeconfigKey)
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
	if got := mountedSecrets(dep); !slices.Equal(got, []string{secretName}) {
		t.Errorf("Deployment mounts the Secrets %v, want only %s", got, secretName)
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
	if md.Name != names.MachineDeploymentName(cluster, ng.Name) {
		t.Fatalf("the pool's MachineDeployment is %s, not names.MachineDeploymentName's %s", md.Name, names.MachineDeploymentName(cluster, ng.Name))
	}
	if want := autoscaler.Rules([]schema.GroupResource{{Group: "infrastructure.cluster.x-k8s.io", Resource: "kubevirtmachinetemplates"}}, []string{md.Name}); !rulesEqual(role.Rules, want) {
		t.Errorf("Role rules:\n%+v\nwant\n%+v", role.Rules, want)
	}

	// Nothing runs Deployments here: Starting until its status says a replica of the
	// current template is available and no other runs, then Running, on the pool too.
	waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
	waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Fatalf("Deployment replicas %v, want 1", dep.Spec.Replicas)
	}
	for _, rollout := range []struct {
		what string
		st   appsv1.DeploymentStatus
	}{
		{"an old ReplicaSet's Pod is available, none of the current template", appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 0}},
		{"the current template's Pod is up, the old one still runs", appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}},
		{"an older generation is observed", appsv1.DeploymentStatus{ObservedGeneration: -1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}},
		{"the current template's Pod is not available", appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1}},
	} {
		setDeploymentStatus(t, ns, rollout.st)
		reconcile(t, ns)
		if st, _ := status.Autoscaler(key(ns)); st.Reason != autoscalerctl.ReasonStarting {
			t.Errorf("%s: state %s %s, want Starting", rollout.what, st.Status, st.Reason)
		}
	}
	setDeploymentStatus(t, ns, appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1})
	st := waitState(t, ns, metav1.ConditionTrue, autoscalerctl.ReasonRunning)
	if !strings.Contains(st.Message, ctr.Image) {
		t.Errorf("Running message does not name the image: %s", st.Message)
	}
	waitPoolCondition(t, ng, metav1.ConditionTrue, autoscalerctl.ReasonRunning)
}

// setDeploymentStatus writes the status of the tenant's autoscaler Deployment (nothing
// runs Deployments here), at its current generation, but at the one before when
// st.ObservedGeneration is negative.
func setDeploymentStatus(t *testing.T, ns string, st appsv1.DeploymentStatus) {
	t.Helper()
	dep := &appsv1.Deployment{}
	mustGet(t, ns, name, dep)
	observed := dep.Generation
	if st.ObservedGeneration < 0 {
		observed--
	}
	st.ObservedGeneration = observed
	dep.Status = st
	if err := env.Client.Status().Update(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	// The controller reads the Deployment from the manager's cache: a reconcile run
	// next must see this status.
	testenv.Eventually(t, "the cache sees the Deployment's status", func() bool {
		cached := &appsv1.Deployment{}
		return reconciler.Client.Get(context.Background(), client.ObjectKeyFromObject(dep), cached) == nil &&
			cached.ResourceVersion == dep.ResourceVersion
	})
}

// mountedSecrets are the Secrets the Deployment's Pods mount.
func mountedSecrets(dep *appsv1.Deployment) []string {
	var out []string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					out = append(out, s.Secret.Name)
				}
			}
		}
	}
	return out
}

// TestFixedSizePoolsGetNone: a cluster whose pools are all fixed-size gets no
// autoscaler; an autoscaled pool brings it, making that pool fixed removes all five
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
		env.MustCreate(t, foreign)
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
		env.MustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
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
		env.MustCreate(t, foreign)
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
		if objs := liveObjects(t, ns); len(objs) != 5 {
			t.Errorf("objects: %v", kinds(objs))
		}

		// The pool goes: the operator's four are removed, the foreign one stays. The
		// Deployment is looked at first, so once the ServiceAccount is gone it was passed.
		deletePool(t, ng)
		testenv.Eventually(t, "the operator's ServiceAccount, Role, RoleBinding and Secret removed", func() bool {
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
	if len(obj.GetOwnerReferences()) != 0 || obj.GetLabels()[names.LabelManagedBy] != "" {
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
		dep := objs[4].(*appsv1.Deployment)
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
// the Cluster, direct or caused by an event, sends no write: each of the five objects is
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
	if len(rvBefore) != 5 {
		t.Fatalf("objects: %v", rvBefore)
	}
	stats, written := reconciler.Applier.Stats(), writes.Load()

	const resyncs = 5
	for range resyncs {
		reconcile(t, ns)
	}
	after := reconciler.Applier.Stats()
	// Every reconcile ran to the end: a dry run and a skip for each of the five objects.
	if d := after.DryRuns - stats.DryRuns; d < 5*resyncs {
		t.Errorf("%d resyncs made %d dry runs, want at least %d: they did not reach the objects", resyncs, d, 5*resyncs)
	}
	if d := after.Skipped - stats.Skipped; d < 5*resyncs {
		t.Errorf("%d resyncs left %d objects alone, want at least %d", resyncs, d, 5*resyncs)
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
	testenv.Eventually(t, "a reconcile after the Cluster's annotation changed", func() bool {
		return reconciler.Applier.Stats().Skipped-stats.Skipped >= 5
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

// TestKubeconfig: the autoscaler gets the tenant's <cluster>-kubeconfig only as the
// operator cleans it (tenant.CleanKubeconfig), in a Secret of its own. Until the
// kubeconfig exists the state is WaitingForKubeconfig and nothing is made, and its
// creation brings the objects; a kubeconfig the operator refuses (an exec plugin, a
// token file, a proxy, impersonation, basic auth) is InvalidKubeconfig, on the pool
// too, and nothing is made of it; what the operator does not use (other contexts,
// clusters and users, preferences, a namespace) is dropped; a changed kubeconfig is
// copied again, and a deleted copy is put back.
func TestKubeconfig(t *testing.T) {
	t.Run("Missing", func(t *testing.T) {
		ns := newTenantWithout(t)
		ng := newPool(t, ns, "workers", 1, 3)
		st := waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonWaitingKubeconfig)
		if !strings.Contains(st.Message, kubeconfigName) {
			t.Errorf("WaitingForKubeconfig message does not name %s: %s", kubeconfigName, st.Message)
		}
		waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonWaitingKubeconfig)
		waitRendered(t, ng)
		reconcile(t, ns)
		if objs := liveObjects(t, ns); len(objs) != 0 {
			t.Fatalf("without the tenant kubeconfig the controller made %v", kinds(objs))
		}
		// The control-plane provider writes it: its creation is an event.
		setKubeconfig(t, ns, validKubeconfig(ns))
		waitAll(t, ns)
		waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
		waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
		checkCopy(t, ns, validKubeconfig(ns))
	})

	t.Run("Refused", func(t *testing.T) {
		ns := newTenantWithout(t)
		valid := string(validKubeconfig(ns))
		refused := []struct{ what, kubeconfig string }{
			{"tokenFile", string(validKubeconfig(ns, "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"))},
			{"exec", string(validKubeconfig(ns, "exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id], interactiveMode: Never}"))},
			{"client-key (a file)", string(validKubeconfig(ns, "client-certificate: /etc/tls/tls.crt, client-key: /etc/tls/tls.key"))},
			{"as (impersonation)", string(validKubeconfig(ns, "as: system:admin"))},
			{"username and password", string(validKubeconfig(ns, "username: admin, password: secret"))},
			{"proxy-url", strings.Replace(valid, "certificate-authority-data: Y2E=}", `certificate-authority-data: Y2E=, proxy-url: "http://proxy.example.com:3128"}`, 1)},
			{"certificate-authority (a file)", strings.Replace(valid, "certificate-authority-data: Y2E=}", "certificate-authority: /etc/ca.crt}", 1)},
		}
		setKubeconfig(t, ns, []byte(refused[0].kubeconfig))
		ng := newPool(t, ns, "workers", 1, 3)
		waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonInvalidKubeconfig)
		waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonInvalidKubeconfig)
		waitRendered(t, ng)
		for _, r := range refused {
			if !strings.Contains(r.kubeconfig, strings.Fields(strings.TrimSuffix(r.what, " (a file)"))[0]) {
				t.Fatalf("%s: the kubeconfig does not hold it:\n%s", r.what, r.kubeconfig)
			}
			setKubeconfig(t, ns, []byte(r.kubeconfig))
			reconcile(t, ns) // the kubeconfig is read live
			st, _ := status.Autoscaler(key(ns))
			if st.Status != metav1.ConditionFalse || st.Reason != autoscalerctl.ReasonInvalidKubeconfig {
				t.Errorf("%s: state %s %s, want False %s", r.what, st.Status, st.Reason, autoscalerctl.ReasonInvalidKubeconfig)
			} else if !strings.Contains(st.Message, r.what) || !strings.Contains(st.Message, kubeconfigName) {
				t.Errorf("%s: InvalidKubeconfig message does not name it and %s: %s", r.what, kubeconfigName, st.Message)
			}
			if objs := liveObjects(t, ns); len(objs) != 0 {
				t.Fatalf("%s: of a refused kubeconfig the controller made %v", r.what, kinds(objs))
			}
		}
		// Fixed by its writer: a change of the Secret is an event.
		setKubeconfig(t, ns, validKubeconfig(ns))
		waitAll(t, ns)
		waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonStarting)
		checkCopy(t, ns, validKubeconfig(ns))

		// Refused again once the autoscaler runs: the copy is left as it was, never
		// made of the refused kubeconfig.
		setKubeconfig(t, ns, []byte(refused[0].kubeconfig))
		waitState(t, ns, metav1.ConditionFalse, autoscalerctl.ReasonInvalidKubeconfig)
		waitPoolCondition(t, ng, metav1.ConditionFalse, autoscalerctl.ReasonInvalidKubeconfig)
		checkCopy(t, ns, validKubeconfig(ns))
	})

	t.Run("Cleaned", func(t *testing.T) {
		ns := newTenantWithout(t)
		full := []byte(`apiVersion: v1
kind: Config
current-context: admin@tenant
preferences: {colors: true}
clusters:
- name: tenant
  cluster: {server: "https://tenant.` + ns + `.svc:6443", certificate-authority-data: Y2E=, tls-server-name: tenant.example.com}
- name: elsewhere
  cluster: {server: "https://evil.example.com", proxy-url: "http://proxy.example.com:3128"}
contexts:
- name: admin@tenant
  context: {cluster: tenant, user: admin, namespace: kube-system}
- name: other
  context: {cluster: elsewhere, user: thief}
users:
- name: admin
  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}
- name: thief
  user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token, exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}}
`)
		setKubeconfig(t, ns, full)
		newPool(t, ns, "workers", 1, 3)
		waitAll(t, ns)
		copied := checkCopy(t, ns, full)
		for _, dropped := range []string{"evil", "proxy", "thief", "tokenFile", "/bin/sh", "kube-system", "colors", "elsewhere"} {
			if strings.Contains(string(copied), dropped) {
				t.Errorf("the copy keeps %q:\n%s", dropped, copied)
			}
		}
		kc, err := clientcmd.Load(copied)
		if err != nil {
			t.Fatal(err)
		}
		if len(kc.Contexts) != 1 || len(kc.Clusters) != 1 || len(kc.AuthInfos) != 1 {
			t.Errorf("the copy holds %d contexts, %d clusters, %d users, want one each:\n%s", len(kc.Contexts), len(kc.Clusters), len(kc.AuthInfos), copied)
		}
		cur := kc.Contexts[kc.CurrentContext]
		if cur == nil || kc.Clusters[cur.Cluster] == nil || kc.AuthInfos[cur.AuthInfo] == nil {
			t.Fatalf("the copy's current context names no cluster or user:\n%s", copied)
		}
		if c, u := kc.Clusters[cur.Cluster], kc.AuthInfos[cur.AuthInfo]; c.Server != "https://tenant."+ns+".svc:6443" || string(c.CertificateAuthorityData) != "ca" ||
			c.TLSServerName != "tenant.example.com" || string(u.ClientCertificateData) != "cert" || string(u.ClientKeyData) != "key" {
			t.Errorf("the copy's server, CA and credentials are not the kubeconfig's:\n%s", copied)
		}

		// The provider rotates the credentials: the copy follows (the Secret's change is
		// an event).
		rotated := validKubeconfig(ns)
		setKubeconfig(t, ns, rotated)
		want, err := tenant.CleanKubeconfig(rotated)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the copy follows the rotated kubeconfig", func() bool {
			s := &corev1.Secret{}
			return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secretName}, s) == nil &&
				bytes.Equal(s.Data[tenant.KubeconfigKey], want)
		})

		// Someone deletes the copy: it is put back (its deletion is an event).
		s := &corev1.Secret{}
		mustGet(t, ns, secretName, s)
		if err := env.Client.Delete(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the copy put back", func() bool {
			again := &corev1.Secret{}
			return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secretName}, again) == nil &&
				again.UID != s.UID && bytes.Equal(again.Data[tenant.KubeconfigKey], want)
		})
	})
}

// checkCopy holds that the autoscaler's Secret holds the tenant kubeconfig from, as
// tenant.CleanKubeconfig makes it, and returns it.
func checkCopy(t *testing.T, ns string, from []byte) []byte {
	t.Helper()
	want, err := tenant.CleanKubeconfig(from)
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{}
	mustGet(t, ns, secretName, s)
	if got := s.Data[tenant.KubeconfigKey]; !bytes.Equal(got, want) {
		t.Errorf("the autoscaler's kubeconfig:\n%s\nwant\n%s", got, want)
	}
	return s.Data[tenant.KubeconfigKey]
}

// TestControlPlaneUpgrade: the control plane's upgrade to the next minor (the
// KamajiControlPlane's spec.version, watched) rolls the autoscaler onto the catalog's
// release for that minor, with no other event.
func TestControlPlaneUpgrade(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t)
	ng := newPool(t, ns, "workers", 1, 3)
	waitRendered(t, ng)
	waitAll(t, ns)
	image := func() string {
		dep := &appsv1.Deployment{}
		mustGet(t, ns, name, dep)
		return dep.Spec.Template.Spec.Containers[0].Image
	}
	const repo = "registry.k8s.io/autoscaling/cluster-autoscaler:"
	old, ok := catalog.Default().Lookup("v1.35")
	if !ok {
		t.Fatal("the catalog has no v1.35")
	}
	if got := image(); got != repo+old.ClusterAutoscaler {
		t.Fatalf("image %s, want %s", got, repo+old.ClusterAutoscaler)
	}
	next, ok := catalog.Default().Lookup("v1.36")
	if !ok || next.ClusterAutoscaler == "" || next.ClusterAutoscaler == old.ClusterAutoscaler {
		t.Fatalf("the catalog pairs v1.36 with cluster-autoscaler %q (v1.35: %q)", next.ClusterAutoscaler, old.ClusterAutoscaler)
	}
	waitQuiet(t)

	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	mustGet(t, ns, cluster, kcp)
	if v, _, _ := unstructured.NestedString(kcp.Object, "spec", "version"); !strings.HasPrefix(v, "v1.35.") {
		t.Fatalf("the control plane runs %q, want v1.35.x", v)
	}
	patch := client.MergeFrom(kcp.DeepCopy())
	if err := unstructured.SetNestedField(kcp.Object, "v1.36.3", "spec", "version"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, kcp, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the autoscaler runs cluster-autoscaler "+next.ClusterAutoscaler, func() bool { return image() == repo+next.ClusterAutoscaler })
	testenv.Eventually(t, "the state names the new release", func() bool {
		st, _ := status.Autoscaler(key(ns))
		return st.Reason == autoscalerctl.ReasonStarting && strings.Contains(st.Message, repo+next.ClusterAutoscaler)
	})
}
