package nodegroup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/rulecases"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

const timeout = testenv.Timeout

var tenantSeq int

// tenant creates a namespace with everything a Talos pool needs (testenv.CreateTenant).
func tenant(t *testing.T) string {
	t.Helper()
	tenantSeq++
	ns := fmt.Sprintf("tenant-%d", tenantSeq)
	if err := testenv.CreateTenant(context.Background(), env.Client, ns, testenv.TenantOptions{Labels: map[string]string{"tenant": "true"}, TalosSecret: true}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func talosSecret(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	s, err := testenv.TalosSecret(ns)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pool(ns, name string, mutate func(*v1.NodeGroupSpec)) *v1.NodeGroup {
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
		ClusterName: "tenant", NodeGroupClassName: "talos", LocationName: v1.BuiltinLocation, MinReplicas: 1, MaxReplicas: 3,
		Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
	}}
	if mutate != nil {
		mutate(&ng.Spec)
	}
	return ng
}

// waitCondition waits until the pool's condition has the status and reason.
func waitCondition(t *testing.T, ng *v1.NodeGroup, typ string, status metav1.ConditionStatus, reason string) *v1.NodeGroup {
	t.Helper()
	got := &v1.NodeGroup{}
	var last string
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ng), got); err == nil {
			if c := meta.FindStatusCondition(got.Status.Conditions, typ); c != nil {
				last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
				if c.Status == status && c.Reason == reason && c.ObservedGeneration == got.Generation {
					return got
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pool %s: condition %s never became %s/%s (last: %s)", ng.Name, typ, status, reason, last)
	return nil
}

func TestPoolRendersAndSettles(t *testing.T) {
	ns := tenant(t)
	ng := pool(ns, "workers", func(s *v1.NodeGroupSpec) { s.Roles = []string{"worker"} })
	env.MustCreate(t, ng)
	got := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")

	if got.Status.OS != v1.OSTalos || got.Status.KubernetesVersion != "v1.35.4" || got.Status.MachineDeploymentName != "tenant-workers" {
		t.Fatalf("status: os=%s version=%s md=%s", got.Status.OS, got.Status.KubernetesVersion, got.Status.MachineDeploymentName)
	}
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, "tenant-workers", md)
	if md.Spec.Replicas != nil {
		t.Errorf("spec.replicas = %d: the operator must leave it to Cluster API and the autoscaler", *md.Spec.Replicas)
	}
	if md.Annotations[names.AnnotationMinSize] != "1" || md.Annotations[names.AnnotationMaxSize] != "3" {
		t.Errorf("autoscaler annotations: %v", md.Annotations)
	}
	if md.Spec.Template.Labels["node-role.kubernetes.io/worker"] != "" || md.Spec.Template.Labels[names.NodeLabelPool] != "workers" {
		t.Errorf("machine labels: %v", md.Spec.Template.Labels)
	}
	if !metav1.IsControlledBy(md, got) {
		t.Errorf("MachineDeployment is not controlled by the pool: %v", md.OwnerReferences)
	}
	mustGet(t, ns, got.Status.BootstrapTemplateName, &talos.TalosConfigTemplate{})
	mustGet(t, ns, got.Status.InfrastructureTemplateName, &capk.KubevirtMachineTemplate{})
	mustGet(t, ns, "tenant-workers", &clusterv1.MachineHealthCheck{})

	// Steady state: once the event-driven reconciles of the create are done, ten forced
	// resyncs send no write at all.
	assertSteady(t, ng)
}

func TestReplicasOfAnotherManagerSurvive(t *testing.T) {
	ns := tenant(t)
	ng := pool(ns, "scaled", nil)
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")

	autoscale(t, ns, "tenant-scaled", 2)
	md := &clusterv1.MachineDeployment{}
	// Touch the pool so every reconcile applies a changed MachineDeployment.
	for i := range 10 {
		mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.MaxReplicas = int32(3 + i) })
		waitGeneration(t, ng)
	}
	mustGet(t, ns, "tenant-scaled", md)
	if md.Spec.Replicas == nil || *md.Spec.Replicas != 2 {
		t.Fatalf("replicas after ten reconciles = %v, want 2 (set by the autoscaler)", md.Spec.Replicas)
	}
	if md.Annotations[names.AnnotationMaxSize] != "12" {
		t.Fatalf("max-size annotation = %q, want 12", md.Annotations[names.AnnotationMaxSize])
	}
}

