package apply_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
)

const (
	cluster = "tenant"
	pool    = "workers"
	mdName  = "tenant-workers"
)

var (
	kubevirtGK  = schema.GroupKind{Group: capk.GroupVersion.Group, Kind: "KubevirtMachineTemplate"}
	talosGK     = schema.GroupKind{Group: talos.GroupVersion.Group, Kind: "TalosConfigTemplate"}
	kubevirtGVK = capk.GroupVersion.WithKind("KubevirtMachineTemplate")
	talosGVK    = talos.GroupVersion.WithKind("TalosConfigTemplate")
)

// poolLabels are what render puts on every object of the pool.
func poolLabels() map[string]string {
	return map[string]string{
		names.LabelClusterName: cluster,
		names.LabelPool:        pool,
		names.LabelManagedBy:   names.ManagedByValue,
	}
}

// machineDeployment is a MachineDeployment as render makes it: no replicas.
func machineDeployment(ns, bootstrapName, infraName string) *clusterv1.MachineDeployment {
	selector := map[string]string{names.LabelClusterName: cluster, names.LabelPool: pool}
	return &clusterv1.MachineDeployment{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      mdName,
			Namespace: ns,
			Labels:    poolLabels(),
			Annotations: map[string]string{
				names.AnnotationMinSize: "1",
				names.AnnotationMaxSize: "5",
			},
		},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: cluster,
			Selector:    metav1.LabelSelector{MatchLabels: selector},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: selector},
				Spec: clusterv1.MachineSpec{
					ClusterName: cluster,
					Version:     "v1.35.4",
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: talosGK.Group, Kind: talosGK.Kind, Name: bootstrapName,
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: kubevirtGK.Group, Kind: kubevirtGK.Kind, Name: infraName,
					},
				},
			},
		},
	}
}

// machineHealthCheck is the pool's MachineHealthCheck.
func machineHealthCheck(ns string) *clusterv1.MachineHealthCheck {
	return &clusterv1.MachineHealthCheck{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineHealthCheck"},
		ObjectMeta: metav1.ObjectMeta{Name: mdName, Namespace: ns, Labels: poolLabels()},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: cluster,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{names.LabelClusterName: cluster, names.LabelPool: pool}},
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: ptr.To[int32](600),
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To[int32](300)},
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](300)},
				},
			},
		},
	}
}

// templateMeta is the metadata render gives a content-named template.
func templateMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   ns,
		Labels:      poolLabels(),
		Annotations: map[string]string{names.AnnotationTemplateHashVersion: render.HashVersion},
	}
}

func kubevirtTemplate(ns, name string) *capk.KubevirtMachineTemplate {
	return &capk.KubevirtMachineTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: capk.GroupVersion.String(), Kind: "KubevirtMachineTemplate"},
		ObjectMeta: templateMeta(ns, name),
		Spec: capk.KubevirtMachineTemplateSpec{Template: capk.KubevirtMachineTemplateResource{Spec: capk.KubevirtMachineSpec{
			VirtualMachineBootstrapCheck: capk.VirtualMachineBootstrapCheck{CheckStrategy: "none"},
			VirtualMachineTemplate: capk.VirtualMachineTemplateSpec{Spec: kubevirtv1.VirtualMachineSpec{
				RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
				Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
					CPU:    &kubevirtv1.CPU{Cores: 2},
					Memory: &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("4Gi"))},
					Devices: kubevirtv1.Devices{
						Disks: []kubevirtv1.Disk{{Name: "system", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
					},
				}}},
			}},
		}}},
	}
}

func talosTemplate(ns, name string) *talos.TalosConfigTemplate {
	return &talos.TalosConfigTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: talos.GroupVersion.String(), Kind: "TalosConfigTemplate"},
		ObjectMeta: templateMeta(ns, name),
		Spec: talos.TalosConfigTemplateSpec{Template: talos.TalosConfigTemplateResource{Spec: talos.TalosConfigSpec{
			GenerateType: talos.GenerateTypeNone,
			Data:         "version: v1alpha1\nmachine:\n  type: worker\n",
		}}},
	}
}

