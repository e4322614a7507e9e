package offline

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// ClusterFiles are what stands for a cluster offline: the files of its objects (a pool's
// Cluster and control plane, class, location, namespace, Talos secrets) and what they
// may leave out, as the kubectl plugin's flags give it.
type ClusterFiles struct {
	// Files are multi-document YAML files of objects.
	Files []string
	// APIServerIP is the ClusterIP of the tenant API server's Service, when the files do
	// not hold the Service.
	APIServerIP string
	// ManagementDNSIP is the ClusterIP of the management cluster's DNS Service
	// (kube-system/kube-dns).
	ManagementDNSIP string
	// ControlPlaneEndpoint is host:port of the tenant API server, when the files hold the
	// Cluster without its spec.controlPlaneEndpoint.
	ControlPlaneEndpoint string
}

// Cluster is a store of the objects of c's files and of what they may leave out
// (addDefaults), and a resolver of ng's pool that reads it as the operator reads the
// cluster.
func Cluster(ng *v1.NodeGroup, c ClusterFiles) (*Store, *resolve.Resolver, error) {
	kinds, err := customresource.Chart()
	if err != nil {
		return nil, nil, err
	}
	s := scheme.New()
	store := NewStore(s)
	store.DefaultWith(customresource.Defaulter(kinds))
	// A class or location (or any object of the chart's kinds) the API server would not
	// store is refused, naming the field, rather than resolved as if it could exist.
	store.CheckWith(customresource.Admitter(context.Background(), kinds))
	for _, f := range c.Files {
		if err := store.AddFile(f); err != nil {
			return nil, nil, err
		}
	}
	if err := addDefaults(store, s, ng, c); err != nil {
		return nil, nil, err
	}
	return store, &resolve.Resolver{Client: store, APIReader: store, Mapper: Mapper(), Catalog: catalog.Default(),
		ManagementDNS: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, ManagementDNSDomain: "cluster.local"}, nil
}

// addDefaults adds what the files may leave out: the built-in location (admitting every
// namespace), the pool's namespace, the Services whose address is given by flag, and the
// Cluster's control-plane endpoint when given by flag.
func addDefaults(store *Store, s *runtime.Scheme, ng *v1.NodeGroup, c ClusterFiles) error {
	apiserverIP, dnsIP, endpoint := c.APIServerIP, c.ManagementDNSIP, c.ControlPlaneEndpoint
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