func TestTemplateRotation(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t)
	ng := pool(ns, "rotating", nil)
	env.MustCreate(t, ng)
	first := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
	oldInfra := first.Status.InfrastructureTemplateName

	// A MachineSet still uses the old machine template, as Cluster API's would mid-rollout.
	ms := machineSet(ns, "tenant-rotating-old", "rotating", first.Status.BootstrapTemplateName, oldInfra)
	env.MustCreate(t, ms)

	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.Resources.Memory = resource.MustParse("8Gi") })
	second := waitGeneration(t, ng)
	if second.Status.InfrastructureTemplateName == oldInfra {
		t.Fatalf("a new size kept the machine template %s", oldInfra)
	}
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, "tenant-rotating", md)
	if md.Spec.Template.Spec.InfrastructureRef.Name != second.Status.InfrastructureTemplateName {
		t.Fatalf("MachineDeployment points at %s, want %s", md.Spec.Template.Spec.InfrastructureRef.Name, second.Status.InfrastructureTemplateName)
	}
	mustGet(t, ns, oldInfra, &capk.KubevirtMachineTemplate{}) // still used by the MachineSet

	if err := env.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "old machine template deleted once no MachineSet uses it", func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: oldInfra}, &capk.KubevirtMachineTemplate{})
		return apierrors.IsNotFound(err)
	})
	mustGet(t, ns, second.Status.InfrastructureTemplateName, &capk.KubevirtMachineTemplate{})
}

func TestErrorConditions(t *testing.T) {
	ns := tenant(t)
	env.MustCreate(t, &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: "restricted"}, Spec: v1.LocationSpec{
		Provider:          v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
		AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}},
	}})
	pve := rulecases.ProxmoxLocation("pve-errors", nil)
	pve.Spec.AllowedNamespaces = &metav1.LabelSelector{}
	env.MustCreate(t, pve)
	nsNoSecret := tenant(t)
	if err := env.Client.Delete(context.Background(), talosSecret(t, nsNoSecret)); err != nil {
		t.Fatal(err)
	}
	// A Proxmox location another tenant cluster's satellite is on, as the satellite
	// controller makes it.
	taken := rulecases.ProxmoxLocation("pve-taken", nil)
	taken.Spec.AllowedNamespaces = &metav1.LabelSelector{}
	env.MustCreate(t, taken)
	nsOther := tenant(t)
	other := &clusterv1.Cluster{}
	mustGet(t, nsOther, testenv.TenantCluster, other)
	sat := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: nsOther, Name: names.SatelliteName(other.Name, taken.Name),
		Labels:          render.SatelliteLabels(&render.SatelliteInput{Cluster: render.Cluster{Name: other.Name}, LocationName: taken.Name}),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(other, clusterv1.GroupVersion.WithKind("Cluster"))}},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "k8s.lab.example.com", Port: 443}}}
	env.MustCreate(t, sat)
	cases := []struct {
		name, ns   string
		mutate     func(*v1.NodeGroupSpec)
		condition  string
		reason     string
		msgContain string
	}{
		{"unknown class", ns, func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = "nope" }, v1.ConditionClassResolved, resolve.ReasonClassNotFound, `NodeGroupClass "nope" does not exist`},
		{"unknown location", ns, func(s *v1.NodeGroupSpec) { s.LocationName = "nowhere" }, v1.ConditionLocationResolved, resolve.ReasonLocationNotFound, `Location "nowhere" does not exist`},
		{"location not allowed", ns, func(s *v1.NodeGroupSpec) { s.LocationName = "restricted" }, v1.ConditionLocationResolved, nodegroup.ReasonLocationNotAllowed, `does not admit the pool's namespace (its spec.allowedNamespaces): ask the platform for access, or set spec.locationName to a location that admits it (location "restricted", namespace "` + ns + `")`},
		{"cluster not found", ns, func(s *v1.NodeGroupSpec) { s.ClusterName = "other" }, v1.ConditionClusterFound, resolve.ReasonClusterNotFound, `Cluster "other" does not exist in namespace`},
		{"talos secrets missing", nsNoSecret, nil, v1.ConditionRendered, resolve.ReasonTalosSecretsMissing, "with the cluster's Talos join identity does not exist yet"},
		{"ahead of control plane", ns, func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.36" }, v1.ConditionRendered, nodegroup.ReasonVersionAhead, "is ahead of the control plane's: workers must not be newer than their API server; lower spec.kubernetesVersion or pick a class built for the control plane's minor, or upgrade the control plane first (pool v1.36.3, control plane v1.35.4)"},
		{"instancetype not served", ns, func(s *v1.NodeGroupSpec) { s.Resources, s.InstanceType = nil, "u1.large" }, v1.ConditionRendered, resolve.ReasonInstanceTypeNotFound, `spec.instanceType "u1.large": KubeVirt instancetypes are not served`},
		{"kairos on a proxmox location", ns, func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.LocationName, s.EphemeralStorage = "kairos", "pve-errors", resource.MustParse("20Gi")
		}, v1.ConditionRendered, nodegroup.ReasonRenderFailed, "Proxmox locations run Talos pools only"},
		{"proxmox location of another tenant cluster", ns, func(s *v1.NodeGroupSpec) {
			s.LocationName, s.EphemeralStorage = "pve-taken", resource.MustParse("20Gi")
		}, v1.ConditionLocationResolved, resolve.ReasonLocationInUse, `Location "pve-taken" already serves another tenant cluster`},
		{"no disk for the minor", ns, func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = "kairos" }, v1.ConditionRendered, resolve.ReasonImageNotAvailable, "no Kairos worker disk is published for Kubernetes v1.35"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ng := pool(tc.ns, fmt.Sprintf("bad-%d", i), tc.mutate)
			env.MustCreate(t, ng)
			got := waitCondition(t, ng, tc.condition, metav1.ConditionFalse, tc.reason)
			if c := meta.FindStatusCondition(got.Status.Conditions, tc.condition); !strings.Contains(c.Message, tc.msgContain) {
				t.Errorf("message %q does not say %q", c.Message, tc.msgContain)
			}
			if r := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse || r.Reason != tc.reason {
				t.Errorf("Ready = %v, want False (%s)", r, tc.reason)
			}
			var mds clusterv1.MachineDeploymentList
			if err := env.Client.List(context.Background(), &mds, client.InNamespace(tc.ns), client.MatchingLabels{names.LabelPool: ng.Name}); err != nil || len(mds.Items) != 0 {
				t.Errorf("a pool in error has MachineDeployments: %d (%v)", len(mds.Items), err)
			}
		})
	}
}

