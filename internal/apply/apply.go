// Package apply writes the objects render computed to the API server, and nothing else:
// it does not decide what a pool looks like, it only makes the server agree.
//
// Two kinds of object, two rules:
//
//   - Mutable objects (the MachineDeployment, the MachineHealthCheck) are written by
//     server-side apply with one field manager, strict field validation and forced
//     ownership of the fields we send. A resync that would change nothing sends no
//     write (no new resourceVersion, no watch event, no reconcile storm): without a
//     cache, or when AnnotationApplied cannot tell (below), a dry-run apply comes first
//     and its result is compared with the live object.
//   - Immutable templates are named by a hash of their content (render writes
//     render.AnnotationTemplateHashVersion on them). A template of that name that exists
//     already has that content, so it is never written again; a change of content is a
//     new name, and the MachineDeployment rolls to it. DeleteSupersededTemplates removes
//     the old ones once no MachineSet uses them.
//
// Every object gets the managed-by label and a controller owner reference to its
// NodeGroup. An object of the desired name that lacks the label, or that another object
// controls, is never adopted or overwritten: Apply returns an error instead.
//
// A mutable object carries AnnotationApplied: digests of the body and of the spec last
// applied to it, and the generation that apply left it at. An Applier made with
// NewCached also reads an informer cache, so that a resync, and the first reconcile
// after a restart, send no request at all, not even a read or a dry run:
//
//   - a template the cache holds is not read again;
//   - a mutable object whose annotation names the desired body and its current
//     generation (the last apply sent this body, so no field we sent before and dropped
//     since is still ours; nobody changed the spec since) and whose labels, annotations
//     and owners hold ours is left alone: an apply would change nothing. Only metadata
//     is compared, so the cache may keep just that;
//   - one whose annotation names its current generation but that is otherwise not
//     left alone (another body, or labels, annotations or owners that no longer hold
//     ours) is applied without a dry run: its spec is as our last apply left it, so
//     the apply changes something, and the annotation's spec digest tells whether the
//     generation moves.
//
// Anything else goes the uncached way, with live reads and a dry run. A dry run that
// differs from the live object only in the generation of AnnotationApplied (someone
// else moved it: cluster-autoscaler scaled the MachineDeployment) is no reason to
// write; the Applier remembers that generation instead, so the next resync sends
// nothing either.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// AnnotationApplied is set on every mutable object the operator applies:
// "<body>/<spec>/<generation>", the SHA-256 of the applied body without this annotation
// (first 128 bits, hex) and of its spec (first 64 bits), and the metadata.generation
// the apply leaves the object at.
const AnnotationApplied = "nodegroup.io/applied"

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
	// Skipped counts objects left as they were: their annotation in the cache, a dry
	// run, or a dry run remembered for a scaled object showed no change; or the
	// immutable template exists already.
	Skipped int
	// Deletes counts superseded templates deleted.
	Deletes int
}

// Applier applies desired objects. It is safe for concurrent use.
type Applier struct {
	client client.Client
	reader client.Reader
	cached client.Reader

	mu    sync.Mutex
	stats Stats
	// confirmed holds the mutable objects whose generation someone else moved past
	// their AnnotationApplied, and which a dry run found current at that generation.
	confirmed map[objectKey]confirmation
}

type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

// confirmation is a generation of an object at which a dry run of a body found it
// current.
type confirmation struct {
	uid        types.UID
	generation int64
	body       string
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
	return &Applier{client: c, reader: reader, confirmed: map[objectKey]confirmation{}}
}

// NewCached is New with cached, an informer cache (a manager's GetCache()) that holds
// the mutable kinds as typed objects and the template kinds at least as metadata, each
// filtered to the managed-by label at most. See the package comment: reads of objects
// the cache holds go to it, and an object left as the last apply left it is not sent
// again. Superseded templates are looked for in the cache first, and only a candidate
// is checked live before it is deleted.
func NewCached(c client.Client, reader, cached client.Reader) *Applier {
	a := New(c, reader)
	a.cached = cached
	return a
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
	into *unstructured.Unstructured
}

// ServerCopy receives the object as the API server returned it when Apply wrote it
// (Created or Updated); it is left alone otherwise.
func ServerCopy(into *unstructured.Unstructured) Option { return func(o *options) { o.into = into } }

