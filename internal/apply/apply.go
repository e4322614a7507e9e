// Package apply writes the objects render computed to the API server, and nothing else:
// it does not decide what a pool looks like, it only makes the server agree.
//
// Two kinds of object, two rules:
//
//   - Mutable objects (the MachineDeployment, the MachineHealthCheck) are written by
//     server-side apply with one field manager, strict field validation and forced
//     ownership of the fields we send. A dry-run apply comes first and its result is
//     compared with the live object, so a resync that would change nothing sends no
//     write: no new resourceVersion, no watch event, no reconcile storm.
//   - Immutable templates are named by a hash of their content (render writes
//     render.AnnotationTemplateHashVersion on them). A template of that name that exists
//     already has that content, so it is never written again; a change of content is a
//     new name, and the MachineDeployment rolls to it. DeleteSupersededTemplates removes
//     the old ones once no MachineSet uses them.
//
// Every object gets the managed-by label and a controller owner reference to its
// NodeGroup. An object of the desired name that lacks the label, or that another object
// controls, is never adopted or overwritten: Apply returns an error instead.
package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
)

// FieldManager is the one field manager every write of the operator uses.
const FieldManager = "nodegroup-operator"

// Result says what Apply did to one object.
type Result int

const (
	// Unchanged: the server already held the desired object; nothing was written.
	Unchanged Result = iota
	// Created: the object did not exist and was created.
	Created
	// Updated: the object existed and an apply changed it.
	Updated
)

