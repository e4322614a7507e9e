package apply_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// countingReader counts the live reads an Applier sends.
type countingReader struct {
	client.Reader
	n atomic.Int64
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.n.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.n.Add(1)
	return r.Reader.List(ctx, list, opts...)
}

// cachedFixture is a fixture whose Applier also reads an informer cache configured as
// the operator's (operator.CacheOptions).
type cachedFixture struct {
	*fixture
	cache  cache.Cache
	reads  *countingReader
	plainA client.Client // the recording client, for new Appliers
}

func newCachedFixture(t *testing.T) *cachedFixture {
	plain, recording, rec := newClients(t)
	ns := newNamespace(t, plain)
	ng := newNodeGroup(t, plain, ns, pool)
	opts := operator.CacheOptions()
	opts.Scheme = scheme.New()
	c, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	reads := &countingReader{Reader: plain}
	f := &fixture{t: t, ns: ns, ng: ng, owner: apply.NodeGroupOwner(ng), c: plain, rec: rec,
		a: apply.NewCached(recording, reads, c)}
	return &cachedFixture{fixture: f, cache: c, reads: reads, plainA: recording}
}

// restart replaces the Applier with a new one, as a restarted operator has: same
// cache, nothing remembered.
func (f *cachedFixture) restart() {
	f.a = apply.NewCached(f.plainA, f.reads, f.cache)
}

// settle waits until the cache holds every object at the server's resourceVersion,
// then forgets the requests so far.
func (f *cachedFixture) settle(objs ...client.Object) {
	f.t.Helper()
	for _, obj := range objs {
		gvk := obj.GetObjectKind().GroupVersionKind()
		live := f.get(gvk, obj.GetName())
		deadline := time.Now().Add(10 * time.Second)
		for {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvk)
			var cached client.Object = m
			if gvk.Kind == "MachineDeployment" || gvk.Kind == "MachineHealthCheck" {
				typed, _ := scheme.New().New(gvk) // the cache holds these typed, as the operator reads them
				cached = typed.(client.Object)
			}
			if err := f.cache.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: obj.GetName()}, cached); err == nil &&
				cached.GetResourceVersion() == live.GetResourceVersion() {
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("the cache never caught up with %s %s", gvk.Kind, obj.GetName())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	f.rec.take()
	f.reads.n.Store(0)
}

// quiet fails when the Applier sent anything since the last settle or quiet.
func (f *cachedFixture) quiet(what string) {
	f.t.Helper()
	if ws := f.rec.take(); len(ws) > 0 {
		f.t.Errorf("%s: sent %q", what, summary(ws))
	}
	if n := f.reads.n.Swap(0); n > 0 {
		f.t.Errorf("%s: %d live reads", what, n)
	}
}

func poolObjects(ns string) []client.Object {
	return []client.Object{
		talosTemplate(ns, "workers-t1"), kubevirtTemplate(ns, "workers-k1"),
		machineDeployment(ns, "workers-t1", "workers-k1"), machineHealthCheck(ns),
	}
}

// TestCachedResyncAndRestartSendNothing: once the cache holds the pool's objects, a
// resync sends no request at all, not even a live read or a dry run; nor does the
// first apply of a restarted operator, which remembers nothing.
func TestCachedResyncAndRestartSendNothing(t *testing.T) {
	f := newCachedFixture(t)
	for _, obj := range poolObjects(f.ns) {
		f.apply(obj, apply.Created)
	}
	if md := f.get(mdGVK, mdName); !strings.HasSuffix(md.GetAnnotations()[apply.AnnotationApplied], "/1") {
		t.Errorf("the MachineDeployment's %s does not name generation 1: %v", apply.AnnotationApplied, md.GetAnnotations())
	}
	f.settle(poolObjects(f.ns)...)
	for range 3 {
		for _, obj := range poolObjects(f.ns) {
			f.apply(obj, apply.Unchanged)
		}
	}
	f.quiet("three resyncs")

	f.restart()
	for _, obj := range poolObjects(f.ns) {
		f.apply(obj, apply.Unchanged)
	}
	f.quiet("the first apply after a restart")
}

