package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// outputFlags are -o and the template flags of kubectl's printers
// (genericclioptions.PrintFlags: json, yaml, name, jsonpath, go-template and the rest),
// and wide, which each command prints as a table of its own.
type outputFlags struct {
	flags  *genericclioptions.PrintFlags
	scheme *runtime.Scheme
}

// addOutputFlags adds -o with the default format def (empty: the command's own text or
// table); wide says what -o wide prints.
func addOutputFlags(cmd *cobra.Command, def, wide string) *outputFlags {
	s := scheme.New()
	o := &outputFlags{flags: genericclioptions.NewPrintFlags("").WithDefaultOutput(def).WithTypeSetter(s), scheme: s}
	o.flags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "output format: " + strings.Join(append(o.flags.AllowedFormats(), "wide"), ", ") + "; " + wide
	return o
}

func (o *outputFlags) format() string { return *o.flags.OutputFormat }

// wide is -o wide: the command prints its table with every column.
func (o *outputFlags) wide() bool { return o.format() == "wide" }

// printer is the printer of -o, nil for the command's own text or table (no -o, or -o
// wide). It is asked for before the command does its work, so an unknown format is
// refused before the cluster is.
func (o *outputFlags) printer() (printers.ResourcePrinter, error) {
	if o.format() == "" || o.wide() {
		return nil, nil
	}
	p, err := o.flags.ToPrinter()
	if err != nil {
		return nil, fmt.Errorf("%w, wide", err)
	}
	return p, nil
}

// print prints objs with p: each as itself, or as one List (what kubectl prints for
// several objects) when asList.
func (o *outputFlags) print(w io.Writer, p printers.ResourcePrinter, objs []client.Object, asList bool) error {
	if !asList {
		for _, obj := range objs {
			if err := p.PrintObj(obj, w); err != nil {
				return err
			}
		}
		return nil
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, o.scheme)
		if err != nil {
			return err
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		u := unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		list.Items = append(list.Items, u)
	}
	return p.PrintObj(list, w)
}

// printTable prints t with kubectl's table printer.
func printTable(w io.Writer, t *metav1.Table, opts printers.PrintOptions) error {
	return printers.NewTablePrinter(opts).PrintObj(t, w)
}
