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
//
// A mutable object carries AnnotationApplied: the digest of the body last applied to it
// and the generation that apply left it at. An Applier made with NewCached also reads an
// informer cache, so that a resync, and the first reconcile after a restart, send no
// request at all, not even a read or a dry run:
//
//   - a template the cache holds is not read again;
//   - a mutable object is left alone when the cache shows it exactly as the last write
//     or dry run of this process left it (same UID, generation, labels, annotations,
//     owners) and the desired body is the one sent then: any change by someone else to
//     the spec bumps the generation, and to the metadata changes the metadata;
//   - otherwise it is left alone when its annotation names the desired body's digest
//     and its current generation (so the last apply sent this body, and nobody changed
//     the spec since) and its labels, annotations and owners hold ours: an apply would
//     change nothing. Only metadata is compared, so the cache may keep just that.
//
// Anything else goes the uncached way, with live reads and a dry run; a dry run that
// differs from the live object only in the generation of AnnotationApplied (someone
// scaled the MachineDeployment) is no reason to write.
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
// "<digest>/<generation>", the SHA-256 (first 128 bits, hex) of the applied body without
// this annotation, and the metadata.generation the apply leaves the object at.
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
	cached client.Reader

	mu    sync.Mutex
	stats Stats
	// settled remembers, per mutable object, its state after the last write or the last
	// dry run that showed no change, and the desired body's digest then.
	settled map[string]settledState
}

// settledState is an object as a write or dry run left it, and the digests of the body
// and of its spec that left it so.
type settledState struct {
	live         liveState
	digest, spec [sha256.Size]byte
}

// liveState is what any change of a live object's spec or metadata changes.
type liveState struct {
	uid        types.UID
	generation int64
	meta       [sha256.Size]byte
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
	return &Applier{client: c, reader: reader, settled: map[string]settledState{}}
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
	immutable bool
	into      *unstructured.Unstructured
}

// Immutable treats the object as a content-named template even without
// render.AnnotationTemplateHashVersion: created when missing, never written otherwise.
func Immutable() Option { return func(o *options) { o.immutable = true } }

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
	immutable := o.immutable || isTemplate(obj)
	desired, sum, err := desiredObject(owner, obj)
	if err != nil {
		return Unchanged, err
	}
	var (
		result Result
		sent   *unstructured.Unstructured
	)
	if immutable {
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

// isTemplate: render named obj after its content.
func isTemplate(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[render.AnnotationTemplateHashVersion]
	return ok
}

// desiredObject is obj as the unstructured apply configuration we send, without
// AnnotationApplied (see stamped), and the digest of that body. Only what render set
// goes in, plus our label and owner reference: the typed-to-unstructured conversion
// would otherwise send `creationTimestamp: null` and an empty status, and claim them.
func desiredObject(owner Owner, obj client.Object) (*unstructured.Unstructured, [sha256.Size]byte, error) {
	u, err := desiredBody(owner, obj)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	if annotations := u.GetAnnotations(); annotations != nil {
		delete(annotations, AnnotationApplied)
		u.SetAnnotations(annotations)
	}
	sum, err := digest(u.Object)
	return u, sum, err
}

// stamped is a copy of desired with AnnotationApplied for its digest sum and the
// generation the apply is to leave the object at.
func stamped(desired *unstructured.Unstructured, sum [sha256.Size]byte, generation int64) *unstructured.Unstructured {
	u := desired.DeepCopy()
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationApplied] = stamp(sum, generation)
	u.SetAnnotations(annotations)
	return u
}