// TestCachedChangesAreApplied: a change of the desired body is applied (once), a value
// of ours someone else changed is set back, a label someone else added is left alone
// without a request, and a field we stopped sending is removed, across a restart too.
func TestCachedChangesAreApplied(t *testing.T) {
	f := newCachedFixture(t)
	ctx := t.Context()
	md := machineDeployment(f.ns, "workers-t1", "workers-k1")
	md.Annotations["example.com/extra"] = "one"
	f.apply(md, apply.Created)
	f.settle(md)

	changed := machineDeployment(f.ns, "workers-t1", "workers-k1")
	changed.Annotations["example.com/extra"] = "one"
	changed.Annotations[names.AnnotationMaxSize] = "7"
	f.apply(changed, apply.Updated)
	if got := summary(f.rec.take()); len(got) != 1 || got[0] != "patch MachineDeployment tenant-workers" {
		t.Errorf("a changed body sent %q, want one apply and no dry run", got)
	}
	f.settle(changed)

	// Someone else sets our max-size back, and adds a label of their own.
	live := f.get(mdGVK, mdName)
	if err := f.c.Patch(ctx, live, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"example.com/theirs":"x"},"annotations":{"`+names.AnnotationMaxSize+`":"5"}}}`)),
		client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	f.settle(changed)
	f.apply(changed, apply.Updated)
	if got := f.get(mdGVK, mdName); got.GetAnnotations()[names.AnnotationMaxSize] != "7" || got.GetLabels()["example.com/theirs"] != "x" {
		t.Errorf("after the repair: annotations %v, labels %v", got.GetAnnotations(), got.GetLabels())
	}
	f.settle(changed)
	f.apply(changed, apply.Unchanged)
	f.quiet("the apply after the repair")

	if err := f.c.Patch(ctx, f.get(mdGVK, mdName), client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"example.com/more":"y"}}}`)), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	f.settle(changed)
	f.apply(changed, apply.Unchanged)
	f.quiet("a label of someone else's")

	// A restarted operator that no longer sends example.com/extra removes it.
	f.restart()
	dropped := machineDeployment(f.ns, "workers-t1", "workers-k1")
	dropped.Annotations[names.AnnotationMaxSize] = "7"
	f.apply(dropped, apply.Updated)
	if _, ok := f.get(mdGVK, mdName).GetAnnotations()["example.com/extra"]; ok {
		t.Error("an annotation no longer sent survived a restart")
	}
}

// TestCachedForeignObjectsAreRefused: the cache holds only what carries our label, so a
// foreign object of the desired name is refused and left as it is, as without a cache:
// a MachineDeployment is read live before an apply, and a template's create fails on
// the existing one, which is then read live.
func TestCachedForeignObjectsAreRefused(t *testing.T) {
	f := newCachedFixture(t)
	foreignMD := machineDeployment(f.ns, "workers-t1", "workers-k1")
	delete(foreignMD.Labels, names.LabelManagedBy)
	if err := f.c.Create(t.Context(), foreignMD); err != nil {
		t.Fatal(err)
	}
	foreign := talosTemplate(f.ns, "workers-t1")
	delete(foreign.Labels, names.LabelManagedBy)
	if err := f.c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	beforeT, beforeMD := f.get(talosGVK, "workers-t1"), f.get(mdGVK, mdName)
	for _, obj := range []client.Object{machineDeployment(f.ns, "workers-t1", "workers-k1"), talosTemplate(f.ns, "workers-t1")} {
		if _, err := f.a.Apply(t.Context(), f.owner, obj); !errors.Is(err, apply.ErrNotManaged) {
			t.Errorf("%s: got %v, want ErrNotManaged", kindOf(obj), err)
		}
	}
	for _, w := range f.rec.take() {
		if w.verb != "create" {
			t.Errorf("sent %s %s %s to an object that is not ours", w.verb, w.kind, w.name)
		}
	}
	if after := f.get(talosGVK, "workers-t1"); after.GetResourceVersion() != beforeT.GetResourceVersion() {
		t.Error("the foreign template changed")
	}
	if after := f.get(mdGVK, mdName); after.GetResourceVersion() != beforeMD.GetResourceVersion() {
		t.Error("the foreign MachineDeployment changed")
	}
}