func TestDeletionOrder(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t)
	ng := pool(ns, "doomed", nil)
	env.MustCreate(t, ng)
	got := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")

	// Hold the MachineDeployment with a finalizer, as Cluster API does while it drains.
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, "tenant-doomed", md)
	hold := client.MergeFrom(md.DeepCopy())
	md.Finalizers = append(md.Finalizers, "test.nodegroup.io/draining")
	if err := env.Client.Patch(ctx, md, hold); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "MachineDeployment marked for deletion", func() bool {
		mustGet(t, ns, "tenant-doomed", md)
		return !md.DeletionTimestamp.IsZero()
	})
	// While the machines drain, the templates they boot from stay.
	time.Sleep(time.Second)
	mustGet(t, ns, got.Status.BootstrapTemplateName, &talos.TalosConfigTemplate{})
	mustGet(t, ns, got.Status.InfrastructureTemplateName, &capk.KubevirtMachineTemplate{})

	release := client.MergeFrom(md.DeepCopy())
	md.Finalizers = nil
	if err := env.Client.Patch(ctx, md, release); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "templates and pool gone after the MachineDeployment", func() bool {
		errA := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: got.Status.BootstrapTemplateName}, &talos.TalosConfigTemplate{})
		errB := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: got.Status.InfrastructureTemplateName}, &capk.KubevirtMachineTemplate{})
		errC := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1.NodeGroup{})
		return apierrors.IsNotFound(errA) && apierrors.IsNotFound(errB) && apierrors.IsNotFound(errC)
	})
	// What the operator did not create is untouched.
	mustGet(t, ns, "tenant", &clusterv1.Cluster{})
	mustGet(t, ns, "tenant"+resolve.TalosSecretSuffix, &corev1.Secret{})
}

// TestSteadyStateOfFiftyPools measures the writes of a full resync of 50 settled pools.
func TestSteadyStateOfFiftyPools(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t)
	var pools []*v1.NodeGroup
	for i := range 50 {
		ng := pool(ns, fmt.Sprintf("p%02d", i), nil)
		env.MustCreate(t, ng)
		pools = append(pools, ng)
	}
	for _, ng := range pools {
		waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
	}
	waitQuiet(t) // let the watch events of the creates drain
	before := writes.Load()
	for _, ng := range pools {
		if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ng)}); err != nil {
			t.Fatal(err)
		}
	}
	n := writes.Load() - before
	t.Logf("writes for a steady-state resync of 50 pools: %d", n)
	if n != 0 {
		t.Errorf("a steady-state resync of 50 pools sent %d writes, want 0", n)
	}
}

