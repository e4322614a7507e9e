package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// getOptions are get's flags.
type getOptions struct {
	cluster       clusterFlags
	output        *outputFlags
	allNamespaces bool
}

func getCommand() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get [NAME ...]",
		Short: "List pools: class, location, size, readiness, status and version",
		RunE: func(cmd *cobra.Command, args []string) error {
			return status(get(o, args, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	o.cluster = addClusterFlags(cmd)
	o.output = addOutputFlags(cmd, "", "wide: also the machines up to date, available and their MachineDeployment")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "the pools of every namespace")
	return cmd
}

// get prints the pools of the namespace (every namespace with -A), or those named, as
// the table of the CRD's columns, or with -o as kubectl's printers print a List. It
// exits 1 when a named pool does not exist.
func get(o *getOptions, names []string, stdout, stderr io.Writer) int {
	ns, err := o.cluster.namespace()
	if err != nil {
		fmt.Fprintln(stderr, "get:", err)
		return 2
	}
	where := "namespace " + ns
	if o.allNamespaces {
		ns, where = "", "any namespace"
	}
	found, err := o.print(ns, names, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "get:", err)
		return 2
	}
	if len(names) == 0 && len(found) == 0 {
		fmt.Fprintf(stderr, "No NodeGroups found in %s.\n", where)
	}
	code := 0
	for _, n := range names {
		if !slices.Contains(found, n) {
			fmt.Fprintf(stderr, "get: NodeGroup %q not found in %s\n", n, where)
			code = 1
		}
	}
	return code
}

// print prints the pools of ns (every namespace when empty) of the given names (every
// pool when none) and returns the names it found.
func (o *getOptions) print(ns string, names []string, w io.Writer) (found []string, err error) {
	printer, err := o.output.printer()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if printer == nil {
		t, err := o.cluster.serverTable(ctx, "nodegroups", ns)
		if err != nil {
			return nil, err
		}
		t.Rows = slices.DeleteFunc(t.Rows, func(r metav1.TableRow) bool {
			return !named(names, rowName(r))
		})
		if len(t.Rows) == 0 {
			return nil, nil
		}
		for _, r := range t.Rows {
			found = append(found, rowName(r))
		}
		return found, printTable(w, t, printers.PrintOptions{Wide: o.output.wide(), WithNamespace: o.allNamespaces})
	}
	c, err := o.cluster.client()
	if err != nil {
		return nil, err
	}
	// Unstructured: the pools as the API server holds them, without the zero values of
	// fields they do not set.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(v1.GroupVersion.WithKind("NodeGroupList"))
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var objs []client.Object
	for i := range list.Items {
		if named(names, list.Items[i].GetName()) {
			objs = append(objs, &list.Items[i])
			found = append(found, list.Items[i].GetName())
		}
	}
	return found, o.output.print(w, printer, objs, true)
}

// named reports whether name is one of names, or names is empty (every pool).
func named(names []string, name string) bool {
	return len(names) == 0 || slices.Contains(names, name)
}
