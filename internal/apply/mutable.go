// The rule for mutable objects (the MachineDeployment, the MachineHealthCheck):
// server-side apply, sent only when it would change something.

package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

// confirmation is a generation of an object at which a dry run of a body found it
// current, and the digest of its spec then (liveSpecSum; empty when it could not be
// computed, and then the confirmation holds at that generation only).
type confirmation struct {
	uid        types.UID
	generation int64
	body       string
	spec       string
}

// apply is the rule for mutable objects: create by apply when missing; otherwise a dry
// run, and a real apply only when the dry run differs from the live object. With a
// cache, decide looks at the cached object first and may leave it alone or send at once.
// It returns the server's copy when it wrote.
func (a *Applier) apply(ctx context.Context, owner Owner, desired *unstructured.Unstructured, sum digests) (Result, *unstructured.Unstructured, error) {
	what := describe(desired)
	key := objectKey{desired.GroupVersionKind().GroupKind(), desired.GetNamespace(), desired.GetName()}
	var cached cachedFacts
	if cur, ok := a.cachedObject(ctx, desired); ok && cur != nil {
		if err := checkOurs(cur, owner); err != nil {
			return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
		}
		cached = cachedFactsOf(cur, desired)
	}
	switch v := a.decideWith(key, cached, sum); v.decision {
	case skipApply:
		a.count(func(s *Stats) { s.Skipped++ })
		return Unchanged, nil, nil
	case sendApply:
		return a.send(ctx, key, desired, sum, v.generation, Updated)
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

	for attempt := 1; ; attempt++ {
		dry := stamped(desired, sum, live.GetGeneration())
		if err := a.patch(ctx, dry, true); err != nil {
			return Unchanged, nil, fmt.Errorf("apply %s (dry run): %w", what, err)
		}
		if sameObject(dry, live, desired) {
			a.count(func(s *Stats) { s.Skipped++ })
			a.confirm(key, live, desired, sum)
			return Unchanged, nil, nil
		}
		// The dry run answers for the object as the server holds it then, at the
		// resourceVersion it returns. Someone else may have changed it since the live
		// read (cluster-autoscaler its replicas): the dry run then differs from the read
		// in their fields, not ours, and the apply would be sent for nothing. So a
		// difference counts only against a read of the same state.
		if dry.GetResourceVersion() != live.GetResourceVersion() && attempt < maxDryRuns {
			if live, err = a.get(ctx, desired); err != nil {
				return Unchanged, nil, fmt.Errorf("apply %s: reading the live object again: %w", what, err)
			}
			if live == nil {
				return a.send(ctx, key, desired, sum, 1, Created)
			}
			if err := checkOurs(live, owner); err != nil {
				return Unchanged, nil, fmt.Errorf("apply %s: %w", what, err)
			}
			continue
		}
		return a.send(ctx, key, desired, sum, dry.GetGeneration(), Updated)
	}
}

// maxDryRuns bounds the dry runs of one apply of an object that others keep changing;
// after the last the comparison is made all the same, and at worst sends an apply that
// changes nothing of ours.
const maxDryRuns = 3

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
func (a *Applier) confirm(key objectKey, live, desired *unstructured.Unstructured, sum digests) {
	if a.cached == nil {
		return // only the cached path reads confirmations
	}
	if last, ok := readStamp(live); ok && last.generation == live.GetGeneration() && last.body == sum.body {
		return
	}
	var spec string
	if !sendsReplicas(desired) {
		spec = a.liveSpecSum(live)
	}
	a.mu.Lock()
	a.confirmed[key] = confirmation{uid: live.GetUID(), generation: live.GetGeneration(), body: sum.body, spec: spec}
	a.mu.Unlock()
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

// sameObject reports whether a dry-run result of desired equals the live object, apart
// from what every apply changes: managedFields timestamps, and resourceVersion and
// generation, which a no-op apply leaves alone anyway; and apart from what an apply of
// desired cannot change, which others change while the operator reads and dry-runs:
// the status (every mutable kind has a status subresource; Cluster API writes it), and
// spec.replicas when desired does not send it (cluster-autoscaler owns it then).
func sameObject(dry, live, desired *unstructured.Unstructured) bool {
	_, replicas, _ := unstructured.NestedFieldNoCopy(desired.Object, "spec", "replicas")
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		delete(c, "status")
		if !replicas {
			unstructured.RemoveNestedField(c, "spec", "replicas")
		}
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
