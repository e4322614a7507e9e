package controlplanedns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
)

// The controller's apply holds spec.network.dnsServiceIPs and nothing else: the whole
// object before and after differs only there (and in the bookkeeping the write itself
// makes), and the managed fields say the operator owns that one field.
func TestPublishesOnlyTheDNSField(t *testing.T) {
	ns := tenant(t, "10.95.0.0/16", nil)
	waitQuiet(t)
	before := controlPlane(t, ns)
	w := writes.Load()

	env.MustCreate(t, pool(ns, "workers"))
	waitDNS(t, ns, "10.95.0.10")
	waitQuiet(t)
	after := controlPlane(t, ns)
	if n := writes.Load() - w; n != 1 {
		t.Errorf("publishing sent %d writes, want exactly 1", n)
	}

	strip := func(u *unstructured.Unstructured) map[string]any {
		o := u.DeepCopy().Object
		for _, f := range []string{"managedFields", "resourceVersion", "generation"} {
			unstructured.RemoveNestedField(o, "metadata", f)
		}
		unstructured.RemoveNestedField(o, "spec", "network", "dnsServiceIPs")
		return o
	}
	if d := diff("", strip(before), strip(after)); len(d) > 0 {
		t.Errorf("the apply changed more than spec.network.dnsServiceIPs:\n%s", strings.Join(d, "\n"))
	}
	if after.GetGeneration() != before.GetGeneration()+1 {
		t.Errorf("generation %d -> %d, want one step", before.GetGeneration(), after.GetGeneration())
	}

	ours := managedBy(after, controlplanedns.FieldManager)
	if ours == nil || ours.Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("no apply entry of %s in the managed fields: %+v", controlplanedns.FieldManager, after.GetManagedFields())
	}
	var owned any
	if err := json.Unmarshal(ours.FieldsV1.GetRawBytes(), &owned); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"f:spec": map[string]any{"f:network": map[string]any{"f:dnsServiceIPs": map[string]any{}}}}
	if !reflect.DeepEqual(owned, want) {
		t.Errorf("%s owns %s, want only spec.network.dnsServiceIPs", controlplanedns.FieldManager, ours.FieldsV1.GetRawString())
	}
	// Every other manager's entry is untouched: nothing was taken from anyone.
	others := func(u *unstructured.Unstructured) []metav1.ManagedFieldsEntry {
		return slices.DeleteFunc(u.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == controlplanedns.FieldManager })
	}
	if !reflect.DeepEqual(others(before), others(after)) {
		t.Errorf("other managers' fields changed:\nbefore %+v\nafter  %+v", others(before), others(after))
	}

	ev := waitEvent(t, ns, controlplanedns.ReasonPublished)
	if ev.Type != corev1.EventTypeNormal || !strings.Contains(ev.Message, "[10.95.0.10]") || !strings.Contains(ev.Message, "10.95.0.0/16") {
		t.Errorf("event: %s %s", ev.Type, ev.Message)
	}
	if ok, reason, msg := controlplanedns.Status(context.Background(), env.Client, getCluster(t, ns)); !ok || reason != controlplanedns.ReasonPublished {
		t.Errorf("Status = %v %s: %s", ok, reason, msg)
	}
}

// A cluster without pools needs no DNS address for workers: nothing is written, even
// after the controller looked at it; the first pool brings the write.
func TestClusterWithoutPoolsIsNotWritten(t *testing.T) {
	ctx := context.Background()
	w, r := writes.Load(), reconciles()
	ns := tenant(t, "10.95.0.0/16", nil)
	waitReconciled(t, r)
	before := controlPlane(t, ns)
	for range 3 {
		if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: cluster}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.Load() - w; n != 0 {
		t.Errorf("a cluster without pools got %d writes", n)
	}
	kcp := controlPlane(t, ns)
	if kcp.GetResourceVersion() != before.GetResourceVersion() || dnsIPs(kcp) != nil || managedBy(kcp, controlplanedns.FieldManager) != nil {
		t.Errorf("the control plane changed: dnsServiceIPs %v, managed fields %+v", dnsIPs(kcp), kcp.GetManagedFields())
	}
	if ev := clusterEvents(t, ns); len(ev) != 0 {
		t.Errorf("events on a cluster without pools: %v", reasons(ev))
	}

	env.MustCreate(t, pool(ns, "workers"))
	waitDNS(t, ns, "10.95.0.10")
}

