// Package offline resolves and renders a pool without a cluster, from the objects given
// as files, with the same resolve and render packages the operator runs: what the
// kubectl plugin prints is what the operator would apply (less the owner reference and
// managed-by label, which apply adds).
package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
)

// Store is a read-only set of objects that answers Get like an API server would: a
// missing object is NotFound. It does not list: resolve never lists.
type Store struct {
	scheme *runtime.Scheme
	objs   map[storeKey][]byte
}

type storeKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// NewStore returns an empty store that decodes into the kinds of scheme.
func NewStore(scheme *runtime.Scheme) *Store {
	return &Store{scheme: scheme, objs: map[storeKey][]byte{}}
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
		s.Add(u)
	}
	return nil
}

// Add adds one object.
func (s *Store) Add(u *unstructured.Unstructured) {
	b, _ := json.Marshal(u.Object)
	s.objs[storeKey{u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName()}] = b
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
	b, ok := s.objs[storeKey{gvk.GroupKind(), key.Namespace, key.Name}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return json.Unmarshal(b, &u.Object)
	}
	return json.Unmarshal(b, obj)
}

// List is not offered offline.
func (s *Store) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("listing is not possible offline")
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
