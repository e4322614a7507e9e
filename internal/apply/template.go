// The rule for immutable templates: created once under a name that is their content,
// never written again. DeleteSupersededTemplates (prune.go) removes the old ones.

package apply

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// isTemplate: render named obj after its content.
func isTemplate(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[names.AnnotationTemplateHashVersion]
	return ok
}

// ensureTemplate is the rule for immutable templates: the name is the content, so an
// existing template of ours is left alone and only a missing one is created (again,
// when someone deleted it: the same name and content). One whose spec someone changed
// since it was created is left alone too, and reported as Modified. Create
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
			metrics.TemplateCreated(desired.GetKind())
			return Created, sent, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return Unchanged, nil, fmt.Errorf("apply template %s: %w", what, err)
		}
		u, err := a.get(ctx, desired)
		if err != nil || u == nil {
			return Unchanged, nil, fmt.Errorf("apply template %s: created concurrently, then unreadable: %w", what, err)
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
	if live.GetGeneration() > 1 {
		return Modified, nil, nil
	}
	return Unchanged, nil, nil
}

// cachedMetadata reads desired's live metadata from the cache (with its generation:
// operator.CacheOptions keeps it of templates); known is false when
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