// fixture is one test's namespace, owner, clients and Applier.
type fixture struct {
	t     *testing.T
	ns    string
	ng    *v1alpha1.NodeGroup
	owner apply.Owner
	c     client.Client // plain: setup and inspection
	rec   *recorder
	a     *apply.Applier
}

func newFixture(t *testing.T) *fixture {
	plain, recording, rec := newClients(t)
	ns := newNamespace(t, plain)
	ng := newNodeGroup(t, plain, ns, pool)
	return &fixture{t: t, ns: ns, ng: ng, owner: apply.NodeGroupOwner(ng), c: plain, rec: rec,
		a: apply.New(recording, recording)}
}

func (f *fixture) apply(obj client.Object, want apply.Result) {
	f.t.Helper()
	got, err := f.a.Apply(f.t.Context(), f.owner, obj)
	if err != nil {
		f.t.Fatalf("apply %s %s: %v", kindOf(obj), obj.GetName(), err)
	}
	if got != want {
		f.t.Fatalf("apply %s %s: got %s, want %s", kindOf(obj), obj.GetName(), got, want)
	}
}

func (f *fixture) get(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := f.c.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, u); err != nil {
		f.t.Fatalf("get %s %s: %v", gvk.Kind, name, err)
	}
	return u
}

func (f *fixture) absent(gvk schema.GroupVersionKind, name string) {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := f.c.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, u)
	if !apierrors.IsNotFound(err) {
		f.t.Fatalf("%s %s: want NotFound, got %v", gvk.Kind, name, err)
	}
}

var (
	mdGVK  = clusterv1.GroupVersion.WithKind("MachineDeployment")
	mhcGVK = clusterv1.GroupVersion.WithKind("MachineHealthCheck")
)

// realWrites are the writes that were not dry runs.
func realWrites(ws []write) []write {
	var out []write
	for _, w := range ws {
		if !w.dryRun {
			out = append(out, w)
		}
	}
	return out
}

func summary(ws []write) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		s := w.verb + " " + w.kind + " " + w.name
		if w.dryRun {
			s += " (dry run)"
		}
		out = append(out, s)
	}
	return out
}

func diffStats(before, after apply.Stats) apply.Stats {
	return apply.Stats{
		Applies: after.Applies - before.Applies,
		DryRuns: after.DryRuns - before.DryRuns,
		Skipped: after.Skipped - before.Skipped,
		Deletes: after.Deletes - before.Deletes,
	}
}

