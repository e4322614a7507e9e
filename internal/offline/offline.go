// Package offline resolves and renders a pool without a cluster, from the objects given
// as files, with the same resolve and render packages the operator runs: what the
// kubectl plugin prints is what the operator would apply (less the owner reference and
// the nodegroup.io/applied annotation, which apply adds).
package offline

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
)

// Store is a read-only set of objects that answers Get like an API server would: a
// missing object is NotFound. It lists by namespace and labels (not by fields), for
// the reconciler's benchmarks, which read from it what the operator reads from its
// cache; resolve never lists.
type Store struct {
	scheme   *runtime.Scheme
	objs     map[storeKey]stored
	defaults func(*unstructured.Unstructured)
	check    func(*unstructured.Unstructured) error
}

// stored is an object's JSON and its labels, which a list selects by.
type stored struct {
	json   []byte
	labels labels.Set
}

type storeKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// NewStore returns an empty store that decodes into the kinds of scheme.
func NewStore(scheme *runtime.Scheme) *Store {
	return &Store{scheme: scheme, objs: map[storeKey]stored{}}
}

// AddFile adds every object of a multi-document YAML file.
func (s *Store) AddFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := yamldocs.Objects(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for i, u := range objs {
		if u.GetKind() == "" || u.GetName() == "" {
			return fmt.Errorf("%s: object %d: an object needs a kind and a name", path, i+1)
		}
		if s.check != nil {
			if err := s.check(u); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		s.Add(u)
	}
	return nil
}

// CheckWith refuses, in AddFile, a file with an object check refuses, as the API server
// refuses to create an object its CRD's schema or rules do not admit. Objects added by
// code are not checked.
func (s *Store) CheckWith(check func(*unstructured.Unstructured) error) { s.check = check }

// DefaultWith passes every object added from now on through defaults, as the API server
// applies the defaults of a kind's CRD to what it stores.
func (s *Store) DefaultWith(defaults func(*unstructured.Unstructured)) { s.defaults = defaults }

// Add adds one object. A Secret's stringData is merged into its data, as the API server
// does when it stores one (a key in both takes the stringData value).
func (s *Store) Add(u *unstructured.Unstructured) {
	if u.GroupVersionKind().GroupKind() == secretKind {
		u = mergeStringData(u)
	}
	if s.defaults != nil {
		u = u.DeepCopy()
		s.defaults(u)
	}
	b, _ := json.Marshal(u.Object)
	s.objs[storeKey{u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName()}] = stored{b, u.GetLabels()}
}

// AddObject adds a typed object, of a kind the store's scheme knows.
func (s *Store) AddObject(obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	s.Add(u)
	return nil
}

var secretKind = schema.GroupKind{Kind: "Secret"}

func mergeStringData(u *unstructured.Unstructured) *unstructured.Unstructured {
	stringData, ok, _ := unstructured.NestedStringMap(u.Object, "stringData")
	if !ok {
		return u
	}
	u = u.DeepCopy()
	data, _, _ := unstructured.NestedMap(u.Object, "data")
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range stringData {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	u.Object["data"] = data
	delete(u.Object, "stringData")
	return u
}

// Has reports whether an object of that kind and key is in the store.
func (s *Store) Has(gk schema.GroupKind, key client.ObjectKey) bool {
	_, ok := s.objs[storeKey{gk, key.Namespace, key.Name}]
	return ok
}

// Get decodes the stored object into obj, or returns NotFound.
func (s *Store) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return err
	}
	o, ok := s.objs[storeKey{gvk.GroupKind(), key.Namespace, key.Name}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// As a client decodes what the API server sends: whole numbers as int64.
		return u.UnmarshalJSON(o.json)
	}
	return json.Unmarshal(o.json, obj)
}

// List decodes the stored objects of the list's kind (its kind less "List") that the
// namespace and label selector of opts select into list, in name order. A field
// selector is refused: the store keeps no indexes.
func (s *Store) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, s.scheme)
	if err != nil {
		return err
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		return errors.New("listing by field is not possible offline")
	}
	gk := schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}
	keys := make([]storeKey, 0)
	for k := range s.objs {
		if k.gk == gk && (o.Namespace == "" || k.namespace == o.Namespace) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b storeKey) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	items := make([]json.RawMessage, 0, len(keys))
	for _, k := range keys {
		if o.LabelSelector == nil || o.LabelSelector.Matches(s.objs[k].labels) {
			items = append(items, s.objs[k].json)
		}
	}
	b, err := json.Marshal(map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "items": items})
	if err != nil {
		return err
	}
	if u, ok := list.(*unstructured.UnstructuredList); ok {
		return u.UnmarshalJSON(b)
	}
	return json.Unmarshal(b, list)
}

// Mapper maps the kinds resolve reads by group and kind to the versions the operator
// expects to be served.
func Mapper() meta.RESTMapper {
	kamaji := schema.GroupVersion{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha2"}
	instancetypes := schema.GroupVersion{Group: "instancetype.kubevirt.io", Version: "v1beta1"}
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{kamaji, instancetypes})
	m.Add(kamaji.WithKind("KamajiControlPlane"), meta.RESTScopeNamespace)
	m.Add(instancetypes.WithKind("VirtualMachineClusterInstancetype"), meta.RESTScopeRoot)
	return m
}
