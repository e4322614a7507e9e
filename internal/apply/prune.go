package apply

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// templateRef is a template a MachineDeployment or MachineSet points at.
type templateRef struct {
	gk   schema.GroupKind
	name string
}

// DeleteSupersededTemplates deletes the pool's templates that nothing uses any more and
// returns their names, sorted.
//
// It lists, in namespace only, the templates of each of kinds that carry both the pool
// label (names.LabelPool=pool, the label value render writes) and the managed-by label.
// A template is kept when it is the current one for its kind (keep), when the live
// MachineDeployment mdName points at it (the apply of a new template name may not have
// happened yet), or when any MachineSet in the namespace points at it: a MachineSet
// still creating or remediating machines needs its templates, and Cluster API rolls old
// MachineSets down before it deletes them. Any MachineSet, not only those labelled
// cluster.x-k8s.io/deployment-name=mdName, so that a relabelled or orphaned MachineSet
// also keeps its templates; the namespace is the templates' own scope anyway.
//
// Nothing without the managed-by label is ever deleted, and each delete is conditional
// on the UID listed, so a template deleted and recreated meanwhile is left alone.
func (a *Applier) DeleteSupersededTemplates(ctx context.Context, namespace, pool, mdName string,
	keep map[schema.GroupKind]string, kinds ...schema.GroupVersionKind) ([]string, error) {
	if namespace == "" || pool == "" {
		return nil, fmt.Errorf("delete superseded templates: namespace and pool are required")
	}
	if known, found := a.cachedCandidates(ctx, namespace, pool, mdName, keep, kinds); known && !found {
		return nil, nil
	}
	inUse, err := templatesInUse(ctx, a.reader, namespace, mdName, keep)
	if err != nil {
		return nil, fmt.Errorf("delete superseded templates: %w", err)
	}

	selector := client.MatchingLabels{names.LabelPool: pool, names.LabelManagedBy: names.ManagedByValue}
	var deleted []string
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := a.reader.List(ctx, list, client.InNamespace(namespace), selector); err != nil {
			return deleted, fmt.Errorf("delete superseded templates: listing %s in %s: %w", gvk.Kind, namespace, err)
		}
		for i := range list.Items {
			t := &list.Items[i]
			if inUse[templateRef{gvk.GroupKind(), t.GetName()}] || t.GetDeletionTimestamp() != nil ||
				t.GetNamespace() != namespace || t.GetLabels()[names.LabelManagedBy] != names.ManagedByValue {
				continue
			}
			t.SetGroupVersionKind(gvk)
			a.count(func(s *Stats) { s.Deletes++ })
			err := a.client.Delete(ctx, t, client.Preconditions{UID: new(t.GetUID())})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return deleted, fmt.Errorf("delete superseded template %s %s/%s: %w", gvk.Kind, namespace, t.GetName(), err)
			}
			metrics.TemplateDeleted(gvk.Kind)
			deleted = append(deleted, t.GetName())
		}
	}
	sort.Strings(deleted)
	return deleted, nil
}

// cachedCandidates looks in the cache for templates of the pool that nothing it holds
// uses: not kept, not named by the cached MachineDeployment mdName or by a cached
// MachineSet of the namespace. Without one there is nothing to delete and nothing to
// read live; with one, the live reads decide. known is false when there is no cache or
// it cannot answer.
func (a *Applier) cachedCandidates(ctx context.Context, namespace, pool, mdName string,
	keep map[schema.GroupKind]string, kinds []schema.GroupVersionKind) (known, found bool) {
	if a.cached == nil {
		return false, false
	}
	var candidates []templateRef
	for _, gvk := range kinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := a.cached.List(ctx, list, client.InNamespace(namespace),
			client.MatchingLabels{names.LabelPool: pool, names.LabelManagedBy: names.ManagedByValue}); err != nil {
			return false, false
		}
		for i := range list.Items {
			if name := list.Items[i].Name; keep[gvk.GroupKind()] != name && list.Items[i].DeletionTimestamp == nil {
				ref := templateRef{gvk.GroupKind(), name}
				candidates = append(candidates, ref)
			}
		}
	}
	if len(candidates) == 0 {
		return true, false
	}
	inUse, err := templatesInUse(ctx, a.cached, namespace, mdName, keep)
	if err != nil {
		return false, false
	}
	for _, ref := range candidates {
		if !inUse[ref] {
			return true, true
		}
	}
	return true, false
}

// templatesInUse are the templates kept, and those the MachineDeployment mdName (when
// it exists) and every MachineSet of the namespace point at, as reader sees them.
func templatesInUse(ctx context.Context, reader client.Reader, namespace, mdName string, keep map[schema.GroupKind]string) (map[templateRef]bool, error) {
	inUse := map[templateRef]bool{}
	for gk, name := range keep {
		inUse[templateRef{gk, name}] = true
	}
	if mdName != "" {
		md := &clusterv1.MachineDeployment{}
		switch err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: mdName}, md); {
		case err == nil:
			addRefs(inUse, md.Spec.Template.Spec)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading MachineDeployment %s/%s: %w", namespace, mdName, err)
		}
	}
	sets := &clusterv1.MachineSetList{}
	if err := reader.List(ctx, sets, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing MachineSets in %s: %w", namespace, err)
	}
	for i := range sets.Items {
		addRefs(inUse, sets.Items[i].Spec.Template.Spec)
	}
	return inUse, nil
}

// addRefs records the templates a machine template points at.
func addRefs(inUse map[templateRef]bool, spec clusterv1.MachineSpec) {
	for _, ref := range []clusterv1.ContractVersionedObjectReference{spec.Bootstrap.ConfigRef, spec.InfrastructureRef} {
		if ref.Name != "" {
			inUse[templateRef{schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}, ref.Name}] = true
		}
	}
}
