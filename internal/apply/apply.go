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
//     names.AnnotationTemplateHashVersion on them). A template of that name that exists
//     already has that content, so it is never written again; a change of content is a
//     new name, and the MachineDeployment rolls to it. DeleteSupersededTemplates removes
//     the old ones once no MachineSet uses them. One someone else changed (its
//     generation moved past 1) is not written back either: Apply says Modified.
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
// nothing either, and with it a digest of the spec then (internal/cachedspec, which the
// operator's cache computes as each object arrives, before it trims the spec): a later
// scale, which leaves that digest as it was, sends nothing too, so an autoscaler's
// churn costs the operator no request. Nor is what others change between the read and
// the dry run: the status and a spec.replicas the body does not send are not compared,
// and any other difference counts only against a read at the dry run's
// resourceVersion.
package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
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
	// Modified: the immutable template exists, and someone else changed its spec after
	// it was created (its metadata.generation is past 1). Nothing was written: the name
	// no longer says the content, but writing the content back would fight the other
	// writer, so the caller reports it instead.
	Modified
)

func (r Result) String() string {
	switch r {
	case Unchanged:
		return "Unchanged"
	case Created:
		return "Created"
	case Updated:
		return "Updated"
	case Modified:
		return "Modified"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

var (
	// ErrNotManaged: an object of the desired name exists without the managed-by label,
	// so someone else created it. The operator never adopts or overwrites it.
	ErrNotManaged = errors.New("exists and is not managed by " + names.ManagedByValue)
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

// checkOurs refuses a live object the operator did not create for this owner.
func checkOurs(live metav1.Object, owner Owner) error {
	if live.GetLabels()[names.LabelManagedBy] != names.ManagedByValue {
		return fmt.Errorf("%w (label %s=%s missing); remove or rename it",
			ErrNotManaged, names.LabelManagedBy, names.ManagedByValue)
	}
	if ref := metav1.GetControllerOfNoCopy(live); ref != nil && ref.UID != owner.Object.GetUID() {
		return fmt.Errorf("%w: %s %s (uid %s), not %s %s (uid %s)", ErrOtherController,
			ref.Kind, ref.Name, ref.UID, owner.GVK.Kind, owner.Object.GetName(), owner.Object.GetUID())
	}
	return nil
}

func describe(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}