// TestCachedPruneReadsOnlyForCandidates: with nothing superseded the clean-up sends no
// request; a superseded template is checked live and deleted.
func TestCachedPruneReadsOnlyForCandidates(t *testing.T) {
	f := newCachedFixture(t)
	ctx := t.Context()
	for _, obj := range poolObjects(f.ns) {
		f.apply(obj, apply.Created)
	}
	f.settle(poolObjects(f.ns)...)
	keep := map[schema.GroupKind]string{talosGK: "workers-t1", kubevirtGK: "workers-k1"}
	deleted, err := f.a.DeleteSupersededTemplates(ctx, f.ns, pool, mdName, keep, talosGVK, kubevirtGVK)
	if err != nil || len(deleted) > 0 {
		t.Fatalf("deleted %v, %v", deleted, err)
	}
	f.quiet("a clean-up with nothing superseded")

	next := kubevirtTemplate(f.ns, "workers-k2")
	f.apply(next, apply.Created)
	md := machineDeployment(f.ns, "workers-t1", "workers-k2")
	f.apply(md, apply.Updated)
	f.settle(next, md)
	// The update changed the spec without a dry run, so the annotation guessed the
	// generation it would leave; a wrong guess would cost a dry run on every resync.
	f.apply(md, apply.Unchanged)
	f.quiet("a resync after a change of the spec")
	keep[kubevirtGK] = "workers-k2"
	deleted, err = f.a.DeleteSupersededTemplates(ctx, f.ns, pool, mdName, keep, talosGVK, kubevirtGVK)
	if err != nil || len(deleted) != 1 || deleted[0] != "workers-k1" {
		t.Fatalf("deleted %v, %v; want workers-k1", deleted, err)
	}
	f.absent(kubevirtGVK, "workers-k1")
}

