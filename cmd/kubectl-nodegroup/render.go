package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// renderOptions are render's flags.
type renderOptions struct {
	poolFile, name               string
	objects                      []string
	apiserverIP, dnsIP, endpoint string
	output                       *outputFlags
	namespace                    clusterFlags
}

func renderCommand() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -f pool.yaml",
		Short: "Print the objects the operator would apply for a pool, from files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return status(renderCmd(o, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.poolFile, "filename", "f", "", "the NodeGroup (YAML)")
	fs.StringArrayVar(&o.objects, "objects", nil, "a YAML file of the objects the pool needs: its Cluster and control plane, class, location, namespace, the Talos secrets (repeatable)")
	fs.StringVar(&o.apiserverIP, "apiserver-ip", "", "ClusterIP of the tenant API server Service, when the files do not hold the Service")
	fs.StringVar(&o.dnsIP, "management-dns-ip", "", "ClusterIP of the management cluster's DNS Service (kube-system/kube-dns)")
	fs.StringVar(&o.endpoint, "control-plane-endpoint", "", "host:port of the tenant API server, when the files hold the Cluster without its spec.controlPlaneEndpoint (the control-plane provider publishes it)")
	fs.StringVar(&o.name, "name", "", "the pool to render, when the file holds several")
	o.output = addOutputFlags(cmd, "yaml", "wide: a table of the objects")
	o.namespace = addNamespaceFlags(cmd)
	return cmd
}

// renderCmd prints the objects the operator would apply for a pool, from files.
func renderCmd(o *renderOptions, stdout, stderr io.Writer) int {
	if o.poolFile == "" {
		fmt.Fprintln(stderr, "render: -f pool.yaml is required")
		return 2
	}
	printer, err := o.output.printer()
	if err != nil {
		fmt.Fprintln(stderr, "render:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ng, _, err := offline.ReadPool(ctx, o.poolFile, o.name, "", o.namespace.setNamespace)
	if apierrors.IsInvalid(err) {
		fmt.Fprintln(stderr, "render: the API server would refuse the pool:")
		refusedByAPIServer(stderr, "  - ", err)
		return 1
	}
	if err != nil {
		if !refusedByAPIServer(stderr, "render: ", err) {
			fmt.Fprintln(stderr, "render:", err)
		}
		return 2
	}
	store, resolver, err := offline.Cluster(ng, offline.ClusterFiles{Files: o.objects, APIServerIP: o.apiserverIP, ManagementDNSIP: o.dnsIP, ControlPlaneEndpoint: o.endpoint})
	if err != nil {
		fmt.Fprintln(stderr, "render:", err)
		return 2
	}
	in, err := resolver.Resolve(ctx, ng)
	if err != nil {
		var rerr *resolve.Error
		if errors.As(err, &rerr) {
			fmt.Fprintf(stderr, "render: the operator would set %s=False (%s): %s\n", rerr.Condition, rerr.Reason, rerr.Message)
			return 1
		}
		fmt.Fprintln(stderr, "render:", err)
		return 2
	}
	// The operator checks the admission rules before it renders, with what it gathers
	// (here from the files: a running pool is known only by its MachineDeployment among
	// them, else the OS-switch rule has nothing to compare with).
	pin, err := policy.Gather(ctx, store, ng, &in.Class, &in.Location, in.ControlPlaneVersion)
	if err != nil {
		fmt.Fprintln(stderr, "render:", err)
		return 2
	}
	violations, err := policy.Evaluate(ctx, pin)
	if err != nil {
		fmt.Fprintln(stderr, "render:", err)
		return 2
	}
	if len(violations) > 0 {
		for _, v := range violations {
			fmt.Fprintf(stderr, "render: the operator would refuse the pool: %s (%s)\n", v.String(), v.Rule)
		}
		return 1
	}
	out, err := render.Render(in)
	if err != nil {
		fmt.Fprintln(stderr, "render: the operator would set Rendered=False:", err)
		return 1
	}
	objs := out.Objects()
	if o.output.wide() {
		err = printTable(stdout, objectTable(objs), printers.PrintOptions{Wide: true})
	} else {
		err = o.output.print(stdout, printer, objs, o.output.format() == "json")
	}
	if err != nil {
		fmt.Fprintln(stderr, "render:", err)
		return 2
	}
	return 0
}

// objectTable is a table of objects: their kind, name and API version.
func objectTable(objs []client.Object) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string"}, {Name: "Kind", Type: "string"}, {Name: "API version", Type: "string"}}}
	for _, obj := range objs {
		gvk := obj.GetObjectKind().GroupVersionKind()
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{obj.GetName(), gvk.Kind, gvk.GroupVersion().String()}, Object: runtime.RawExtension{Object: obj}})
	}
	return t
}