func (r Result) String() string {
	switch r {
	case Unchanged:
		return "Unchanged"
	case Created:
		return "Created"
	case Updated:
		return "Updated"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

var (
	// ErrNotManaged: an object of the desired name exists without the managed-by label,
	// so someone else created it. The operator never adopts or overwrites it.
	ErrNotManaged = errors.New("exists and is not managed by " + render.ManagedByValue)
	// ErrOtherController: the object is ours but another object (for example an earlier
	// NodeGroup of the same name, still being garbage collected) is its controller.
	ErrOtherController = errors.New("is controlled by another object")
	// ErrReplicasSet: a MachineDeployment reached apply with spec.replicas set. Replicas
	// belong to Cluster API's defaulting and to cluster-autoscaler; sending them would
	// take them over and fight the autoscaler. It is a programming error in render.
	ErrReplicasSet = errors.New("spec.replicas must not be applied: cluster-autoscaler owns it")
)

// Owner is the object every applied object is owned by: its metadata and its kind,
// which a typed object read from a client usually lacks in TypeMeta.
type Owner struct {
	Object metav1.Object
	GVK    schema.GroupVersionKind
}

// NodeGroupOwner is the owner for objects of a NodeGroup.
func NodeGroupOwner(ng metav1.Object) Owner {
	return Owner{Object: ng, GVK: v1alpha1.GroupVersion.WithKind("NodeGroup")}
}

// Stats counts what an Applier sent, so tests can assert that a steady-state resync
// writes nothing.
type Stats struct {
	// Applies counts real writes: apply patches and template creates.
	Applies int
	// DryRuns counts dry-run applies.
	DryRuns int
	// Skipped counts objects left as they were: a dry run showed no change, or the
	// immutable template exists already.
	Skipped int
	// Deletes counts superseded templates deleted.
	Deletes int
}

// Applier applies desired objects. It is safe for concurrent use.
type Applier struct {
	client client.Client
	reader client.Reader

	mu    sync.Mutex
	stats Stats
}

// New returns an Applier that writes with c and reads live objects with reader.
//
// Pass an uncached reader (a manager's GetAPIReader()) for reader: the comparison after
// a dry run, the template existence check and the MachineSet list before a delete then
// see the server's state, not a cache that may lag. nil reads with c.
//
// c's scheme must know Cluster API's v1beta2 kinds (internal/scheme.New has them);
// templates are read and written as unstructured objects and need no scheme.
func New(c client.Client, reader client.Reader) *Applier {
	if reader == nil {
		reader = c
	}
	return &Applier{client: c, reader: reader}
}

// Stats returns what the Applier sent so far.
func (a *Applier) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

func (a *Applier) count(f func(*Stats)) {
	a.mu.Lock()
	f(&a.stats)
	a.mu.Unlock()
}

// Option changes how Apply treats one object.
type Option func(*options)

type options struct {
	immutable bool
}

// Immutable treats the object as a content-named template even without
// render.AnnotationTemplateHashVersion: created when missing, never written otherwise.
func Immutable() Option { return func(o *options) { o.immutable = true } }

// Apply makes the server hold obj, owned by owner. obj is not modified; its TypeMeta
// must name its kind (render sets it). See the package comment for the two rules.
func (a *Applier) Apply(ctx context.Context, owner Owner, obj client.Object, opts ...Option) (Result, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	desired, err := desiredObject(owner, obj)
	if err != nil {
		return Unchanged, err
	}
	if _, ok := desired.GetAnnotations()[render.AnnotationTemplateHashVersion]; ok || o.immutable {
		return a.ensureTemplate(ctx, owner, desired)
	}
	return a.apply(ctx, owner, desired)
}

// desiredObject is obj as the unstructured apply configuration we send: only what render
// set, plus our label and owner reference. The typed-to-unstructured conversion would
// otherwise send `creationTimestamp: null` and an empty status, and claim them.
func desiredObject(owner Owner, obj client.Object) (*unstructured.Unstructured, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("apply %T %s/%s: apiVersion and kind are not set", obj, obj.GetNamespace(), obj.GetName())
	}
	what := fmt.Sprintf("%s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())
	if obj.GetName() == "" || obj.GetNamespace() == "" {
		return nil, fmt.Errorf("apply %s: name and namespace are required", what)
	}
	if owner.Object == nil || owner.Object.GetUID() == "" || owner.Object.GetName() == "" || owner.GVK.Kind == "" {
		return nil, fmt.Errorf("apply %s: the owner needs a name, a UID and a kind", what)
	}
	// An owner reference across namespaces is invalid, and the garbage collector would
	// delete the object.
	if owner.Object.GetNamespace() != obj.GetNamespace() {
		return nil, fmt.Errorf("apply %s: owner %s %s/%s is in another namespace",
			what, owner.GVK.Kind, owner.Object.GetNamespace(), owner.Object.GetName())
	}

	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("apply %s: converting to unstructured: %w", what, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields",
		"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}

	if isMachineDeployment(gvk) {
		if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); found {
			return nil, fmt.Errorf("apply %s: %w", what, ErrReplicasSet)
		}
	}

	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[render.LabelManagedBy] = render.ManagedByValue
	u.SetLabels(labels)

	refs := make([]metav1.OwnerReference, 0, 1)
	for _, ref := range u.GetOwnerReferences() {
		if ref.UID == owner.Object.GetUID() {
			continue
		}
		if ptr.Deref(ref.Controller, false) {
			return nil, fmt.Errorf("apply %s: the desired object already names controller %s %s", what, ref.Kind, ref.Name)
		}
		refs = append(refs, ref)
	}
	u.SetOwnerReferences(append(refs, metav1.OwnerReference{
		APIVersion:         owner.GVK.GroupVersion().String(),
		Kind:               owner.GVK.Kind,
		Name:               owner.Object.GetName(),
		UID:                owner.Object.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}))
	return u, nil
}

func isMachineDeployment(gvk schema.GroupVersionKind) bool {
	return gvk.Group == clusterv1.GroupVersion.Group && gvk.Kind == "MachineDeployment"
}

// apply is the rule for mutable objects: create by apply when missing; otherwise a dry
// run, and a real apply only when the dry run differs from the live object.
func (a *Applier) apply(ctx context.Context, owner Owner, desired *unstructured.Unstructured) (Result, error) {
	what := describe(desired)
	live, err := a.get(ctx, desired)
	if err != nil {
		return Unchanged, fmt.Errorf("apply %s: reading the live object: %w", what, err)
	}
	if live == nil {
		if err := a.patch(ctx, desired.DeepCopy(), false); err != nil {
			return Unchanged, fmt.Errorf("apply %s: %w", what, err)
		}
		return Created, nil
	}
	if err := checkOurs(live, owner); err != nil {
		return Unchanged, fmt.Errorf("apply %s: %w", what, err)
	}

	dry := desired.DeepCopy()
	if err := a.patch(ctx, dry, true); err != nil {
		return Unchanged, fmt.Errorf("apply %s (dry run): %w", what, err)
	}
	if sameObject(dry, live) {
		a.count(func(s *Stats) { s.Skipped++ })
		return Unchanged, nil
	}
	if err := a.patch(ctx, desired.DeepCopy(), false); err != nil {
		return Unchanged, fmt.Errorf("apply %s: %w", what, err)
	}
	return Updated, nil
}

// patch sends one server-side apply. It goes through Patch with a raw apply body because
// controller-runtime's Client.Apply has no field validation option. (Against a CRD with a
// structural schema the server refuses an unknown field in an apply whatever the
// validation level, as a 500 "field not declared in schema"; Strict is asked for anyway,
// as the issue says, so the request states what we rely on.)
func (a *Applier) patch(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	body, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	opts := []client.PatchOption{
		client.FieldOwner(FieldManager),
		client.ForceOwnership,
		client.FieldValidation(metav1.FieldValidationStrict),
	}
	if dryRun {
		opts = append(opts, client.DryRunAll)
		a.count(func(s *Stats) { s.DryRuns++ })
	} else {
		a.count(func(s *Stats) { s.Applies++ })
	}
	return a.client.Patch(ctx, obj, client.RawPatch(types.ApplyPatchType, body), opts...)
}

// ensureTemplate is the rule for immutable templates: the name is the content, so an
// existing template of ours is left alone and only a missing one is created. Create
// (not apply) makes the write fail if the name appeared meanwhile, so a template someone
// else made in that moment is never taken over either.
func (a *Applier) ensureTemplate(ctx context.Context, owner Owner, desired *unstructured.Unstructured) (Result, error) {
	what := describe(desired)
	live, err := a.get(ctx, desired)
	if err != nil {
		return Unchanged, fmt.Errorf("apply template %s: %w", what, err)
	}
	if live == nil {
		a.count(func(s *Stats) { s.Applies++ })
		err := a.client.Create(ctx, desired.DeepCopy(),
			client.FieldOwner(FieldManager), client.FieldValidation(metav1.FieldValidationStrict))
		if err == nil {
			return Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return Unchanged, fmt.Errorf("apply template %s: %w", what, err)
		}
		if live, err = a.get(ctx, desired); err != nil || live == nil {
			return Unchanged, fmt.Errorf("apply template %s: created concurrently, then unreadable: %v", what, err)
		}
	}
	if err := checkOurs(live, owner); err != nil {
		return Unchanged, fmt.Errorf("apply template %s: %w", what, err)
	}
	if live.GetDeletionTimestamp() != nil {
		// The MachineDeployment must not point at a template that is going away; the
		// caller retries once it is gone and creates it again.
		return Unchanged, fmt.Errorf("apply template %s: it is being deleted; retry when it is gone", what)
	}
	a.count(func(s *Stats) { s.Skipped++ })
	return Unchanged, nil
}

// get reads the live object of desired's kind and name; nil when there is none.
func (a *Applier) get(ctx context.Context, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	err := a.reader.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return live, nil
}

// checkOurs refuses a live object the operator did not create for this owner.
func checkOurs(live *unstructured.Unstructured, owner Owner) error {
	if live.GetLabels()[render.LabelManagedBy] != render.ManagedByValue {
		return fmt.Errorf("%w (label %s=%s missing); remove or rename it",
			ErrNotManaged, render.LabelManagedBy, render.ManagedByValue)
	}
	if ref := metav1.GetControllerOfNoCopy(live); ref != nil && ref.UID != owner.Object.GetUID() {
		return fmt.Errorf("%w: %s %s (uid %s), not %s %s (uid %s)", ErrOtherController,
			ref.Kind, ref.Name, ref.UID, owner.GVK.Kind, owner.Object.GetName(), owner.Object.GetUID())
	}
	return nil
}

// sameObject reports whether a dry-run result equals the live object, apart from what
// every apply changes: managedFields timestamps, and resourceVersion and generation,
// which a no-op apply leaves alone anyway.
func sameObject(dry, live *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		for _, f := range []string{"managedFields", "resourceVersion", "generation"} {
			unstructured.RemoveNestedField(c, "metadata", f)
		}
		return c
	}
	return apiequality.Semantic.DeepEqual(strip(dry), strip(live))
}

func describe(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}