// TestCachedScaleIsNoReasonToWrite: cluster-autoscaler's replicas bump the generation
// our annotation names; that costs a dry run, once, and never a write.
func TestCachedScaleIsNoReasonToWrite(t *testing.T) {
	f := newCachedFixture(t)
	md := machineDeployment(f.ns, "workers-t1", "workers-k1")
	f.apply(md, apply.Created)
	f.settle(md)
	if err := f.c.Patch(t.Context(), f.get(mdGVK, mdName), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)),
		client.FieldOwner("cluster-autoscaler")); err != nil {
		t.Fatal(err)
	}
	f.settle(md)
	if f.get(mdGVK, mdName).GetGeneration() < 2 {
		t.Fatal("a new replica count did not bump the generation; the test proves nothing")
	}
	for range 2 {
		f.apply(md, apply.Unchanged)
	}
	if ws := realWrites(f.rec.take()); len(ws) > 0 {
		t.Errorf("a scale made the operator write %q", summary(ws))
	}
	if n := f.reads.n.Swap(0); n != 1 {
		t.Errorf("%d live reads for the scale, want one", n)
	}
	f.apply(md, apply.Unchanged)
	f.quiet("the apply after the scale was seen")

	// Scaled again: the spec apart from the replicas is as the dry run confirmed it, which
	// the cache's digest of it tells without a read or a dry run.
	scale := func(replicas string) {
		t.Helper()
		before := f.get(mdGVK, mdName).GetGeneration()
		if err := f.c.Patch(t.Context(), f.get(mdGVK, mdName), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":`+replicas+`}}`)),
			client.FieldOwner("cluster-autoscaler")); err != nil {
			t.Fatal(err)
		}
		f.settle(md)
		if f.get(mdGVK, mdName).GetGeneration() == before {
			t.Fatal("a new replica count did not bump the generation; the test proves nothing")
		}
	}
	for _, replicas := range []string{"4", "2", "5"} {
		scale(replicas)
		f.apply(md, apply.Unchanged)
		f.quiet("the apply after another scale")
	}

	// Someone else changes a field of ours as well as the replicas: the digest differs,
	// so the dry run finds it and the apply puts it back.
	if err := f.c.Patch(t.Context(), f.get(mdGVK, mdName), client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"replicas":1,"template":{"spec":{"version":"v1.35.0"}}}}`)), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	f.settle(md)
	f.apply(md, apply.Updated)
	if v, _, _ := unstructured.NestedString(f.get(mdGVK, mdName).Object, "spec", "template", "spec", "version"); v != "v1.35.4" {
		t.Errorf("after a scale and an edit of the version by someone else: version %q, want v1.35.4 put back", v)
	}
	f.settle(md)
	f.apply(md, apply.Unchanged)
	f.quiet("the apply after the repair")
}

// racingReader is a live reader after whose next read of a MachineDeployment someone
// else changes it, before the dry run that follows the read reaches the server.
type racingReader struct {
	client.Reader
	change func(ctx context.Context) error
}

func (r *racingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if change := r.change; err == nil && change != nil && key.Name == mdName {
		r.change = nil
		if err := change(ctx); err != nil {
			return err
		}
	}
	return err
}

// TestCachedChangesOfOthersDuringTheDryRunAreNoReasonToWrite: after a scale the
// Applier reads the MachineDeployment and dry-runs its body; Cluster API writing its
// status, cluster-autoscaler scaling it again, or another field manager labelling it,
// between the two is a change of someone else's fields, not of ours, and must not make
// the operator write.
func TestCachedChangesOfOthersDuringTheDryRunAreNoReasonToWrite(t *testing.T) {
	for _, tc := range []struct {
		name, manager, subresource, patch string
	}{
		{"status", "capi-controller-manager", "status", `{"status":{"replicas":3,"readyReplicas":1}}`},
		{"scale", "cluster-autoscaler", "", `{"spec":{"replicas":4}}`},
		{"label", "platform-inventory", "", `{"metadata":{"labels":{"inventory.example.com/owner":"platform"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCachedFixture(t)
			md := machineDeployment(f.ns, "workers-t1", "workers-k1")
			f.apply(md, apply.Created)
			f.settle(md)
			scale := func(ctx context.Context, body string, subresource string) error {
				patch := client.RawPatch(types.MergePatchType, []byte(body))
				live := f.get(mdGVK, mdName)
				if subresource == "status" {
					return f.c.Status().Patch(ctx, live, patch, client.FieldOwner(tc.manager))
				}
				return f.c.Patch(ctx, live, patch, client.FieldOwner(tc.manager))
			}
			if err := scale(t.Context(), `{"spec":{"replicas":3}}`, ""); err != nil {
				t.Fatal(err)
			}
			f.settle(md)
			before := f.get(mdGVK, mdName).GetResourceVersion()
			racing := &racingReader{Reader: f.reads, change: func(ctx context.Context) error { return scale(ctx, tc.patch, tc.subresource) }}
			f.a = apply.NewCached(f.plainA, racing, f.cache)
			f.apply(md, apply.Unchanged)
			if racing.change != nil || f.get(mdGVK, mdName).GetResourceVersion() == before {
				t.Fatal("nothing changed the MachineDeployment during the apply; the test proves nothing")
			}
			if ws := realWrites(f.rec.take()); len(ws) > 0 {
				t.Errorf("a %s during the dry run made the operator write %q", tc.name, summary(ws))
			}
		})
	}
}