// TestUncheckedConditionsKeepTheirGeneration: a pool whose new class does not exist is
// not checked further; its location and cluster keep what they said, for the generation
// they said it for, and Ready follows the class.
func TestUncheckedConditionsKeepTheirGeneration(t *testing.T) {
	ns := tenant(t)
	ng := pool(ns, "reclassed", nil)
	env.MustCreate(t, ng)
	first := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")

	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.NodeGroupClassName = "nope" })
	got := waitCondition(t, ng, v1.ConditionClassResolved, metav1.ConditionFalse, resolve.ReasonClassNotFound)
	for _, typ := range []string{v1.ConditionLocationResolved, v1.ConditionClusterFound} {
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != first.Generation {
			t.Errorf("%s = %+v, want True for generation %d, when it was last checked", typ, c, first.Generation)
		}
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionRendered); c == nil || c.Reason != nodegroup.ReasonWaiting || c.ObservedGeneration != got.Generation {
		t.Errorf("Rendered = %+v, want False (%s) for generation %d", c, nodegroup.ReasonWaiting, got.Generation)
	}
	r := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady)
	if r == nil || r.Status != metav1.ConditionFalse || r.Reason != resolve.ReasonClassNotFound || r.ObservedGeneration != got.Generation {
		t.Errorf("Ready = %+v, want False (%s) for generation %d", r, resolve.ReasonClassNotFound, got.Generation)
	}
}

// TestStatusConflictOverwritesNothing: a status computed from a pool read before a
// change is refused, not written over the change; the reconcile runs again.
func TestStatusConflictOverwritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t)
	ng := pool(ns, "raced", nil)
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
	waitQuiet(t)

	stale := &v1.NodeGroup{}
	mustGet(t, ns, ng.Name, stale)
	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Labels = map[string]string{"changed": "meanwhile"} })
	err := reconciler.WriteStatusClassMissing(ctx, stale, stale.DeepCopy())
	if !apierrors.IsConflict(err) {
		t.Fatalf("a status computed from a stale read: %v, want a conflict", err)
	}
	got := &v1.NodeGroup{}
	mustGet(t, ns, ng.Name, got)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionClassResolved) {
		t.Errorf("the stale status was written: %+v", meta.FindStatusCondition(got.Status.Conditions, v1.ConditionClassResolved))
	}

	// Read afresh, the same status goes through, as a patch of the status alone.
	fresh := got.DeepCopy()
	if err := reconciler.WriteStatusClassMissing(ctx, got, fresh); err != nil {
		t.Fatal(err)
	}
	mustGet(t, ns, ng.Name, got)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionClassResolved); c == nil || c.Reason != "ClassNotFound" {
		t.Errorf("ClassResolved = %+v after a write on a fresh read, want ClassNotFound", c)
	}
	if got.Labels["changed"] != "meanwhile" {
		t.Errorf("labels = %v: the status write changed the pool's metadata", got.Labels)
	}
}

// TestStatusConflictRequeuesQuietly: a reconcile whose status write meets a newer
// version of the pool has not failed: it returns no error (no error log, no backoff),
// counts no failed reconcile but a conflict, and comes back soon; the next reconcile
// writes the status.
func TestStatusConflictRequeuesQuietly(t *testing.T) {
	ctx := context.Background()
	count := counters(t)
	ng, cur := staleStatus(t, "bumped")
	ns := ng.Namespace
	// Between the reconcile's read of the pool and its status write, another writer
	// changes the pool.
	direct := directClient(t)
	raced := false
	r := reconciler.WithClient(interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if sub == "status" && !raced {
				raced = true
				mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Annotations = map[string]string{"touched": "meanwhile"} })
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}))
	conflicts, failures := count("status_conflicts_total"), count("reconcile_errors_total")

	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ng)}
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("a reconcile whose status met a newer pool: %v, want no error", err)
	}
	if !raced {
		t.Fatal("the reconcile wrote no status")
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Second {
		t.Errorf("result %+v, want a requeue within seconds", res)
	}
	if got := count("status_conflicts_total") - conflicts; got != 1 {
		t.Errorf("status conflicts counted: %v, want 1", got)
	}
	if got := count("reconcile_errors_total") - failures; got != 0 {
		t.Errorf("failed reconciles counted: %v, want 0", got)
	}
	mustGet(t, ns, ng.Name, cur)
	if cur.Status.Summary != "Stale" {
		t.Fatalf("summary %q: the status was written over the newer pool", cur.Status.Summary)
	}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	mustGet(t, ns, ng.Name, cur)
	if cur.Status.Summary == "Stale" {
		t.Errorf("the reconcile after the conflict left the status as it was")
	}
}

