// Package customresource does to a custom resource what the API server does before its
// admission webhooks, from the CRD the chart ships and with the API server's own
// libraries (k8s.io/apiextensions-apiserver): it drops and reports fields the schema does
// not declare (as a strict client's request is refused), applies the schema's defaults,
// and validates the object against the OpenAPI schema, the list and map invariants, the
// metadata and the x-kubernetes-validations rules, transition rules included when an old
// object is given. Its errors are the API server's, word for word.
//
// It is for the kubectl plugin; the operator binary does not import it (the API server
// does this work for the operator).
package customresource

import (
	"context"
	"fmt"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/charts"
)

// Kind is one served version of a CRD, ready to default and validate objects. It calls
// what k8s.io/apiextensions-apiserver/pkg/registry/customresource's strategy calls, in
// the same order, without that package (which links the etcd client).
type Kind struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	hasStatus  bool
	structural *structuralschema.Structural
	validator  validation.SchemaValidator
	cel        *cel.Validator
}

// NodeGroup is the NodeGroup kind of the CRD embedded from the chart.
func NodeGroup() (*Kind, error) {
	kinds, err := Chart()
	if err != nil {
		return nil, err
	}
	gk := schema.GroupKind{Group: "nodegroup.io", Kind: "NodeGroup"}
	if kinds[gk] == nil {
		return nil, fmt.Errorf("the chart has no CRD of %s", gk)
	}
	return kinds[gk], nil
}

// Defaulter applies to an object the defaults of its CRD among kinds, as the API server
// does to what it stores; objects of other kinds are left as they are.
func Defaulter(kinds map[schema.GroupKind]*Kind) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		if k := kinds[u.GroupVersionKind().GroupKind()]; k != nil {
			k.Default(u)
		}
	}
}

// Admitter answers for an object what the API server answers to its create when it is of
// a kind among kinds (the object is not changed); objects of other kinds are admitted.
func Admitter(ctx context.Context, kinds map[schema.GroupKind]*Kind) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		if k := kinds[u.GroupVersionKind().GroupKind()]; k != nil {
			return k.Create(ctx, u.DeepCopy())
		}
		return nil
	}
}

// Chart are the kinds of the CRDs the chart ships (embedded), by group and kind, each at
// its storage version. They are loaded once (the CEL rules compile then) and shared:
// a Kind is not changed by use.
func Chart() (map[schema.GroupKind]*Kind, error) { return chart() }

var chart = sync.OnceValues(loadChart)

func loadChart() (map[schema.GroupKind]*Kind, error) {
	files, err := charts.CRDs()
	if err != nil {
		return nil, err
	}
	kinds := make(map[schema.GroupKind]*Kind, len(files))
	for name, b := range files {
		k, err := Load(b, "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		kinds[k.gvk.GroupKind()] = k
	}
	return kinds, nil
}

// Load reads a CRD (YAML) and prepares the version it serves of that name (its storage
// version when version is empty) as the API server does.
func Load(crdYAML []byte, version string) (*Kind, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		return nil, fmt.Errorf("CRD: %w", err)
	}
	return FromCRD(crd, version)
}

// FromCRD prepares the version crd serves of that name (its storage version when version
// is empty) as the API server does.
func FromCRD(crd *apiextensionsv1.CustomResourceDefinition, version string) (*Kind, error) {
	for _, v := range crd.Spec.Versions {
		if (version == "" && !v.Storage) || (version != "" && v.Name != version) {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("CRD %s: version %s has no schema", crd.Name, v.Name)
		}
		internal := &apiextensionsinternal.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		structural, err := structuralschema.NewStructural(internal)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		validator, _, err := validation.NewSchemaValidator(internal)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		return &Kind{
			gvk:        schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind},
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			hasStatus:  v.Subresources != nil && v.Subresources.Status != nil,
			structural: structural,
			validator:  validator,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}, nil
	}
	return nil, fmt.Errorf("CRD %s: no version %q", crd.Name, version)
}

// GroupVersionKind is the kind's group, storage version and name.
func (k *Kind) GroupVersionKind() schema.GroupVersionKind { return k.gvk }

// Create prepares obj as the API server would store it on a create (unknown fields
// refused, defaults applied, status dropped) and validates it. The error is what the
// API server answers: BadRequest for unknown fields, Invalid with every field error.
func (k *Kind) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := k.decode(obj); err != nil {
		return err
	}
	if k.hasStatus {
		delete(obj.Object, "status")
	}
	if errs := k.validateTypeMeta(obj); len(errs) > 0 {
		return k.invalid(obj, errs)
	}
	meta, errs := objectMeta(obj)
	if meta != nil {
		errs = append(errs, metavalidation.ValidateObjectMetaAccessor(meta, k.namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	}
	errs = append(errs, validation.ValidateCustomResource(nil, obj.Object, k.validator)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj.Object, k.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, k.structural, obj.Object)...)
	errs = append(errs, k.celRules(ctx, errs, obj.Object, nil)...)
	return k.invalid(obj, errs)
}