// TestCreateThenSteadyState: the first apply creates every object, owned by the
// NodeGroup and labelled; applying the same objects again writes nothing at all, only a
// dry run per mutable object, and leaves the resourceVersions as they were. This also
// checks that the upstream CRDs' defaults do not make every dry run look like a change.
func TestCreateThenSteadyState(t *testing.T) {
	f := newFixture(t)
	objects := func() []client.Object {
		return []client.Object{
			talosTemplate(f.ns, "workers-t1"),
			kubevirtTemplate(f.ns, "workers-k1"),
			machineDeployment(f.ns, "workers-t1", "workers-k1"),
			machineHealthCheck(f.ns),
		}
	}
	for _, obj := range objects() {
		f.apply(obj, apply.Created)
	}
	created := f.rec.take()
	if got, want := summary(created), []string{
		"create TalosConfigTemplate workers-t1",
		"create KubevirtMachineTemplate workers-k1",
		"patch MachineDeployment tenant-workers",
		"patch MachineHealthCheck tenant-workers",
	}; !slices.Equal(got, want) {
		t.Fatalf("writes on create:\n got %q\nwant %q", got, want)
	}
	if got, want := f.a.Stats(), (apply.Stats{Applies: 4}); got != want {
		t.Errorf("stats after create: got %+v, want %+v", got, want)
	}
	// What was sent holds only what the test set: no status, no creationTimestamp.
	for _, w := range created {
		if _, ok := w.body["status"]; ok {
			t.Errorf("%s %s: the applied body holds a status", w.kind, w.name)
		}
		meta, _ := w.body["metadata"].(map[string]any)
		if _, ok := meta["creationTimestamp"]; ok {
			t.Errorf("%s %s: the applied body holds metadata.creationTimestamp", w.kind, w.name)
		}
	}

	live := map[string]*unstructured.Unstructured{
		"TalosConfigTemplate":     f.get(talosGVK, "workers-t1"),
		"KubevirtMachineTemplate": f.get(kubevirtGVK, "workers-k1"),
		"MachineDeployment":       f.get(mdGVK, mdName),
		"MachineHealthCheck":      f.get(mhcGVK, mdName),
	}
	for kind, u := range live {
		refs := u.GetOwnerReferences()
		if len(refs) != 1 {
			t.Fatalf("%s: owner references %+v, want exactly the NodeGroup", kind, refs)
		}
		want := metav1.OwnerReference{
			APIVersion: "nodegroup.io/v1alpha1", Kind: "NodeGroup", Name: f.ng.Name, UID: f.ng.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}
		if r := refs[0]; r.APIVersion != want.APIVersion || r.Kind != want.Kind || r.Name != want.Name ||
			r.UID != want.UID || !ptr.Deref(r.Controller, false) || !ptr.Deref(r.BlockOwnerDeletion, false) {
			t.Errorf("%s: owner reference %+v, want %+v", kind, r, want)
		}
		if got := u.GetLabels()[names.LabelManagedBy]; got != names.ManagedByValue {
			t.Errorf("%s: label %s=%q", kind, names.LabelManagedBy, got)
		}
		for _, mf := range u.GetManagedFields() {
			if mf.Manager != apply.FieldManager {
				t.Errorf("%s: field manager %q wrote it, want only %q", kind, mf.Manager, apply.FieldManager)
			}
		}
	}

	for round := range 3 {
		before := f.a.Stats()
		for _, obj := range objects() {
			f.apply(obj, apply.Unchanged)
		}
		ws := f.rec.take()
		if real := realWrites(ws); len(real) > 0 {
			t.Fatalf("round %d: a steady-state resync wrote %q", round, summary(real))
		}
		if got, want := summary(ws), []string{
			"patch MachineDeployment tenant-workers (dry run)",
			"patch MachineHealthCheck tenant-workers (dry run)",
		}; !slices.Equal(got, want) {
			t.Fatalf("round %d: requests %q, want %q", round, got, want)
		}
		if got, want := diffStats(before, f.a.Stats()), (apply.Stats{DryRuns: 2, Skipped: 4}); got != want {
			t.Errorf("round %d: stats %+v, want %+v", round, got, want)
		}
	}
	for kind, u := range live {
		now := f.get(u.GroupVersionKind(), u.GetName())
		if now.GetResourceVersion() != u.GetResourceVersion() {
			t.Errorf("%s: resourceVersion moved from %s to %s on a steady-state resync", kind, u.GetResourceVersion(), now.GetResourceVersion())
		}
	}
}