// Apply makes the server hold obj, owned by owner. obj is not modified; its TypeMeta
// must name its kind (render sets it). See the package comment for the two rules.
func (a *Applier) Apply(ctx context.Context, owner Owner, obj client.Object, opts ...Option) (Result, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	desired, sum, err := desiredObject(owner, obj)
	if err != nil {
		return Unchanged, err
	}
	var (
		result Result
		sent   *unstructured.Unstructured
	)
	if isTemplate(obj) {
		result, sent, err = a.ensureTemplate(ctx, owner, desired)
	} else {
		result, sent, err = a.apply(ctx, owner, desired, sum)
	}
	if err == nil && sent != nil && o.into != nil {
		*o.into = *sent
	}
	return result, err
}

// Desired is the body Apply sends for obj owned by owner: obj without server-set
// metadata and status, with the managed-by label and the owner's controller reference.
// Benchmarks use it to send exactly the operator's objects with another client.
// A mutable object carries AnnotationApplied as its create leaves it.
func Desired(owner Owner, obj client.Object) (*unstructured.Unstructured, error) {
	u, sum, err := desiredObject(owner, obj)
	if err != nil || isTemplate(obj) {
		return u, err
	}
	return stamped(u, sum, 1), nil
}

// digests are the digests of a desired body and of its spec.
type digests struct{ body, spec string }

// isTemplate: render named obj after its content.
func isTemplate(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[render.AnnotationTemplateHashVersion]
	return ok
}

// desiredObject is obj as the unstructured apply configuration we send, without
// AnnotationApplied (see stamped), and the digests of that body and its spec. Only what
// render set goes in, plus our label and owner reference: the typed-to-unstructured
// conversion would otherwise send `creationTimestamp: null` and an empty status, and
// claim them.
func desiredObject(owner Owner, obj client.Object) (*unstructured.Unstructured, digests, error) {
	u, err := desiredBody(owner, obj)
	if err != nil {
		return nil, digests{}, err
	}
	if annotations := u.GetAnnotations(); annotations != nil {
		delete(annotations, AnnotationApplied)
		u.SetAnnotations(annotations)
	}
	body, err := digest(u.Object, 16)
	if err != nil {
		return nil, digests{}, err
	}
	spec, err := digest(u.Object["spec"], 8)
	return u, digests{body, spec}, err
}

// stamped is a copy of desired with AnnotationApplied for its digests and the
// generation the apply is to leave the object at.
func stamped(desired *unstructured.Unstructured, sum digests, generation int64) *unstructured.Unstructured {
	u := desired.DeepCopy()
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationApplied] = sum.body + "/" + sum.spec + "/" + strconv.FormatInt(generation, 10)
	u.SetAnnotations(annotations)
	return u
}

// appliedStamp is AnnotationApplied read back.
type appliedStamp struct {
	digests
	generation int64
}

func readStamp(obj metav1.Object) (appliedStamp, bool) {
	parts := strings.Split(obj.GetAnnotations()[AnnotationApplied], "/")
	if len(parts) != 3 {
		return appliedStamp{}, false
	}
	generation, err := strconv.ParseInt(parts[2], 10, 64)
	return appliedStamp{digests{parts[0], parts[1]}, generation}, err == nil
}

func desiredBody(owner Owner, obj client.Object) (*unstructured.Unstructured, error) {
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
	u.SetOwnerReferences(append(refs, *metav1.NewControllerRef(owner.Object, owner.GVK)))
	return u, nil
}

func isMachineDeployment(gvk schema.GroupVersionKind) bool {
	return gvk.Group == clusterv1.GroupVersion.Group && gvk.Kind == "MachineDeployment"
}

