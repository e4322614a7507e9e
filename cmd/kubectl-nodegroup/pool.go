package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
)

// readPool reads the NodeGroup of path (the one named name, when path holds several),
// in the namespace of the flags when it names none (clusterFlags.setNamespace), as
// the API server would store it: unknown fields refused, the CRD's defaults applied, its
// schema and rules checked, on a create, or on an update of the pool of oldPath when
// that is given (taken as stored: defaulted, not checked). A pool the API server would refuse returns its answer, an
// *apierrors.StatusError (see refusedByAPIServer); any other error is one of the input.
func readPool(ctx context.Context, ns clusterFlags, path, name, oldPath string) (pool, old *v1.NodeGroup, err error) {
	kind, err := customresource.NodeGroup()
	if err != nil {
		return nil, nil, err
	}
	u, err := readNamed(path, "NodeGroup", name)
	if err != nil {
		return nil, nil, err
	}
	if err := ns.setNamespace(path, u); err != nil {
		return nil, nil, err
	}
	if oldPath == "" {
		err = kind.Create(ctx, u)
	} else {
		var oldU *unstructured.Unstructured
		if oldU, err = readNamed(oldPath, "NodeGroup", name); err != nil {
			return nil, nil, err
		}
		if err := ns.setNamespace(oldPath, oldU); err != nil {
			return nil, nil, err
		}
		kind.Default(oldU)
		// A stored object has a resourceVersion; a file exported without one stands for
		// one all the same.
		if oldU.GetResourceVersion() == "" {
			oldU.SetResourceVersion("1")
		}
		if old, err = typed(oldU); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", oldPath, err)
		}
		err = kind.Update(ctx, u, oldU)
	}
	if err != nil {
		return nil, nil, err
	}
	if pool, err = typed(u); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
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

// refusedByAPIServer writes the API server's refusal in err, one line per field error
// prefixed with indent, in field order (the API server's own order varies with map
// iteration), and reports whether err was one.
func refusedByAPIServer(w io.Writer, indent string, err error) bool {
	var status *apierrors.StatusError
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		fmt.Fprintf(w, "%s%s\n", indent, status.Status().Message)
		return true
	}
	causes := slices.Clone(details.Causes)
	slices.SortStableFunc(causes, func(a, b metav1.StatusCause) int { return strings.Compare(a.Field, b.Field) })
	for _, c := range causes {
		if c.Field == "" {
			fmt.Fprintf(w, "%s%s\n", indent, c.Message)
		} else {
			fmt.Fprintf(w, "%s%s: %s\n", indent, c.Field, c.Message)
		}
	}
	return true
}

// poolName is "NodeGroup namespace/name" of the pool in path, as far as it can be read.
func poolName(ns clusterFlags, path, name string) string {
	u, err := readNamed(path, "NodeGroup", name)
	if err != nil {
		return "NodeGroup in " + path
	}
	_ = ns.setNamespace(path, u)
	return "NodeGroup " + u.GetNamespace() + "/" + u.GetName()
}

// readNamed reads the object of the given kind and name of path, or its one object
// when name is empty or the file holds one document.
func readNamed(path, kind, name string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := yamldocs.Objects(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if name != "" && len(docs) > 1 {
		for _, d := range docs {
			if d.GetKind() == kind && d.GetName() == name {
				return d, nil
			}
		}
		return nil, fmt.Errorf("%s holds no %s %q", path, kind, name)
	}
	switch {
	case len(docs) == 0:
		return nil, fmt.Errorf("%s holds no object", path)
	case len(docs) > 1:
		return nil, fmt.Errorf("%s holds several YAML documents (%d): name the one to read with --name", path, len(docs))
	case docs[0].GetKind() != kind:
		return nil, fmt.Errorf("%s: kind %q, want %s", path, docs[0].GetKind(), kind)
	}
	return docs[0], nil
}

// readObject reads the object of path of the given kind and name (its one object of
// that kind, when it holds one document), refusing unknown fields. An object of a kind
// the chart defines is read as the API server would create it: its CRD's defaults
// applied, its schema and rules checked (an error names the field), its status dropped.
func readObject(ctx context.Context, path, kind, name string, into any) error {
	u, err := readNamed(path, kind, name)
	if err != nil {
		return err
	}
	kinds, err := customresource.Chart()
	if err != nil {
		return err
	}
	if k := kinds[u.GroupVersionKind().GroupKind()]; k != nil {
		if err := k.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
