package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
)

// File is a YAML file given to the kubectl plugin: its path, which messages name, and
// its content.
type File struct {
	Path string
	Data []byte
}

// ReadFile reads the file at path.
func ReadFile(path string) (File, error) {
	data, err := os.ReadFile(path)
	return File{Path: path, Data: data}, err
}

// Object returns the object of the given kind and name of f, or its one object when
// name is empty or f holds one document.
func (f File) Object(kind, name string) (*unstructured.Unstructured, error) {
	docs, err := yamldocs.Objects(f.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	if name != "" && len(docs) > 1 {
		for _, d := range docs {
			if d.GetKind() == kind && d.GetName() == name {
				return d, nil
			}
		}
		return nil, fmt.Errorf("%s holds no %s %q", f.Path, kind, name)
	}
	switch {
	case len(docs) == 0:
		return nil, fmt.Errorf("%s holds no object", f.Path)
	case len(docs) > 1:
		return nil, fmt.Errorf("%s holds several YAML documents (%d): name the one to read with --name", f.Path, len(docs))
	case docs[0].GetKind() != kind:
		return nil, fmt.Errorf("%s: kind %q, want %s", f.Path, docs[0].GetKind(), kind)
	}
	return docs[0], nil
}

// Decode decodes the object of f of the given kind and name (see Object) into into,
// refusing unknown fields. An object of a kind the chart defines is read as the API
// server would create it: its CRD's defaults applied, its schema and rules checked (an
// error names the field), its status dropped.
func (f File) Decode(ctx context.Context, kind, name string, into any) error {
	u, err := f.Object(kind, name)
	if err != nil {
		return err
	}
	kinds, err := customresource.Chart()
	if err != nil {
		return err
	}
	if k := kinds[u.GroupVersionKind().GroupKind()]; k != nil {
		if err := k.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	return nil
}

// Namespacer gives an object read from the file at path that names no namespace the
// one the caller stands in (kubectl's -n or its context's), or refuses it.
type Namespacer func(path string, u *unstructured.Unstructured) error

// ReadPool reads the NodeGroup of path as Pool does, on an update of the pool of oldPath
// when that is not empty.
func ReadPool(ctx context.Context, path, name, oldPath string, ns Namespacer) (pool, old *v1.NodeGroup, err error) {
	f, err := ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var oldFile *File
	if oldPath != "" {
		of, err := ReadFile(oldPath)
		if err != nil {
			return nil, nil, err
		}
		oldFile = &of
	}
	return Pool(ctx, f, name, oldFile, ns)
}

// Pool reads the NodeGroup of f (the one named name, when f holds several), in the
// namespace ns gives it when it names none (ns may be nil), as the API server would
// store it: unknown fields refused, the CRD's defaults applied, its schema
// and rules checked, on a create, or on an update of the pool of oldFile when that is
// given (taken as stored: defaulted, not checked). A pool the API server would refuse
// returns its answer, an *apierrors.StatusError; any other error is one of the input.
func Pool(ctx context.Context, f File, name string, oldFile *File, ns Namespacer) (pool, old *v1.NodeGroup, err error) {
	kind, err := customresource.NodeGroup()
	if err != nil {
		return nil, nil, err
	}
	if ns == nil {
		ns = func(string, *unstructured.Unstructured) error { return nil }
	}
	u, err := f.Object("NodeGroup", name)
	if err != nil {
		return nil, nil, err
	}
	if err := ns(f.Path, u); err != nil {
		return nil, nil, err
	}
	if oldFile == nil {
		err = kind.Create(ctx, u)
	} else {
		var oldU *unstructured.Unstructured
		if oldU, err = oldFile.Object("NodeGroup", name); err != nil {
			return nil, nil, err
		}
		if err := ns(oldFile.Path, oldU); err != nil {
			return nil, nil, err
		}
		kind.Default(oldU)
		// A stored object has a resourceVersion; a file exported without one stands for
		// one all the same.
		if oldU.GetResourceVersion() == "" {
			oldU.SetResourceVersion("1")
		}
		if old, err = typed(oldU); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", oldFile.Path, err)
		}
		err = kind.Update(ctx, u, oldU)
	}
	if err != nil {
		return nil, nil, err
	}
	if pool, err = typed(u); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return pool, old, nil
}

func typed(u *unstructured.Unstructured) (*v1.NodeGroup, error) {
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	ng := &v1.NodeGroup{}
	return ng, json.Unmarshal(b, ng)
}