// TestCRDDefaultsDoNotLookLikeAChange: a field the CRD schema defaults and we do not
// send is in the dry-run result and in the live object alike, so it is no diff. The
// Cluster API v1beta2 CRDs default nothing in their schemas (their defaulting is a
// webhook, which dry runs call too); CAPK defaults virtualMachineBootstrapCheck's
// checkStrategy, so a KubevirtMachineTemplate applied as a mutable object shows it.
func TestCRDDefaultsDoNotLookLikeAChange(t *testing.T) {
	f := newFixture(t)
	build := func() *unstructured.Unstructured {
		kmt := kubevirtTemplate(f.ns, "workers-mutable")
		kmt.Annotations = nil // not content-named: the dry-run rule applies
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(kmt)
		if err != nil {
			t.Fatal(err)
		}
		unstructured.RemoveNestedField(content, "spec", "template", "spec", "virtualMachineBootstrapCheck", "checkStrategy")
		return &unstructured.Unstructured{Object: content}
	}
	f.apply(build(), apply.Created)
	live := f.get(kubevirtGVK, "workers-mutable")
	got, _, _ := unstructured.NestedString(live.Object, "spec", "template", "spec", "virtualMachineBootstrapCheck", "checkStrategy")
	if got != "ssh" {
		t.Fatalf("checkStrategy %q: the CRD default this test relies on is gone", got)
	}
	f.rec.take()
	f.apply(build(), apply.Unchanged)
	if got := summary(f.rec.take()); !slices.Equal(got, []string{"patch KubevirtMachineTemplate workers-mutable (dry run)"}) {
		t.Errorf("requests %q, want one dry run", got)
	}
}

// TestChangedAnnotationUpdates: a change is applied, a field we stop sending is removed,
// and the apply after that is a no-op again.
func TestChangedAnnotationUpdates(t *testing.T) {
	f := newFixture(t)
	md := machineDeployment(f.ns, "workers-t1", "workers-k1")
	md.Annotations["example.com/extra"] = "one"
	f.apply(md, apply.Created)

	md = machineDeployment(f.ns, "workers-t1", "workers-k1")
	md.Annotations[names.AnnotationMaxSize] = "7"
	f.rec.take()
	f.apply(md, apply.Updated)
	if got := summary(f.rec.take()); !slices.Equal(got, []string{
		"patch MachineDeployment tenant-workers (dry run)",
		"patch MachineDeployment tenant-workers",
	}) {
		t.Errorf("requests %q, want a dry run then one apply", got)
	}
	a := f.get(mdGVK, mdName).GetAnnotations()
	if a[names.AnnotationMaxSize] != "7" {
		t.Errorf("max-size annotation %q, want 7", a[names.AnnotationMaxSize])
	}
	if _, ok := a["example.com/extra"]; ok {
		t.Errorf("an annotation no longer applied survived: %v", a)
	}
	f.apply(md, apply.Unchanged)
	if real := realWrites(f.rec.take()); len(real) > 0 {
		t.Errorf("the apply after an update wrote %q", summary(real))
	}
}