// TestCachedMachineSetKeepsItsTemplates: the cache keeps of a MachineSet only what a
// clean-up reads, and that is enough: a superseded template an old MachineSet still
// uses is kept without a live read, and deleted once the MachineSet is gone.
func TestCachedMachineSetKeepsItsTemplates(t *testing.T) {
	f := newCachedFixture(t)
	ctx := t.Context()
	for _, obj := range poolObjects(f.ns) {
		f.apply(obj, apply.Created)
	}
	next := kubevirtTemplate(f.ns, "workers-k2")
	f.apply(next, apply.Created)
	md := machineDeployment(f.ns, "workers-t1", "workers-k2")
	f.apply(md, apply.Updated)
	ms := machineSet(f.ns, "tenant-workers-old", "workers-t1", "workers-k1")
	ms.Spec.Replicas = new(int32(2))
	if err := f.c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	cachedSet := func() (*clusterv1.MachineSet, bool) {
		got := &clusterv1.MachineSet{}
		err := f.cache.Get(ctx, client.ObjectKeyFromObject(ms), got)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return got, err == nil
	}
	waitFor(t, "the cache to hold the MachineSet", func() bool { _, ok := cachedSet(); return ok })
	f.settle(next, md)

	got, _ := cachedSet()
	if got.Spec.Template.Spec.Bootstrap.ConfigRef.Name != "workers-t1" || got.Spec.Template.Spec.InfrastructureRef.Name != "workers-k1" ||
		got.Labels[names.LabelPool] != pool {
		t.Errorf("the cached MachineSet lost what a clean-up reads: labels %v, template %+v", got.Labels, got.Spec.Template.Spec)
	}
	if got.Spec.ClusterName != "" || got.Spec.Replicas != nil || got.Spec.Template.Spec.Version != "" {
		t.Errorf("the cached MachineSet keeps more than a clean-up reads: %+v", got.Spec)
	}

	keep := map[schema.GroupKind]string{talosGK: "workers-t1", kubevirtGK: "workers-k2"}
	deleted, err := f.a.DeleteSupersededTemplates(ctx, f.ns, pool, mdName, keep, talosGVK, kubevirtGVK)
	if err != nil || len(deleted) > 0 {
		t.Fatalf("deleted %v, %v while a MachineSet uses it", deleted, err)
	}
	f.quiet("a clean-up whose only candidate a cached MachineSet uses")

	if err := f.c.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache to drop the MachineSet", func() bool { _, ok := cachedSet(); return !ok })
	deleted, err = f.a.DeleteSupersededTemplates(ctx, f.ns, pool, mdName, keep, talosGVK, kubevirtGVK)
	if err != nil || len(deleted) != 1 || deleted[0] != "workers-k1" {
		t.Fatalf("deleted %v, %v; want workers-k1", deleted, err)
	}
	f.absent(kubevirtGVK, "workers-k1")
}

// waitFor polls cond for up to ten seconds and fails the test when it never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestModifiedTemplateIsLeftAlone: a template whose spec someone else changed after
// apply created it is not written back, with or without a cache; Apply says Modified
// and sends nothing. A template deleted meanwhile is created again under its name.
func TestModifiedTemplateIsLeftAlone(t *testing.T) {
	edit := func(f *fixture, name string) {
		t.Helper()
		live := f.get(talosGVK, name)
		if err := unstructured.SetNestedField(live.Object, "version: v1alpha1\nmachine:\n  type: controlplane\n",
			"spec", "template", "spec", "data"); err != nil {
			t.Fatal(err)
		}
		if err := f.c.Update(t.Context(), live); err != nil {
			t.Fatal(err)
		}
		if got := f.get(talosGVK, name).GetGeneration(); got != 2 {
			t.Fatalf("generation after an edit of the spec = %d, want 2", got)
		}
	}
	t.Run("uncached", func(t *testing.T) {
		f := newFixture(t)
		tpl := talosTemplate(f.ns, "workers-t1")
		f.apply(tpl, apply.Created)
		edit(f, tpl.Name)
		f.rec.take()
		f.apply(tpl, apply.Modified)
		if ws := realWrites(f.rec.take()); len(ws) > 0 {
			t.Errorf("a modified template: sent %q", summary(ws))
		}
	})
	t.Run("cached", func(t *testing.T) {
		f := newCachedFixture(t)
		tpl := talosTemplate(f.ns, "workers-t1")
		f.apply(tpl, apply.Created)
		edit(f.fixture, tpl.Name)
		f.settle(tpl)
		f.apply(tpl, apply.Modified)
		f.quiet("a modified template")

		if err := f.c.Delete(t.Context(), f.get(talosGVK, tpl.Name)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the cache sees the template gone", func() bool {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(talosGVK)
			return apierrors.IsNotFound(f.cache.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: tpl.Name}, m))
		})
		f.apply(tpl, apply.Created)
		if got := f.get(talosGVK, tpl.Name); got.GetGeneration() != 1 {
			t.Errorf("the template created again has generation %d, want 1", got.GetGeneration())
		}
	})
}
