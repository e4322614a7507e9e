package simulator

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// The provider kinds the simulator plays, at the API versions the operator renders.
var (
	TalosConfigGVK        = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosConfig"}
	KairosConfigGVK       = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KairosConfig"}
	KubevirtMachineGVK    = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtMachine"}
	KubevirtClusterGVK    = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtCluster"}
	KamajiControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha2", Kind: "KamajiControlPlane"}
)

const (
	// AnnotationKwok marks the simulated Nodes for kwok, which the suite runs with
	// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake.
	AnnotationKwok = "kwok.x-k8s.io/node"
	// AnnotationSimulatedNode, on an infrastructure machine, names the Node made for it:
	// the Node is made once and never again for that machine.
	AnnotationSimulatedNode = "e2e.nodegroup.io/simulated-node"
	// AnnotationUpgradeInProgress on a KamajiControlPlane stands for the time a real
	// upgrade takes: while it is set, status.version stays at the version the control
	// plane reported before spec.version changed.
	AnnotationUpgradeInProgress = "e2e.nodegroup.io/upgrade-in-progress"

	// dataKey is the key of bootstrap data and kubeconfig Secrets (Cluster API contract).
	dataKey = "value"
	// kubeconfigSuffix names a Cluster's kubeconfig Secret, caSuffix its CA Secret
	// (Cluster API contract).
	kubeconfigSuffix = "-kubeconfig"
	caSuffix         = "-ca"
	// eventReporter is the reporting controller of the simulator's events.
	eventReporter = "nodegroup-e2e-simulator"
)

// Tenant is a tenant cluster's control plane as the simulated Kamaji serves it.
type Tenant struct {
	// Kubeconfig is an admin kubeconfig of the tenant's API server (system:masters). It
	// becomes the Cluster's <cluster>-kubeconfig, and its server the control-plane
	// endpoint of a Cluster that has none.
	Kubeconfig []byte
	// CACert and CAKey are the tenant's Kubernetes CA (PEM): <cluster>-ca, and the CA
	// kubelets must trust the API server by.
	CACert, CAKey []byte
}

// Options configure the simulator.
type Options struct {
	// Tenants is the tenant cluster of each Cluster whose control plane is a
	// KamajiControlPlane (required). An error leaves the Cluster's control plane
	// uninitialized, and is retried.
	Tenants func(cluster client.ObjectKey) (Tenant, error)
	// ProxmoxSites are the Proxmox VE clusters the simulated capmox reaches.
	ProxmoxSites []ProxmoxSite
}

// Add registers the simulator's controllers with mgr, whose scheme must hold the
// client-go and Cluster API v1beta2 kinds. Every simulated kind must be served.
func Add(mgr ctrl.Manager, opts Options) error {
	if opts.Tenants == nil {
		return errors.New("simulator: Options.Tenants is required")
	}
	for _, gvk := range []schema.GroupVersionKind{TalosConfigGVK, KairosConfigGVK, KubevirtMachineGVK, KubevirtClusterGVK, KamajiControlPlaneGVK, ProxmoxClusterGVK, ProxmoxMachineGVK} {
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return fmt.Errorf("simulator: %s is not served (install its CRD): %w", gvk, err)
		}
	}
	s := &sim{
		Client: mgr.GetClient(), live: mgr.GetAPIReader(), events: mgr.GetEventRecorder(eventReporter),
		tenants: opts.Tenants, joins: map[types.UID]*joinState{}, proxmoxSites: opts.ProxmoxSites,
	}
	for _, add := range []func(ctrl.Manager) error{
		func(m ctrl.Manager) error { return s.addBootstrap(m, TalosConfigGVK, s.talosData) },
		func(m ctrl.Manager) error { return s.addBootstrap(m, KairosConfigGVK, s.kairosData) },
		s.addInfra, s.addProxmox, s.addCluster, s.addNodes,
	} {
		if err := add(mgr); err != nil {
			return err
		}
	}
	return nil
}

