package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
)

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
	f, err := offline.ReadFile(path)
	if err != nil {
		return "NodeGroup in " + path
	}
	u, err := f.Object("NodeGroup", name)
	if err != nil {
		return "NodeGroup in " + path
	}
	_ = ns.setNamespace(path, u)
	return "NodeGroup " + u.GetNamespace() + "/" + u.GetName()
}

// readObject reads the object of path of the given kind and name into into, as
// offline.File.Decode does: checked against its CRD when it is of the chart's kinds.
func readObject(ctx context.Context, path, kind, name string, into any) error {
	f, err := offline.ReadFile(path)
	if err != nil {
		return err
	}
	return f.Decode(ctx, kind, name, into)
}