// apply is the rule for mutable objects: create by apply when missing; otherwise a dry
// run, and a real apply only when the dry run differs from the live object. With a
// cache, the cached object's AnnotationApplied decides first (see the package comment).
// It returns the server's copy when it wrote.
func (a *Applier) apply(ctx context.Context, owner Owner, desired *unstructured.Unstructured, sum digests) (Result, *unstructured.Unstructured, error) {
	what := describe(desired)
	key := objectKey{desired.GroupVersionKind().GroupKind(), desired.GetNamespace(), desired.GetName()}
	if cur, ok := a.cachedObject(ctx, desired); ok && cur != nil {
		if err := checkOurs(cur, owner); err != nil {
			return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
		}
		last, hasStamp := readStamp(cur)
		current := hasStamp && last.generation == cur.GetGeneration()
		switch {
		case current && last.body == sum.body && holdsOurs(cur, desired),
			a.isConfirmed(key, cur, sum) && holdsOurs(cur, desired):
			a.count(func(s *Stats) { s.Skipped++ })
			return Unchanged, nil, nil
		case current:
			// The spec is as our last apply left it and the body differs: the apply
			// changes something, and a changed spec is one more generation.
			generation := cur.GetGeneration()
			if last.spec != sum.spec {
				generation++
			}
			return a.send(ctx, key, desired, sum, generation, Updated)
		}
	}

	live, err := a.get(ctx, desired)
	if err != nil {
		return Unchanged, nil, fmt.Errorf("apply %s: reading the live object: %w", what, err)
	}
	if live == nil {
		return a.send(ctx, key, desired, sum, 1, Created)
	}
	if err := checkOurs(live, owner); err != nil {
		return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
	}

	dry := stamped(desired, sum, live.GetGeneration())
	if err := a.patch(ctx, dry, true); err != nil {
		return Unchanged, nil, fmt.Errorf("apply %s (dry run): %w", what, err)
	}
	if sameObject(dry, live) {
		a.count(func(s *Stats) { s.Skipped++ })
		a.confirm(key, live, sum)
		return Unchanged, nil, nil
	}
	return a.send(ctx, key, desired, sum, dry.GetGeneration(), Updated)
}

// send applies desired, stamped with the generation it is to leave the object at.
func (a *Applier) send(ctx context.Context, key objectKey, desired *unstructured.Unstructured, sum digests, generation int64, result Result) (Result, *unstructured.Unstructured, error) {
	sent := stamped(desired, sum, generation)
	if err := a.patch(ctx, sent, false); err != nil {
		return Unchanged, nil, fmt.Errorf("apply %s: %w", describe(desired), err)
	}
	a.mu.Lock()
	delete(a.confirmed, key)
	a.mu.Unlock()
	return result, sent, nil
}

// confirm remembers that a dry run of the body found live current at its generation,
// when its annotation does not say so itself.
func (a *Applier) confirm(key objectKey, live metav1.Object, sum digests) {
	if a.cached == nil {
		return // only the cached path reads confirmations
	}
	if last, ok := readStamp(live); ok && last.generation == live.GetGeneration() && last.body == sum.body {
		return
	}
	a.mu.Lock()
	a.confirmed[key] = confirmation{uid: live.GetUID(), generation: live.GetGeneration(), body: sum.body}
	a.mu.Unlock()
}

func (a *Applier) isConfirmed(key objectKey, cur metav1.Object, sum digests) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.confirmed[key]
	if !ok {
		return false
	}
	if c.uid != cur.GetUID() || c.generation != cur.GetGeneration() {
		delete(a.confirmed, key) // the object moved on; the confirmation never holds again
		return false
	}
	return c.body == sum.body
}

// cachedObject reads desired's live object from the cache as a typed object; ok is
// false when there is no cache or it cannot answer (a kind the scheme does not know),
// and the object is nil when the cache does not hold it (it may still exist: an
// object without our label is not cached, and the cache may lag).
func (a *Applier) cachedObject(ctx context.Context, desired *unstructured.Unstructured) (client.Object, bool) {
	if a.cached == nil {
		return nil, false
	}
	ro, err := a.client.Scheme().New(desired.GroupVersionKind())
	if err != nil {
		return nil, false
	}
	obj, ok := ro.(client.Object)
	if !ok {
		return nil, false
	}
	if found, known := a.fromCache(ctx, desired, obj); !found {
		return nil, known
	}
	return obj, true
}

// fromCache reads desired's object from the cache into obj: found when the cache holds
// it, known when the cache could answer at all.
func (a *Applier) fromCache(ctx context.Context, desired *unstructured.Unstructured, obj client.Object) (found, known bool) {
	switch err := a.cached.Get(ctx, client.ObjectKeyFromObject(desired), obj); {
	case err == nil:
		return true, true
	case apierrors.IsNotFound(err):
		return false, true
	}
	return false, false
}