// TestStaleCopyWaitsForOwnWrite: a reconcile that reads a copy of the pool older than
// the operator's own last status write of it (the cache has not caught up) sends
// nothing, counts a wait and no conflict, and comes back within the wait's bounds; on a
// copy that holds the write it goes on as usual.
func TestStaleCopyWaitsForOwnWrite(t *testing.T) {
	ctx := context.Background()
	count := counters(t)
	// The copy with a status the reconcile corrects is the one a lagging cache holds
	// after the reconcile's own write.
	ng, stale := staleStatus(t, "lagging")
	direct := directClient(t)
	lagging, statusWrites, lagWrites := false, 0, 0
	wrote := func() {
		if lagging {
			lagWrites++
		}
	}
	r := reconciler.WithClient(interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			wrote()
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			wrote()
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			wrote()
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			wrote()
			return c.Delete(ctx, obj, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			wrote()
			return c.Apply(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if p, ok := obj.(*v1.NodeGroup); ok && lagging && key == client.ObjectKeyFromObject(stale) {
				stale.DeepCopyInto(p)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			wrote()
			if sub == "status" {
				statusWrites++
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}))
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ng)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if statusWrites != 1 {
		t.Fatalf("status writes of the reconcile on a fresh copy: %d, want 1", statusWrites)
	}

	waits, conflicts := count("cache_lag_waits_total"), count("status_conflicts_total")
	lagging = true
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("a reconcile on a copy older than its own write: %v, want no error", err)
	}
	if res.RequeueAfter < 100*time.Millisecond || res.RequeueAfter > 5*time.Second {
		t.Errorf("result %+v, want a requeue within 0.1 to 5 s", res)
	}
	if lagWrites != 0 {
		t.Errorf("writes on the copy older than the operator's own write: %d, want none", lagWrites)
	}
	if got := count("cache_lag_waits_total") - waits; got != 1 {
		t.Errorf("waits counted: %v, want 1", got)
	}
	if got := count("status_conflicts_total") - conflicts; got != 0 {
		t.Errorf("conflicts counted: %v, want 0", got)
	}

	lagging = false
	res, err = r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := count("cache_lag_waits_total") - waits; got != 1 {
		t.Errorf("waits counted once the copy holds the write: %v, want still 1", got)
	}
	if res.RequeueAfter != 0 && res.RequeueAfter <= 5*time.Second {
		t.Errorf("result %+v on a copy that holds the write, want no wait", res)
	}
}

// counters registers the operator's metrics in a registry of the test's own, and
// reads the sum of one of them.
func counters(t *testing.T) func(name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	return func(name string) float64 {
		t.Helper()
		samples, err := metrics.Gather(reg, metrics.Prefix+name)
		if err != nil {
			t.Fatal(err)
		}
		return metrics.Sum(samples, nil)
	}
}

// staleStatus makes a pool of its own, waits until the operator has rendered it and is
// quiet, and then changes its status to one the next reconcile corrects; it returns
// the pool and its copy with that status. A change of status alone passes none of the
// pool watch's predicates: the running controller leaves it.
func staleStatus(t *testing.T, name string) (ng, stale *v1.NodeGroup) {
	t.Helper()
	ng = pool(tenant(t), name, nil)
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, nodegroup.ReasonApplied)
	waitQuiet(t)
	stale = &v1.NodeGroup{}
	mustGet(t, ng.Namespace, ng.Name, stale)
	patch := client.MergeFrom(stale.DeepCopy())
	stale.Status.Summary = "Stale"
	if err := env.Client.Status().Patch(context.Background(), stale, patch); err != nil {
		t.Fatal(err)
	}
	return ng, stale
}