// TestAutoscalerReplicasSurvive: replicas written by cluster-autoscaler through the
// scale subresource survive ten of our applies, changes or not, and no apply of ours
// ever carries spec.replicas or claims it.
func TestAutoscalerReplicasSurvive(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	f.apply(machineDeployment(f.ns, "workers-t1", "workers-k1"), apply.Created)

	md := &clusterv1.MachineDeployment{}
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: mdName}, md); err != nil {
		t.Fatal(err)
	}
	if md.Spec.Replicas != nil {
		t.Fatalf("replicas %d after our create: nothing here should have set them", *md.Spec.Replicas)
	}
	// Cluster API's defaulting webhook seeds replicas on create; this server runs no
	// webhook (and the scale subresource fails while .spec.replicas is missing), so a
	// stand-in sets the seed.
	if err := f.c.Patch(ctx, md, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`)),
		client.FieldOwner("capi-defaulting-stand-in")); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{}
	if err := f.c.SubResource("scale").Get(ctx, md, scale); err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 5
	if err := f.c.SubResource("scale").Update(ctx, md, client.WithSubResourceBody(scale),
		client.FieldOwner("cluster-autoscaler")); err != nil {
		t.Fatal(err)
	}

	var results []apply.Result
	for i := range 10 {
		desired := machineDeployment(f.ns, "workers-t1", "workers-k1")
		desired.Annotations["example.com/round"] = fmt.Sprint(i / 2) // changes every other round
		r, err := f.a.Apply(ctx, f.owner, desired)
		if err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		results = append(results, r)
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: mdName}, md); err != nil {
			t.Fatal(err)
		}
		if md.Spec.Replicas == nil || *md.Spec.Replicas != 5 {
			t.Fatalf("apply %d (%s): replicas %v, want the autoscaler's 5", i, r, md.Spec.Replicas)
		}
	}
	if !slices.Contains(results, apply.Updated) || !slices.Contains(results, apply.Unchanged) {
		t.Errorf("results %v: want both real applies and no-ops", results)
	}
	for _, w := range f.rec.take() {
		spec, _ := w.body["spec"].(map[string]any)
		if _, ok := spec["replicas"]; ok {
			t.Errorf("%s %s sent spec.replicas", w.verb, w.kind)
		}
	}
	for _, mf := range md.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		owns := strings.Contains(mf.FieldsV1.GetRawString(), `"f:replicas"`)
		switch {
		case mf.Manager == apply.FieldManager && owns:
			t.Errorf("%s owns spec.replicas: %s", apply.FieldManager, mf.FieldsV1.GetRawString())
		case mf.Manager == "cluster-autoscaler" && !owns:
			t.Errorf("cluster-autoscaler does not own spec.replicas any more: %s", mf.FieldsV1.GetRawString())
		}
	}
}

// TestReplicasAreRefused: a MachineDeployment with spec.replicas is a programming error;
// nothing is sent.
func TestReplicasAreRefused(t *testing.T) {
	f := newFixture(t)
	md := machineDeployment(f.ns, "workers-t1", "workers-k1")
	md.Spec.Replicas = ptr.To[int32](3)
	_, err := f.a.Apply(t.Context(), f.owner, md)
	if !errors.Is(err, apply.ErrReplicasSet) {
		t.Fatalf("got %v, want ErrReplicasSet", err)
	}
	if ws := f.rec.take(); len(ws) > 0 {
		t.Errorf("sent %q", summary(ws))
	}
	f.absent(mdGVK, mdName)
}

// withUnknownField is obj as unstructured with spec.notAField added.
func withUnknownField(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	if err := unstructured.SetNestedField(u.Object, "surprise", "spec", "notAField"); err != nil {
		t.Fatal(err)
	}
	return u
}

func wantUnknownFieldError(t *testing.T, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "notAField") {
		t.Fatalf("got %v, want an error naming the unknown field notAField", err)
	}
}

// TestStrictFieldValidation: an unknown field fails the write instead of being dropped,
// on create and on update of a mutable object and on create of a template.
func TestStrictFieldValidation(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()

	_, err := f.a.Apply(ctx, f.owner, withUnknownField(t, machineDeployment(f.ns, "workers-t1", "workers-k1")))
	wantUnknownFieldError(t, err)
	f.absent(mdGVK, mdName)

	f.apply(machineDeployment(f.ns, "workers-t1", "workers-k1"), apply.Created)
	before := f.get(mdGVK, mdName)
	f.rec.take()
	changed := machineDeployment(f.ns, "workers-t1", "workers-k1")
	changed.Annotations[names.AnnotationMaxSize] = "9"
	_, err = f.a.Apply(ctx, f.owner, withUnknownField(t, changed))
	wantUnknownFieldError(t, err)
	if real := realWrites(f.rec.take()); len(real) > 0 {
		t.Errorf("a refused dry run was followed by %q", summary(real))
	}
	if after := f.get(mdGVK, mdName); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the MachineDeployment changed")
	}

	_, err = f.a.Apply(ctx, f.owner, withUnknownField(t, kubevirtTemplate(f.ns, "workers-k1")))
	wantUnknownFieldError(t, err)
	f.absent(kubevirtGVK, "workers-k1")
}

// TestForeignObjectsAreRefused: an object of the desired name that we did not create, or
// that another NodeGroup controls, is an error and is left untouched.
func TestForeignObjectsAreRefused(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()

	foreign := talosTemplate(f.ns, "workers-t1")
	foreign.Labels = map[string]string{names.LabelPool: pool} // no managed-by label
	foreign.Spec.Template.Spec.Data = "someone else's"
	if err := f.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	foreignMD := machineDeployment(f.ns, "workers-t1", "workers-k1")
	delete(foreignMD.Labels, names.LabelManagedBy)
	if err := f.c.Create(ctx, foreignMD); err != nil {
		t.Fatal(err)
	}
	beforeT, beforeMD := f.get(talosGVK, "workers-t1"), f.get(mdGVK, mdName)

	if _, err := f.a.Apply(ctx, f.owner, talosTemplate(f.ns, "workers-t1")); !errors.Is(err, apply.ErrNotManaged) {
		t.Errorf("template: got %v, want ErrNotManaged", err)
	}
	desired := machineDeployment(f.ns, "workers-t1", "workers-k1")
	desired.Annotations[names.AnnotationMaxSize] = "9"
	if _, err := f.a.Apply(ctx, f.owner, desired); !errors.Is(err, apply.ErrNotManaged) {
		t.Errorf("MachineDeployment: got %v, want ErrNotManaged", err)
	}
	if ws := f.rec.take(); len(ws) > 0 {
		t.Errorf("sent %q to objects that are not ours", summary(ws))
	}
	if after := f.get(talosGVK, "workers-t1"); after.GetResourceVersion() != beforeT.GetResourceVersion() {
		t.Error("the foreign template changed")
	}
	if after := f.get(mdGVK, mdName); after.GetResourceVersion() != beforeMD.GetResourceVersion() {
		t.Error("the foreign MachineDeployment changed")
	}

	// Ours by label, but controlled by another NodeGroup (say a deleted one of the same
	// name the garbage collector has not reached yet).
	other := newNodeGroup(t, f.c, f.ns, "other")
	otherApplier := apply.New(f.c, nil)
	if _, err := otherApplier.Apply(ctx, apply.NodeGroupOwner(other), kubevirtTemplate(f.ns, "workers-k1")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.Apply(ctx, f.owner, kubevirtTemplate(f.ns, "workers-k1")); !errors.Is(err, apply.ErrOtherController) {
		t.Errorf("template of another NodeGroup: got %v, want ErrOtherController", err)
	}
}

// TestBadInputIsRefused: programming errors are caught before anything is sent.
func TestBadInputIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	noKind := machineDeployment(f.ns, "workers-t1", "workers-k1")
	noKind.TypeMeta = metav1.TypeMeta{}
	if _, err := f.a.Apply(ctx, f.owner, noKind); err == nil {
		t.Error("an object without apiVersion and kind was applied")
	}
	elsewhere := machineDeployment("default", "workers-t1", "workers-k1")
	if _, err := f.a.Apply(ctx, f.owner, elsewhere); err == nil || !strings.Contains(err.Error(), "another namespace") {
		t.Errorf("an object outside its owner's namespace: got %v", err)
	}
	if ws := f.rec.take(); len(ws) > 0 {
		t.Errorf("sent %q", summary(ws))
	}
}

// TestServerFieldsAreNotSent: what the server owns (status, creationTimestamp,
// resourceVersion, uid, generation) is dropped from the applied body even when the
// desired object carries it, say because it started as a copy of a live object.
func TestServerFieldsAreNotSent(t *testing.T) {
	f := newFixture(t)
	md := machineDeployment(f.ns, "workers-t1", "workers-k1")
	md.CreationTimestamp = metav1.Now()
	md.ResourceVersion = "12345"
	md.UID = "0f7a5a3c-0000-4000-8000-000000000000"
	md.Generation = 7
	md.Status.ObservedGeneration = 7
	md.Status.Selector = "a=b"
	f.apply(md, apply.Created)
	ws := f.rec.take()
	if len(ws) != 1 {
		t.Fatalf("sent %q, want one apply", summary(ws))
	}
	if _, ok := ws[0].body["status"]; ok {
		t.Error("status was sent")
	}
	meta, _ := ws[0].body["metadata"].(map[string]any)
	for _, k := range []string{"creationTimestamp", "resourceVersion", "uid", "generation"} {
		if _, ok := meta[k]; ok {
			t.Errorf("metadata.%s was sent", k)
		}
	}
	if md.ResourceVersion != "12345" || md.Status.Selector != "a=b" {
		t.Error("Apply modified the object it was given")
	}
}

// machineSet is a MachineSet of the pool's MachineDeployment, as Cluster API makes them.
func machineSet(ns, name, bootstrapName, infraName string) *clusterv1.MachineSet {
	md := machineDeployment(ns, bootstrapName, infraName)
	labels := map[string]string{clusterv1.MachineDeploymentNameLabel: mdName}
	for k, v := range md.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	return &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: clusterv1.MachineSetSpec{
			ClusterName: cluster,
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec:       md.Spec.Template.Spec,
			},
		},
	}
}

// TestDeleteSupersededTemplates: an old template is kept while the live
// MachineDeployment or a MachineSet points at it and deleted once nothing does; the
// current templates, another pool's and anything without our label are never deleted.
func TestDeleteSupersededTemplates(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	prune := func(want ...string) {
		t.Helper()
		keep := map[schema.GroupKind]string{talosGK: "workers-t2", kubevirtGK: "workers-k2"}
		got, err := f.a.DeleteSupersededTemplates(ctx, f.ns, pool, mdName, keep, talosGVK, kubevirtGVK)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("deleted %q, want %q", got, want)
		}
	}

	f.apply(talosTemplate(f.ns, "workers-t1"), apply.Created)
	f.apply(kubevirtTemplate(f.ns, "workers-k1"), apply.Created)
	f.apply(machineDeployment(f.ns, "workers-t1", "workers-k1"), apply.Created)
	f.apply(talosTemplate(f.ns, "workers-t2"), apply.Created)
	f.apply(kubevirtTemplate(f.ns, "workers-k2"), apply.Created)

	// Not ours: the pool label but no managed-by label.
	foreign := kubevirtTemplate(f.ns, "workers-foreign")
	foreign.Labels = map[string]string{names.LabelPool: pool}
	if err := f.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// Ours, but another pool's.
	otherPool := talosTemplate(f.ns, "other-t1")
	otherPool.Labels[names.LabelPool] = "other"
	if err := f.c.Create(ctx, otherPool); err != nil {
		t.Fatal(err)
	}

	// The new templates exist but the MachineDeployment still points at the old ones.
	prune()

	f.apply(machineDeployment(f.ns, "workers-t2", "workers-k2"), apply.Updated)
	ms := machineSet(f.ns, "tenant-workers-old", "workers-t1", "workers-k1")
	if err := f.c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	prune()

	if err := f.c.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	before := f.a.Stats()
	prune("workers-k1", "workers-t1")
	if got := diffStats(before, f.a.Stats()).Deletes; got != 2 {
		t.Errorf("Stats.Deletes grew by %d, want 2", got)
	}
	f.absent(talosGVK, "workers-t1")
	f.absent(kubevirtGVK, "workers-k1")
	for _, still := range []struct {
		gvk  schema.GroupVersionKind
		name string
	}{{talosGVK, "workers-t2"}, {kubevirtGVK, "workers-k2"}, {kubevirtGVK, "workers-foreign"}, {talosGVK, "other-t1"}} {
		f.get(still.gvk, still.name)
	}

	// With nothing to keep (say the caller lost track of the current names), what the
	// live MachineDeployment and its MachineSet use is still kept.
	ms = machineSet(f.ns, "tenant-workers-current", "workers-t2", "workers-k2")
	if err := f.c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got, err := f.a.DeleteSupersededTemplates(ctx, f.ns, pool, mdName, nil, talosGVK, kubevirtGVK)
	if err != nil || len(got) != 0 {
		t.Fatalf("with every template in use: deleted %q, err %v", got, err)
	}
	f.get(kubevirtGVK, "workers-foreign")
}