func stamp(sum [sha256.Size]byte, generation int64) string {
	return hex.EncodeToString(sum[:16]) + "/" + strconv.FormatInt(generation, 10)
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
// run, and a real apply only when the dry run differs from the live object. With a
// cache, an object the cache shows as the last write or dry run left it is skipped, and
// one that only our desired body changed since is applied without a dry run. It returns
// the server's copy when it wrote.
func (a *Applier) apply(ctx context.Context, owner Owner, desired *unstructured.Unstructured, sum [sha256.Size]byte) (Result, *unstructured.Unstructured, error) {
	what := describe(desired)
	key := settledKey(desired)
	spec, err := digest(desired.Object["spec"])
	if err != nil {
		return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
	}
	if cur, ok := a.cachedObject(ctx, desired); ok && cur != nil {
		if err := checkOurs(cur, owner); err != nil {
			return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
		}
		state, err := liveStateOf(cur)
		if err != nil {
			return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
		}
		switch last, ok := a.lastSettled(key); {
		case ok && last.live == state && last.digest == sum:
			a.count(func(s *Stats) { s.Skipped++ })
			return Unchanged, nil, nil
		case ok && last.live == state:
			// Only our desired body changed since our last write: a dry run would only
			// say what we know, and a changed spec is one more generation.
			generation := cur.GetGeneration()
			if spec != last.spec {
				generation++
			}
			sent := stamped(desired, sum, generation)
			if err := a.patch(ctx, sent, false); err != nil {
				return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
			}
			return Updated, sent, a.settle(key, sent, sum, spec)
		case appliedAs(cur, desired, sum):
			a.count(func(s *Stats) { s.Skipped++ })
			return Unchanged, nil, a.settle(key, cur, sum, spec)
		}
	}

	live, err := a.get(ctx, desired)
	if err != nil {
		return Unchanged, nil, fmt.Errorf("apply %s: reading the live object: %w", what, err)
	}
	if live == nil {
		sent := stamped(desired, sum, 1)
		if err := a.patch(ctx, sent, false); err != nil {
			return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
		}
		return Created, sent, a.settle(key, sent, sum, spec)
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
		return Unchanged, nil, a.settle(key, live, sum, spec)
	}
	sent := stamped(desired, sum, dry.GetGeneration())
	if err := a.patch(ctx, sent, false); err != nil {
		return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
	}
	return Updated, sent, a.settle(key, sent, sum, spec)
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
	switch err := a.cached.Get(ctx, client.ObjectKeyFromObject(desired), obj); {
	case err == nil:
		return obj, true
	case apierrors.IsNotFound(err):
		return nil, true
	}
	return nil, false
}

func (a *Applier) lastSettled(key string) (settledState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.settled[key]
	return s, ok
}

// settle remembers obj (the server's copy after a write, or the live object a dry run
// matched) as the state the desired body with digest sum (spec: of its spec) leaves.
func (a *Applier) settle(key string, obj metav1.Object, sum, spec [sha256.Size]byte) error {
	state, err := liveStateOf(obj)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.settled[key] = settledState{live: state, digest: sum, spec: spec}
	a.mu.Unlock()
	return nil
}

// Forget drops what the Applier remembers of the mutable objects named name in
// namespace (of any kind): call it when they are deleted, so the memory does not grow.
func (a *Applier) Forget(namespace, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.settled {
		if strings.HasSuffix(key, " "+namespace+"/"+name) {
			delete(a.settled, key)
		}
	}
}

func settledKey(u *unstructured.Unstructured) string {
	return u.GroupVersionKind().GroupKind().String() + " " + u.GetNamespace() + "/" + u.GetName()
}

// appliedAs reports whether an apply of desired (whose digest is sum) to live would
// change nothing, from live's metadata alone: its AnnotationApplied names this digest
// (the last body applied was this one, so no field we sent before and dropped since is
// still ours) and its current generation (nobody changed the spec since), and its
// labels, annotations and owner references hold ours.
func appliedAs(live metav1.Object, desired *unstructured.Unstructured, sum [sha256.Size]byte) bool {
	if live.GetAnnotations()[AnnotationApplied] != stamp(sum, live.GetGeneration()) {
		return false
	}
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

// liveStateOf is what identifies an object's spec and metadata version.
func liveStateOf(obj metav1.Object) (liveState, error) {
	meta, err := digest(struct {
		Labels      map[string]string       `json:"l"`
		Annotations map[string]string       `json:"a"`
		Owners      []metav1.OwnerReference `json:"o"`
		Finalizers  []string                `json:"f"`
		Deleting    bool                    `json:"d"`
	}{obj.GetLabels(), obj.GetAnnotations(), obj.GetOwnerReferences(), obj.GetFinalizers(), obj.GetDeletionTimestamp() != nil})
	return liveState{uid: obj.GetUID(), generation: obj.GetGeneration(), meta: meta}, err
}

// digest is the SHA-256 of v's JSON (maps in key order, so equal values give equal sums).
func digest(v any) ([sha256.Size]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
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
	switch err := a.cached.Get(ctx, client.ObjectKeyFromObject(desired), m); {
	case err == nil:
		return m, true
	case apierrors.IsNotFound(err):
		return nil, true
	}
	return nil, false
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
			digest, _, _ := strings.Cut(v, "/")
			_ = unstructured.SetNestedField(c, digest, "metadata", "annotations", AnnotationApplied)
		}
		return c
	}
	return apiequality.Semantic.DeepEqual(strip(dry), strip(live))
}

func describe(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}