// Forget drops what the Applier remembers of the mutable objects named name in
// namespace (of any kind): call it when they are deleted.
func (a *Applier) Forget(namespace, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.confirmed {
		if key.namespace == namespace && key.name == name {
			delete(a.confirmed, key)
		}
	}
}

// holdsOurs reports whether live's labels, annotations and owner references hold the
// desired ones (AnnotationApplied is compared by the caller).
func holdsOurs(live metav1.Object, desired *unstructured.Unstructured) bool {
	holds := func(live, want map[string]string) bool {
		for k, v := range want {
			if lv, ok := live[k]; !ok || lv != v {
				return false
			}
		}
		return true
	}
	if !holds(live.GetLabels(), desired.GetLabels()) || !holds(live.GetAnnotations(), desired.GetAnnotations()) {
		return false
	}
	for _, want := range desired.GetOwnerReferences() {
		if !slices.ContainsFunc(live.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
			return apiequality.Semantic.DeepEqual(r, want)
		}) {
			return false
		}
	}
	return true
}

// digest is the first n bytes of the SHA-256 of v's JSON, in hex (maps are marshalled
// in key order, so equal values give equal digests).
func digest(v any, n int) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:n]), nil
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
// else made in that moment is never taken over either. With a cache, a template the
// cache holds is not read again, and one it lacks is created without a read first.
func (a *Applier) ensureTemplate(ctx context.Context, owner Owner, desired *unstructured.Unstructured) (Result, *unstructured.Unstructured, error) {
	what := describe(desired)
	live, known := a.cachedMetadata(ctx, desired)
	if !known {
		u, err := a.get(ctx, desired)
		if err != nil {
			return Unchanged, nil, fmt.Errorf("apply template %s: %w", what, err)
		}
		if u != nil {
			live = u
		}
	}
	if live == nil {
		a.count(func(s *Stats) { s.Applies++ })
		sent := desired.DeepCopy()
		err := a.client.Create(ctx, sent, client.FieldOwner(FieldManager), client.FieldValidation(metav1.FieldValidationStrict))
		if err == nil {
			return Created, sent, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return Unchanged, nil, fmt.Errorf("apply template %s: %w", what, err)
		}
		u, err := a.get(ctx, desired)
		if err != nil || u == nil {
			return Unchanged, nil, fmt.Errorf("apply template %s: created concurrently, then unreadable: %v", what, err)
		}
		live = u
	}
	if err := checkOurs(live, owner); err != nil {
		return Unchanged, nil, fmt.Errorf("apply template %s: %w", what, err)
	}
	if live.GetDeletionTimestamp() != nil {
		// The MachineDeployment must not point at a template that is going away; the
		// caller retries once it is gone and creates it again.
		return Unchanged, nil, fmt.Errorf("apply template %s: it is being deleted; retry when it is gone", what)
	}
	a.count(func(s *Stats) { s.Skipped++ })
	return Unchanged, nil, nil
}

// cachedMetadata reads desired's live metadata from the cache; known is false when
// there is no cache or it cannot answer, and the object is nil when the cache does not
// hold it.
func (a *Applier) cachedMetadata(ctx context.Context, desired *unstructured.Unstructured) (obj metav1.Object, known bool) {
	if a.cached == nil {
		return nil, false
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(desired.GroupVersionKind())
	if found, known := a.fromCache(ctx, desired, m); !found {
		return nil, known
	}
	return m, true
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
func checkOurs(live metav1.Object, owner Owner) error {
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
		// The generation in our annotation moves with changes that are not ours (a
		// scale); it is written with the next change of ours, not for itself.
		if v, ok, _ := unstructured.NestedString(c, "metadata", "annotations", AnnotationApplied); ok {
			if i := strings.LastIndexByte(v, '/'); i >= 0 {
				_ = unstructured.SetNestedField(c, v[:i], "metadata", "annotations", AnnotationApplied)
			}
		}
		return c
	}
	return apiequality.Semantic.DeepEqual(strip(dry), strip(live))
}

func describe(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}