// Update is Create for an update of old, which is taken as stored (defaulted): rules
// compare obj with it, and a value that was already invalid in old is let be
// (validation ratcheting, on by default in the API server). An obj without a
// resourceVersion is applied over old, as kubectl apply does, and takes old's.
func (k *Kind) Update(ctx context.Context, obj, old *unstructured.Unstructured) error {
	if err := k.decode(obj); err != nil {
		return err
	}
	if obj.GetResourceVersion() == "" {
		obj.SetResourceVersion(old.GetResourceVersion())
	}
	// What a client does not set on an update (rest.BeforeUpdate): the system's fields
	// of the stored object.
	obj.SetUID(old.GetUID())
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetGeneration(old.GetGeneration())
	obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	if k.hasStatus {
		if status, ok := old.Object["status"]; ok {
			obj.Object["status"] = status
		} else {
			delete(obj.Object, "status")
		}
	}
	if errs := k.validateTypeMeta(obj); len(errs) > 0 {
		return k.invalid(obj, errs)
	}
	meta, errs := objectMeta(obj)
	oldMeta, oldErrs := objectMeta(old)
	errs = append(errs, oldErrs...)
	if meta != nil && oldMeta != nil {
		errs = append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(meta, oldMeta, field.NewPath("metadata"))...)
	}
	correlated := common.NewCorrelatedObject(obj.Object, old.Object, &model.Structural{Structural: k.structural})
	errs = append(errs, validation.ValidateCustomResourceUpdate(nil, obj.Object, old.Object, k.validator, validation.WithRatcheting(correlated))...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj.Object, k.structural, false)...)
	if oldErrs := structurallisttype.ValidateListSetsAndMaps(nil, k.structural, old.Object); len(oldErrs) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, k.structural, obj.Object)...)
	}
	errs = append(errs, k.celRules(ctx, errs, obj.Object, old.Object, cel.WithRatcheting(correlated))...)
	return k.invalid(obj, errs)
}

// Default applies the schema's defaults to obj, as the API server does when it decodes
// a request or reads a stored object.
func (k *Kind) Default(obj *unstructured.Unstructured) {
	structuraldefaulting.Default(obj.Object, k.structural)
}

// decode is what the API server's decoder does to a request body of the kind: fields
// the schema does not declare are refused (kubectl asks for strict field validation),
// then the defaults are applied.
func (k *Kind) decode(obj *unstructured.Unstructured) error {
	unknown := pruning.PruneWithOptions(obj.Object, k.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(unknown) > 0 {
		errs := make([]error, len(unknown))
		for i, p := range unknown {
			errs[i] = fmt.Errorf("unknown field %q", p)
		}
		return apierrors.NewBadRequest(runtime.NewStrictDecodingError(errs).Error())
	}
	k.Default(obj)
	return nil
}

// celRules evaluates the x-kubernetes-validations rules unless errs already hold an
// error that makes the API server skip them, in which case it says so as the API server
// does (customresource.hasBlockingErr).
func (k *Kind) celRules(ctx context.Context, errs field.ErrorList, obj, old any, opts ...cel.Option) field.ErrorList {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	ruleErrs, _ := k.cel.Validate(ctx, nil, k.structural, obj, old, celconfig.RuntimeCELCostBudget, opts...)
	return ruleErrs
}

// validateTypeMeta refuses an object of another kind or version.
func (k *Kind) validateTypeMeta(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if obj.GetKind() != k.gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), obj.GetKind(), fmt.Sprintf("must be %v", k.gvk.Kind)))
	}
	if want := k.gvk.GroupVersion().String(); obj.GetAPIVersion() != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), obj.GetAPIVersion(), fmt.Sprintf("must be %v", want)))
	}
	return errs
}

func objectMeta(obj *unstructured.Unstructured) (*metav1.ObjectMeta, field.ErrorList) {
	meta := &metav1.ObjectMeta{}
	raw, ok := obj.Object["metadata"]
	if !ok || raw == nil {
		return meta, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, fmt.Sprintf("expected map[string]interface{}, got %T", raw))}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, meta); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, err.Error())}
	}
	return meta, nil
}

func (k *Kind) invalid(obj *unstructured.Unstructured, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(k.gvk.GroupKind(), obj.GetName(), errs)
}