// Once the address is published, resyncs and changes of the watched objects send no
// write at all.
func TestSteadyStateSendsNoWrite(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t, "10.95.0.0/16", nil)
	ng := pool(ns, "workers")
	env.MustCreate(t, ng)
	published := waitDNS(t, ns, "10.95.0.10")
	waitQuiet(t)
	w := writes.Load()

	for range 5 {
		if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: cluster}}); err != nil {
			t.Fatal(err)
		}
	}
	// Changes the controller watches: a second pool, the control plane's spec, the
	// Cluster's spec; each one is reconciled and none needs a write. A pool's label
	// change is filtered out before a reconcile.
	for _, change := range []struct {
		what       string
		reconciled bool
		do         func()
	}{
		{"a second pool", true, func() { env.MustCreate(t, pool(ns, "more")) }},
		{"the control plane's spec.replicas", true, func() {
			patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`))
			if err := env.Client.Patch(ctx, controlPlane(t, ns), patch); err != nil {
				t.Fatal(err)
			}
		}},
		{"the Cluster's spec.paused", true, func() {
			c := getCluster(t, ns)
			orig := c.DeepCopy()
			c.Spec.Paused = ptr.To(true)
			if err := env.Client.Patch(ctx, c, client.MergeFrom(orig)); err != nil {
				t.Fatal(err)
			}
		}},
		{"a pool's labels", false, func() {
			cur := &v1.NodeGroup{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), cur); err != nil {
				t.Fatal(err)
			}
			cur.Labels = map[string]string{"touched": "yes"}
			if err := env.Client.Update(ctx, cur); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		r := reconciles()
		change.do()
		if change.reconciled {
			waitReconciled(t, r)
		} else {
			waitQuiet(t)
		}
		if n := writes.Load() - w; n != 0 {
			t.Fatalf("after %s: %d writes, want 0", change.what, n)
		}
	}
	if n := writes.Load() - w; n != 0 {
		t.Errorf("the steady state sent %d writes, want 0", n)
	}
	kcp := controlPlane(t, ns)
	if got, was := managedBy(kcp, controlplanedns.FieldManager), managedBy(published, controlplanedns.FieldManager); got == nil || !got.Time.Equal(was.Time) {
		t.Errorf("our managed fields entry moved: %+v -> %+v", was, got)
	}
}

// Another manager owns the field with another value: the controller reports it, does
// not overwrite it and does not loop; when that manager lets go, the controller
// publishes.
func TestConflictIsReportedNotFought(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t, "10.95.0.0/16", nil)
	platformApply(t, ns, []string{"10.95.0.53"})
	waitQuiet(t)
	w := writes.Load()

	env.MustCreate(t, pool(ns, "workers"))
	ev := waitEvent(t, ns, controlplanedns.ReasonConflict)
	for _, s := range []string{"platform", "10.95.0.53", "10.95.0.10"} {
		if !strings.Contains(ev.Message, s) {
			t.Errorf("conflict event does not name %q: %s", s, ev.Message)
		}
	}
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("conflict event type %s", ev.Type)
	}
	if ok, reason, msg := controlplanedns.Status(ctx, env.Client, getCluster(t, ns)); ok || reason != controlplanedns.ReasonConflict {
		t.Errorf("Status = %v %s: %s", ok, reason, msg)
	}

	// No hot loop: three quiet seconds, then direct resyncs, and not one write (the
	// managed fields show the conflict before anything would be sent).
	r := reconciles()
	time.Sleep(3 * time.Second)
	if n := reconciles() - r; n > 0 {
		t.Errorf("%v reconciles in 3 s of an unchanged conflict, want 0", n)
	}
	for range 3 {
		if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: cluster}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.Load() - w; n != 0 {
		t.Errorf("%d writes against a conflicting field, want 0", n)
	}
	if got := dnsIPs(controlPlane(t, ns)); !slices.Equal(got, []string{"10.95.0.53"}) {
		t.Fatalf("the platform's value was overwritten: %v", got)
	}
	if n := len(clusterEvents(t, ns)); n != 1 {
		t.Errorf("%d events on the Cluster, want the one conflict: %v", n, reasons(clusterEvents(t, ns)))
	}

	// The apply itself does not force: the API server refuses it.
	err := reconciler.Publish(ctx, ns, cluster, "10.95.0.10")
	if !apierrors.IsConflict(err) {
		t.Fatalf("applying over the platform's field: %v, want a conflict", err)
	}
	if got := dnsIPs(controlPlane(t, ns)); !slices.Equal(got, []string{"10.95.0.53"}) {
		t.Fatalf("the platform's value was overwritten: %v", got)
	}

	// The platform lets the field go (it applies without it, so it is removed); that
	// change of the control plane brings the controller back, and it publishes.
	platformApply(t, ns, nil)
	waitDNS(t, ns, "10.95.0.10")
	waitEvent(t, ns, controlplanedns.ReasonPublished)
}

// A value already right, set by someone else, is not written again: no write, no
// entry of ours in the managed fields, no event.
func TestValueAlreadyRightIsNotWritten(t *testing.T) {
	ns := tenant(t, "10.95.0.0/16", nil)
	platformApply(t, ns, []string{"10.95.0.10"})
	waitQuiet(t)
	w, r := writes.Load(), reconciles()

	env.MustCreate(t, pool(ns, "workers"))
	waitReconciled(t, r)
	if n := writes.Load() - w; n != 0 {
		t.Errorf("%d writes for a value already right", n)
	}
	kcp := controlPlane(t, ns)
	if managedBy(kcp, controlplanedns.FieldManager) != nil {
		t.Errorf("the operator took a share of the field: %+v", kcp.GetManagedFields())
	}
	if ev := clusterEvents(t, ns); len(ev) != 0 {
		t.Errorf("events: %v", reasons(ev))
	}
	if ok, reason, msg := controlplanedns.Status(context.Background(), env.Client, getCluster(t, ns)); !ok || reason != controlplanedns.ReasonPublished {
		t.Errorf("Status = %v %s: %s", ok, reason, msg)
	}
}

// An IPv6 service range gets its 10th address, as kubeadm counts.
func TestIPv6ServiceRange(t *testing.T) {
	ns := tenant(t, "fd00:10:96::/108", nil)
	env.MustCreate(t, pool(ns, "workers"))
	waitDNS(t, ns, "fd00:10:96::a")
	if ok, reason, msg := controlplanedns.Status(context.Background(), env.Client, getCluster(t, ns)); !ok || reason != controlplanedns.ReasonPublished {
		t.Errorf("Status = %v %s: %s", ok, reason, msg)
	}
}

// A service range too small to hold the address is refused and reported once, with no
// write and no retry.
func TestTooSmallServiceRangeIsRefused(t *testing.T) {
	ns := tenant(t, "10.95.0.0/29", nil)
	w := writes.Load()
	env.MustCreate(t, pool(ns, "workers"))
	ev := waitEvent(t, ns, controlplanedns.ReasonNotPublished)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "10.95.0.0/29 is too small") {
		t.Errorf("event: %s %s", ev.Type, ev.Message)
	}
	r := reconciles()
	time.Sleep(2 * time.Second)
	if n := reconciles() - r; n > 0 {
		t.Errorf("%v reconciles of an unchanged refusal in 2 s, want 0", n)
	}
	if n := writes.Load() - w; n != 0 {
		t.Errorf("%d writes", n)
	}
	if got := dnsIPs(controlPlane(t, ns)); got != nil {
		t.Errorf("dnsServiceIPs = %v", got)
	}
	if ok, reason, msg := controlplanedns.Status(context.Background(), env.Client, getCluster(t, ns)); ok || reason != controlplanedns.ReasonNotPublished || !strings.Contains(msg, "too small") {
		t.Errorf("Status = %v %s: %s", ok, reason, msg)
	}
}

// spec.addons.coreDNS.dnsServiceIPs overrides spec.network.dnsServiceIPs in Kamaji: our
// field is still set, the addon is left alone, and the override is reported.
func TestCoreDNSAddonOverrideIsReported(t *testing.T) {
	ns := tenant(t, "10.95.0.0/16", func(kcp *unstructured.Unstructured) {
		set(t, kcp, []any{"10.95.0.20"}, "spec", "addons", "coreDNS", "dnsServiceIPs")
	})
	env.MustCreate(t, pool(ns, "workers"))
	kcp := waitDNS(t, ns, "10.95.0.10")
	if got, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "addons", "coreDNS", "dnsServiceIPs"); !slices.Equal(got, []string{"10.95.0.20"}) {
		t.Errorf("the addon was changed: %v", got)
	}
	ev := waitEvent(t, ns, controlplanedns.ReasonOverridden)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "[10.95.0.20]") || !strings.Contains(ev.Message, "10.95.0.10") {
		t.Errorf("event: %s %s", ev.Type, ev.Message)
	}
	if ok, reason, msg := controlplanedns.Status(context.Background(), env.Client, getCluster(t, ns)); ok || reason != controlplanedns.ReasonOverridden {
		t.Errorf("Status = %v %s: %s", ok, reason, msg)
	}
}

// A Cluster with another kind of control plane is not the controller's business.
func TestOtherControlPlanesAreLeftAlone(t *testing.T) {
	tenantSeq++
	ns := fmt.Sprintf("dns-%d", tenantSeq)
	env.MustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	w, r := writes.Load(), reconciles()
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}, Spec: clusterv1.ClusterSpec{
		ClusterNetwork:  clusterv1.ClusterNetwork{Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}}},
		ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: cluster},
	}}
	env.MustCreate(t, c)
	env.MustCreate(t, pool(ns, "workers"))
	waitReconciled(t, r)
	if n := writes.Load() - w; n != 0 {
		t.Errorf("%d writes", n)
	}
	if ok, reason, msg := controlplanedns.Status(context.Background(), env.Client, c); !ok || reason != controlplanedns.ReasonNotManaged {
		t.Errorf("Status = %v %s: %s", ok, reason, msg)
	}
}
