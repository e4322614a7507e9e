package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
)

func classesCommand() *cobra.Command {
	var cluster clusterFlags
	cmd := &cobra.Command{
		Use:   "classes",
		Short: "List the NodeGroupClasses and Locations, and which locations the namespace may use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return status(classes(cluster, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	cluster = addClusterFlags(cmd)
	return cmd
}

// classes prints the classes and the locations, as the CRDs' tables, the locations with
// a column that says whether a pool of the namespace (-n, else the context's) may use
// each, as the operator's webhook decides it (policy.LocationAdmits).
func classes(cluster clusterFlags, stdout, stderr io.Writer) int {
	if err := printClasses(cluster, stdout); err != nil {
		fmt.Fprintln(stderr, "classes:", err)
		return 2
	}
	return 0
}

func printClasses(cluster clusterFlags, w io.Writer) error {
	ns, err := cluster.namespace()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	classTable, err := cluster.serverTable(ctx, "nodegroupclasses", "")
	if err != nil {
		return err
	}
	locationTable, err := cluster.serverTable(ctx, "locations", "")
	if err != nil {
		return err
	}
	c, err := cluster.client()
	if err != nil {
		return err
	}
	access, err := locationAccess(ctx, c, ns)
	if err != nil {
		return err
	}
	locationTable.ColumnDefinitions = append(locationTable.ColumnDefinitions,
		metav1.TableColumnDefinition{Name: "Usable", Type: "string", Description: "whether pools of the namespace may use the location"})
	for i := range locationTable.Rows {
		name := rowName(locationTable.Rows[i])
		locationTable.Rows[i].Cells = append(locationTable.Rows[i].Cells, access(name))
	}
	fmt.Fprintln(w, "NodeGroupClasses:")
	if err := printTable(w, classTable, printers.PrintOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nLocations (USABLE: by pools of namespace %s):\n", ns)
	return printTable(w, locationTable, printers.PrintOptions{})
}

// locationAccess says, for a location's name, whether pools of namespace ns may use
// it: "yes", "no", or unknown when the caller may not read the namespace's labels (the
// chart's tenant-view role lets a tenant get its own namespace, and no other) or the
// location is gone.
func locationAccess(ctx context.Context, c client.Client, ns string) (func(location string) string, error) {
	namespace := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: ns}, namespace)
	switch {
	case apierrors.IsForbidden(err):
		return func(string) string { return "unknown (cannot read namespace labels)" }, nil
	case apierrors.IsNotFound(err):
		return func(string) string { return "unknown (no namespace " + ns + ")" }, nil
	case err != nil:
		return nil, err
	}
	locations := &v1.LocationList{}
	if err := c.List(ctx, locations); err != nil {
		return nil, err
	}
	usable := map[string]string{}
	for _, l := range locations.Items {
		ok, err := policy.LocationAdmits(ctx, &l.Spec, namespace.Labels)
		switch {
		case err != nil:
			return nil, fmt.Errorf("location %s: %w", l.Name, err)
		case ok:
			usable[l.Name] = "yes"
		default:
			usable[l.Name] = "no"
		}
	}
	return func(location string) string {
		if u, ok := usable[location]; ok {
			return u
		}
		return "unknown (location not found)"
	}, nil
}
