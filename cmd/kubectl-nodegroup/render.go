package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
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
	ng, _, err := readPool(ctx, o.namespace, o.poolFile, o.name, "")
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
	store, resolver, err := offlineCluster(o.objects, ng, o.apiserverIP, o.dnsIP, o.endpoint)
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

// offlineCluster is a store of the objects of files and of what they may leave out
// (addDefaults), and a resolver that reads it as the operator reads the cluster.
func offlineCluster(files []string, ng *v1.NodeGroup, apiserverIP, dnsIP, endpoint string) (*offline.Store, *resolve.Resolver, error) {
	kinds, err := customresource.Chart()
	if err != nil {
		return nil, nil, err
	}
	s := scheme.New()
	store := offline.NewStore(s)
	store.DefaultWith(customresource.Defaulter(kinds))
	// A class or location (or any object of the chart's kinds) the API server would not
	// store is refused, naming the field, rather than resolved as if it could exist.
	store.CheckWith(customresource.Admitter(context.Background(), kinds))
	for _, f := range files {
		if err := store.AddFile(f); err != nil {
			return nil, nil, err
		}
	}
	if err := addDefaults(store, s, ng, apiserverIP, dnsIP, endpoint); err != nil {
		return nil, nil, err
	}
	return store, &resolve.Resolver{Client: store, APIReader: store, Mapper: offline.Mapper(), Catalog: catalog.Default(),
		ManagementDNS: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, ManagementDNSDomain: "cluster.local"}, nil
}

// addDefaults adds what the files may leave out: the built-in location (admitting every
// namespace), the pool's namespace, the Services whose address is given by flag, and the
// Cluster's control-plane endpoint when given by flag.
func addDefaults(store *offline.Store, s *runtime.Scheme, ng *v1.NodeGroup, apiserverIP, dnsIP, endpoint string) error {
	put := func(obj client.Object, replace bool) {
		gvks, _, _ := s.ObjectKinds(obj)
		if len(gvks) == 0 || (!replace && store.Has(gvks[0].GroupKind(), client.ObjectKeyFromObject(obj))) {
			return
		}
		_ = store.AddObject(obj)
	}
	add := func(obj client.Object) { put(obj, false) }
	// A flag's address replaces a Service of the files: a Service in a manifest has no
	// ClusterIP until the API server gives it one.
	setIP := func(obj client.Object) { put(obj, true) }
	add(&v1.Location{ObjectMeta: metav1.ObjectMeta{Name: v1.BuiltinLocation}, Spec: v1.LocationSpec{
		Provider:          v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{EvictionStrategy: "External"}},
		AllowedNamespaces: &metav1.LabelSelector{}}})
	add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ng.Namespace}})
	if dnsIP != "" {
		setIP(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Spec: corev1.ServiceSpec{ClusterIP: dnsIP}})
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	cluster.SetKind("Cluster")
	if store.Get(context.Background(), client.ObjectKey{Namespace: ng.Namespace, Name: ng.Spec.ClusterName}, cluster) != nil {
		return nil
	}
	if apiserverIP != "" {
		// Kamaji names the tenant API server's Service after the control plane; the
		// Cluster's controlPlaneRef says which.
		if cp, _, _ := unstructured.NestedString(cluster.Object, "spec", "controlPlaneRef", "name"); cp != "" {
			setIP(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ng.Namespace, Name: cp}, Spec: corev1.ServiceSpec{ClusterIP: apiserverIP}})
		}
	}
	if endpoint != "" {
		host, port, err := net.SplitHostPort(endpoint)
		if err != nil {
			return fmt.Errorf("--control-plane-endpoint %q: %w", endpoint, err)
		}
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			return fmt.Errorf("--control-plane-endpoint %q: port: %w", endpoint, err)
		}
		_ = unstructured.SetNestedMap(cluster.Object, map[string]any{"host": host, "port": p}, "spec", "controlPlaneEndpoint")
		store.Add(cluster)
	}
	return nil
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
