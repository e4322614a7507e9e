package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// renderCmd prints the objects the operator would apply for a pool, from files.
func renderCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	poolFile := fs.String("f", "", "the NodeGroup (YAML)")
	var objects multiFlag
	fs.Var(&objects, "objects", "a YAML file of the objects the pool needs: its Cluster and control plane, class, location, namespace, the Talos secrets (repeatable)")
	apiserverIP := fs.String("apiserver-ip", "", "ClusterIP of the tenant API server Service, when the files do not hold the Service")
	dnsIP := fs.String("management-dns-ip", "", "ClusterIP of the management cluster's DNS Service (kube-system/kube-dns)")
	endpoint := fs.String("control-plane-endpoint", "", "host:port of the tenant API server, when the files hold the Cluster without its spec.controlPlaneEndpoint (the control-plane provider publishes it)")
	name := fs.String("name", "", "the pool to render, when the file holds several")
	output := fs.String("o", "yaml", "output format: yaml or json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *poolFile == "" {
		fmt.Fprintln(stderr, "render: -f pool.yaml is required")
		return 2
	}
	if *output != "yaml" && *output != "json" {
		fmt.Fprintf(stderr, "render: -o %q: use yaml or json\n", *output)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ng, _, err := readPool(ctx, *poolFile, *name, "")
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
	store, resolver, err := offlineCluster(objects, ng, *apiserverIP, *dnsIP, *endpoint)
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
	if err := print(stdout, out, *output); err != nil {
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

func print(w io.Writer, out *render.Output, format string) error {
	var buf bytes.Buffer
	objs := out.Objects()
	if format == "json" {
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}); err != nil {
			return err
		}
	} else {
		for i, obj := range objs {
			b, err := yaml.Marshal(obj)
			if err != nil {
				return err
			}
			if i > 0 {
				buf.WriteString("---\n")
			}
			buf.Write(b)
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}