// directClient reads and writes without a cache.
func directClient(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLocationAccessWithdrawn narrows a location's allowedNamespaces under a running
// pool: the pool says so (LocationResolved=False, LocationNotAllowed) as soon as the
// location changes, its MachineDeployment is left as it is, and access given back
// resolves it again.
func TestLocationAccessWithdrawn(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t)
	loc := &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: "narrowing"}, Spec: v1.LocationSpec{
		Provider:          v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
		AllowedNamespaces: &metav1.LabelSelector{},
	}}
	env.MustCreate(t, loc)
	ng := pool(ns, "placed", func(s *v1.NodeGroupSpec) { s.LocationName = loc.Name })
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, "tenant-placed", md)

	setAllowed := func(sel *metav1.LabelSelector) {
		t.Helper()
		current := &v1.Location{}
		mustGet(t, "", loc.Name, current)
		current.Spec.AllowedNamespaces = sel
		if err := env.Client.Update(ctx, current); err != nil {
			t.Fatal(err)
		}
	}
	setAllowed(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}})
	waitCondition(t, ng, v1.ConditionLocationResolved, metav1.ConditionFalse, nodegroup.ReasonLocationNotAllowed)
	after := &clusterv1.MachineDeployment{}
	mustGet(t, ns, "tenant-placed", after)
	if after.UID != md.UID || after.ResourceVersion != md.ResourceVersion {
		t.Errorf("the MachineDeployment was touched when the location stopped admitting the pool: resourceVersion %s→%s", md.ResourceVersion, after.ResourceVersion)
	}

	setAllowed(&metav1.LabelSelector{})
	waitCondition(t, ng, v1.ConditionLocationResolved, metav1.ConditionTrue, "Resolved")
}

// TestPoolOnProxmoxLocationRunsUnderItsSatellite: a Talos pool on a Proxmox location is
// applied as a ProxmoxMachineTemplate, a TalosConfigTemplate and a MachineDeployment and
// health check under the tenant's satellite on the location (capmox's CRDs serve the
// template). Once it runs, moving it to a KubeVirt location is refused (Cluster API
// cannot move a MachineDeployment to another Cluster) and leaves the running objects
// as they are; moving back heals it.
func TestPoolOnProxmoxLocationRunsUnderItsSatellite(t *testing.T) {
	pve := rulecases.ProxmoxLocation("pve-pool", nil)
	pve.Spec.AllowedNamespaces = &metav1.LabelSelector{}
	env.MustCreate(t, pve)
	ns := tenant(t)
	ng := pool(ns, "lab", func(s *v1.NodeGroupSpec) {
		s.LocationName, s.EphemeralStorage = "pve-pool", resource.MustParse("20Gi")
	})
	env.MustCreate(t, ng)
	got := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")

	satellite := names.SatelliteName("tenant", "pve-pool")
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ns, "tenant-lab", md)
	if md.Spec.ClusterName != satellite || md.Labels[names.LabelTenantCluster] != "tenant" {
		t.Errorf("MachineDeployment under %q with labels %v, want under the satellite %s with the tenant label", md.Spec.ClusterName, md.Labels, satellite)
	}
	if ref := md.Spec.Template.Spec.InfrastructureRef; ref.Kind != "ProxmoxMachineTemplate" || ref.Name != got.Status.InfrastructureTemplateName {
		t.Errorf("infrastructureRef %+v, want the pool's ProxmoxMachineTemplate %s", ref, got.Status.InfrastructureTemplateName)
	}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(names.ProxmoxTemplateKind)
	mustGet(t, ns, got.Status.InfrastructureTemplateName, tmpl)
	mhc := &clusterv1.MachineHealthCheck{}
	mustGet(t, ns, "tenant-lab", mhc)
	if mhc.Spec.ClusterName != satellite {
		t.Errorf("health check under %q, want the satellite %s", mhc.Spec.ClusterName, satellite)
	}

	before := snapshot(t, ng)
	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.LocationName = v1.BuiltinLocation })
	got = waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionFalse, nodegroup.ReasonPolicyViolation)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionRendered); !strings.Contains(c.Message, "which a MachineDeployment cannot do") {
		t.Errorf("message: %s", c.Message)
	}
	time.Sleep(500 * time.Millisecond)
	if after := snapshot(t, ng); !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("a refused move changed the running objects:\nbefore %+v\nafter  %+v", before, after)
	}
	mustGet(t, ns, before.Infra, tmpl)

	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.LocationName = "pve-pool" })
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
}