// sim holds what every simulated controller shares.
type sim struct {
	client.Client
	// live reads past the cache, where a stale read would make a Node twice.
	live    client.Reader
	events  events.EventRecorder
	tenants func(client.ObjectKey) (Tenant, error)
	// proxmoxSites are the simulated Proxmox VE clusters.
	proxmoxSites []ProxmoxSite
	// remotes are the clients to tenant API servers, one per kubeconfig and identity.
	remotes remotes

	mu sync.Mutex
	// prepared are the tenant API servers set up for joins, by kubeconfig server.
	prepared map[string]bool
	// joins are the kubelets' TLS bootstraps under way, by infrastructure machine: what a
	// VM's disk would keep across a kubelet's retries.
	joins map[types.UID]*joinState
}

// kubeconfigEndpoint is the host and port of the current context's server.
func kubeconfigEndpoint(kubeconfig []byte) (clusterv1.APIEndpoint, error) {
	server, err := kubeconfigServer(kubeconfig)
	if err != nil {
		return clusterv1.APIEndpoint{}, err
	}
	u, err := url.Parse(server)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("kubeconfig server: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil || u.Hostname() == "" {
		return clusterv1.APIEndpoint{}, fmt.Errorf("kubeconfig server %q has no host and port", u)
	}
	return clusterv1.APIEndpoint{Host: u.Hostname(), Port: int32(p)}, nil
}

// kubeconfigServer is the server of a kubeconfig's current context.
func kubeconfigServer(kubeconfig []byte) (string, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.Clusters[ctx.Cluster] == nil {
		return "", errors.New("kubeconfig has no current context with a cluster")
	}
	return cfg.Clusters[ctx.Cluster].Server, nil
}

// get reads a provider object, uncached; nil when it does not exist.
func (s *sim) get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return obj, nil
}

// ownerMachine is the live Machine that owns obj, as providers find it (an owner
// reference of kind Machine in the cluster.x-k8s.io group); nil when there is none yet.
func (s *sim) ownerMachine(ctx context.Context, obj client.Object) (*clusterv1.Machine, error) {
	for _, ref := range obj.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != clusterv1.GroupVersion.Group || ref.Kind != "Machine" {
			continue
		}
		m := &clusterv1.Machine{}
		if err := s.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, m); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return m, nil
	}
	return nil, nil
}

// patch applies mutate to obj and sends the difference as a merge patch, to the status
// subresource when status is set; nothing is sent when mutate changes nothing.
func (s *sim) patch(ctx context.Context, obj client.Object, status bool, mutate func() error) error {
	before := obj.DeepCopyObject().(client.Object)
	if err := mutate(); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	if status {
		return s.Status().Patch(ctx, obj, client.MergeFrom(before))
	}
	return s.Patch(ctx, obj, client.MergeFrom(before))
}

// setFields sets nested fields of obj, each named by its dotted path.
func setFields(obj *unstructured.Unstructured, fields map[string]any) error {
	for path, v := range fields {
		if err := unstructured.SetNestedField(obj.Object, v, strings.Split(path, ".")...); err != nil {
			return err
		}
	}
	return nil
}

// ensureSecret creates or corrects a cluster.x-k8s.io/secret holding data, with labels
// (others it has are kept) and controlled by owner, as a provider's CreateOrUpdate does.
func (s *sim) ensureSecret(ctx context.Context, owner client.Object, name string, labels map[string]string, data map[string][]byte) error {
	gvk, err := apiutil.GVKForObject(owner, s.Scheme())
	if err != nil {
		return err
	}
	ref := metav1.NewControllerRef(owner, gvk)
	secret := &corev1.Secret{}
	err = s.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, secret)
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: owner.GetNamespace(), Name: name, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{*ref},
			},
			Type: clusterv1.ClusterSecretType,
			Data: data,
		}
		return client.IgnoreAlreadyExists(s.Create(ctx, secret))
	}
	if err != nil {
		return err
	}
	if c := metav1.GetControllerOf(secret); c != nil && c.UID != owner.GetUID() {
		return fmt.Errorf("the Secret %s is controlled by %s %s, not %s %s", name, c.Kind, c.Name, gvk.Kind, owner.GetName())
	}
	return s.patch(ctx, secret, false, func() error {
		secret.Labels = mergeMaps(secret.Labels, labels)
		secret.Data = data
		if metav1.GetControllerOf(secret) == nil {
			secret.OwnerReferences = append(secret.OwnerReferences, *ref)
		}
		return nil
	})
}
