// Package resolve reads what a pool's render needs from the API server: its class (the
// built-in ones from code), its location, its Cluster and control-plane facts in the
// pool's own namespace, the catalog entry of its Kubernetes minor, and its secrets. The
// result is one plain render.Input; a failure is an *Error that names the condition to set.
package resolve

import (
	"context"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/credentials"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
)

// Talos secrets: the Secret `<cluster>-talos` in the pool's namespace, with these keys,
// so every Talos pool of the cluster joins with the same identity. The operator makes it
// (internal/controller/joinidentity) unless the platform brought its own.
const (
	TalosSecretSuffix     = "-talos"
	TalosKeyMachineToken  = "machine-token"
	TalosKeyMachineCACert = "machine-ca.crt"
	// TalosKeyMachineCAKey is the machine CA's key: no worker needs it, a platform
	// that issues talosctl credentials for the cluster's machines does.
	TalosKeyMachineCAKey = "machine-ca.key"
	// TalosKeyPreviousBootstrapToken is the token a rotation replaced, kept valid until
	// every Talos pool of the cluster has rolled onto the new one.
	TalosKeyPreviousBootstrapToken = "previous-bootstrap-token"
	TalosKeyClusterCACert          = "cluster-ca.crt"
	TalosKeyClusterID              = "cluster-id"
	TalosKeyClusterSecret          = "cluster-secret"
	TalosKeyBootstrapToken         = "bootstrap-token"
	kamajiControlPlaneKind         = "KamajiControlPlane"
	kamajiControlPlaneGroup        = "controlplane.cluster.x-k8s.io"
	defaultServiceDomain           = "cluster.local"
	instancetypeGroup              = "instancetype.kubevirt.io"
	instancetypeKind               = "VirtualMachineClusterInstancetype"
)

// Resolver reads through Client (normally the manager's cache) and, for kinds the
// operator does not cache (Secrets, Services, instancetypes), through APIReader.
type Resolver struct {
	Client    client.Reader
	APIReader client.Reader
	Mapper    meta.RESTMapper
	Catalog   *catalog.Catalog
	// ManagementDNS is the management cluster's DNS Service (kube-system/kube-dns), whose
	// ClusterIP is the workers' nameserver.
	ManagementDNS types.NamespacedName
	// ManagementDNSDomain is the management cluster's DNS domain.
	ManagementDNSDomain string

	// Cache, when set, is an informer cache (a manager's GetCache()) that watches
	// Services and Secrets, as metadata at least, and KamajiControlPlanes. A Service's
	// ClusterIP and a cluster's Talos secrets are then read live once per version of
	// their object (the cached resourceVersion tells) and remembered, and Kamaji control
	// planes are read from the cache: a resolve of an unchanged pool sends no request.
	// Without it, all three are read live on every resolve.
	Cache client.Reader

	mu       sync.Mutex
	services map[types.NamespacedName]versioned[string]
	secrets  map[types.NamespacedName]versioned[render.TalosSecrets]
	flight   singleflight.Group
}

// versioned is a value read from one resourceVersion of an object.
type versioned[T any] struct {
	resourceVersion string
	value           T
}

// remembered returns the value read from the object key of kind gvk, when the cache
// holds the object at the resourceVersion the value was read from.
func remembered[T any](ctx context.Context, r *Resolver, m *map[types.NamespacedName]versioned[T], gvk schema.GroupVersionKind, key types.NamespacedName) (T, bool) {
	var zero T
	if r.Cache == nil {
		return zero, false
	}
	r.mu.Lock()
	v, ok := (*m)[key]
	r.mu.Unlock()
	if !ok {
		return zero, false
	}
	cur := &metav1.PartialObjectMetadata{}
	cur.SetGroupVersionKind(gvk)
	if err := r.Cache.Get(ctx, key, cur); err != nil || cur.ResourceVersion != v.resourceVersion {
		return zero, false
	}
	return v.value, true
}

// once returns the value remembered for the object key, or reads it with live; the
// pools of one cluster resolve at the same moment, so one of them reads and the others
// wait for its answer.
func once[T any](ctx context.Context, r *Resolver, m *map[types.NamespacedName]versioned[T], gvk schema.GroupVersionKind,
	key types.NamespacedName, live func(context.Context, types.NamespacedName) (T, error)) (T, error) {
	if v, ok := remembered(ctx, r, m, gvk, key); ok {
		return v, nil
	}
	if r.Cache == nil {
		return live(ctx, key)
	}
	v, err, _ := r.flight.Do(gvk.Kind+" "+key.String(), func() (any, error) {
		if v, ok := remembered(ctx, r, m, gvk, key); ok {
			return v, nil
		}
		return live(ctx, key)
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

// ForgetService drops the ClusterIP remembered of the Service key, and ForgetSecret the
// Talos secrets remembered of the Secret key. Call them on any event of the object: a
// changed object is then read again at once, and a deleted cluster's secrets do not stay
// in memory.
func (r *Resolver) ForgetService(key types.NamespacedName) { forget(r, r.services, key) }

// ForgetSecret: see ForgetService.
func (r *Resolver) ForgetSecret(key types.NamespacedName) { forget(r, r.secrets, key) }

func forget[T any](r *Resolver, m map[types.NamespacedName]versioned[T], key types.NamespacedName) {
	r.mu.Lock()
	delete(m, key)
	r.mu.Unlock()
}

// remember stores a value read live from one version of an object.
func remember[T any](r *Resolver, m *map[types.NamespacedName]versioned[T], key types.NamespacedName, resourceVersion string, value T) {
	if r.Cache == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if *m == nil {
		*m = map[types.NamespacedName]versioned[T]{}
	}
	(*m)[key] = versioned[T]{resourceVersion, value}
}

var (
	serviceGVK = corev1.SchemeGroupVersion.WithKind("Service")
	secretGVK  = corev1.SchemeGroupVersion.WithKind("Secret")
)

// BuiltinClass returns the spec of a built-in class, resolved from code so a pool on it
// never depends on the object existing.
func BuiltinClass(name string) (v1.NodeGroupClassSpec, bool) {
	switch name {
	case v1.BuiltinTalosClass:
		return v1.NodeGroupClassSpec{OS: v1.OSTalos}, true
	case v1.BuiltinKairosClass:
		return v1.NodeGroupClassSpec{OS: v1.OSKairos}, true
	}
	return v1.NodeGroupClassSpec{}, false
}

// Class resolves a pool's class.
func (r *Resolver) Class(ctx context.Context, name string) (v1.NodeGroupClassSpec, error) {
	if spec, ok := BuiltinClass(name); ok {
		return spec, nil
	}
	var class v1.NodeGroupClass
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &class); err != nil {
		if apierrors.IsNotFound(err) {
			return v1.NodeGroupClassSpec{}, fail(v1.ConditionClassResolved, ReasonClassNotFound, true,
				"NodeGroupClass %q does not exist: set spec.nodeGroupClassName to a published class (kubectl get nodegroupclasses)", name)
		}
		return v1.NodeGroupClassSpec{}, err
	}
	return class.Spec, nil
}

// Resolve reads everything render needs for the pool. On an error, in holds what was
// resolved before it, as far as the checks of Conditions go: the class once
// ClassResolved passed, the location once LocationResolved passed, the cluster facts
// once ClusterFound passed.
func (r *Resolver) Resolve(ctx context.Context, ng *v1.NodeGroup) (*render.Input, error) {
	in := &render.Input{
		Namespace:    ng.Namespace,
		Name:         ng.Name,
		Spec:         *ng.Spec.DeepCopy(),
		ClassName:    ng.Spec.NodeGroupClassName,
		LocationName: ng.Spec.LocationName,
		Factory:      r.Catalog.TalosFactory,
	}
	var err error
	if in.Class, err = r.Class(ctx, in.ClassName); err != nil {
		return in, err
	}
	if in.Location, err = r.location(ctx, ng); err != nil {
		return in, err
	}
	cluster, err := r.cluster(ctx, ng)
	if err != nil {
		return in, err
	}
	if in.Cluster, err = r.clusterFacts(ctx, cluster); err != nil {
		return in, err
	}
	if err := r.version(ctx, in, cluster); err != nil {
		return in, err
	}
	if in.Machine, err = r.machineSize(ctx, ng); err != nil {
		return in, err
	}
	switch in.Class.OS {
	case v1.OSTalos:
		if in.TalosSecrets, err = r.talosSecrets(ctx, ng.Namespace, cluster.Name); err != nil {
			return in, err
		}
	case v1.OSKairos:
		// The controller creates these Secrets before it applies; render only names them.
		in.KairosUserSecret = credentials.WorkerPasswordName(cluster.Name)
		if in.Class.ImagePullSecretRef != nil {
			in.ImagePullSecret = credentials.PullSecretName(in.ClassName)
		}
	}
	return in, nil
}

// cluster reads the pool's Cluster, always in the pool's own namespace.
func (r *Resolver) cluster(ctx context.Context, ng *v1.NodeGroup) (*clusterv1.Cluster, error) {
	var c clusterv1.Cluster
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ng.Namespace, Name: ng.Spec.ClusterName}, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fail(v1.ConditionClusterFound, ReasonClusterNotFound, true,
				"Cluster %q does not exist in namespace %q: create it, or set spec.clusterName to a Cluster of this namespace", ng.Spec.ClusterName, ng.Namespace)
		}
		return nil, err
	}
	return &c, nil
}

func (r *Resolver) clusterFacts(ctx context.Context, c *clusterv1.Cluster) (render.Cluster, error) {
	facts := render.Cluster{
		Name:                c.Name,
		ControlPlaneHost:    c.Spec.ControlPlaneEndpoint.Host,
		ControlPlanePort:    c.Spec.ControlPlaneEndpoint.Port,
		ServiceCIDRs:        c.Spec.ClusterNetwork.Services.CIDRBlocks,
		PodCIDRs:            c.Spec.ClusterNetwork.Pods.CIDRBlocks,
		DNSDomain:           c.Spec.ClusterNetwork.ServiceDomain,
		ManagementDNSDomain: r.ManagementDNSDomain,
	}
	if facts.DNSDomain == "" {
		facts.DNSDomain = defaultServiceDomain
	}
	if facts.ManagementDNSDomain == "" {
		facts.ManagementDNSDomain = defaultServiceDomain
	}
	if facts.ControlPlaneHost == "" || facts.ControlPlanePort == 0 {
		return facts, fail(v1.ConditionClusterFound, ReasonControlPlanePending, true,
			"Cluster %q has no spec.controlPlaneEndpoint yet; waiting for its control plane", c.Name)
	}
	if len(facts.ServiceCIDRs) == 0 {
		return facts, fail(v1.ConditionClusterFound, ReasonControlPlanePending, false,
			"Cluster %q has no spec.clusterNetwork.services.cidrBlocks: set the tenant's service range so its DNS address is known", c.Name)
	}
	dns, err := TenantDNSAddress(facts.ServiceCIDRs[0])
	if err != nil {
		return facts, fail(v1.ConditionClusterFound, ReasonNetworkNotSupported, false, "Cluster %q: %v", c.Name, err)
	}
	facts.TenantDNS = dns

	if c.Spec.ControlPlaneRef.Kind == kamajiControlPlaneKind {
		// Kamaji serves the tenant API server through a Service named after the control plane.
		svc, err := r.serviceIP(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name})
		if err != nil {
			return facts, err
		}
		facts.APIServer = render.ServiceAddress{Name: c.Spec.ControlPlaneRef.Name, Namespace: c.Namespace, ClusterIP: svc}
	}
	if r.ManagementDNS.Name != "" {
		ip, err := r.serviceIP(ctx, r.ManagementDNS)
		if err != nil {
			return facts, err
		}
		facts.ManagementDNS = ip
	}
	return facts, nil
}

func (r *Resolver) serviceIP(ctx context.Context, key types.NamespacedName) (string, error) {
	return once(ctx, r, &r.services, serviceGVK, key, r.serviceIPLive)
}

func (r *Resolver) serviceIPLive(ctx context.Context, key types.NamespacedName) (string, error) {
	var svc corev1.Service
	if err := r.APIReader.Get(ctx, key, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fail(v1.ConditionClusterFound, ReasonControlPlanePending, true, "Service %s does not exist yet; waiting for it", key)
		}
		return "", err
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		remember(r, &r.services, key, svc.ResourceVersion, ip)
		return ip, nil
	}
	return "", fail(v1.ConditionClusterFound, ReasonControlPlanePending, true, "Service %s has no ClusterIP yet; waiting for it", key)
}

// version picks the exact release of the pool. Whether it may run it (not ahead of the
// control plane, the minor of a class's image) is a rule of internal/policy.
func (r *Resolver) version(ctx context.Context, in *render.Input, c *clusterv1.Cluster) error {
	cpVersion, err := r.ControlPlaneVersion(ctx, c)
	if err != nil {
		return err
	}
	want := in.Spec.KubernetesVersion
	if in.Class.Image != nil {
		// A class with an image fixes the release: its kubelet and kubeadm are built in.
		want = in.Class.Image.KubernetesVersion
	}
	if want == "" {
		want = cpVersion
	}
	if want == "" {
		return fail(v1.ConditionClusterFound, ReasonControlPlanePending, true,
			"the control plane of Cluster %q reports no version yet; set spec.kubernetesVersion or wait", c.Name)
	}
	in.ControlPlaneVersion = cpVersion
	release, ok := r.Catalog.Lookup(want)
	if !ok {
		return fail(v1.ConditionRendered, ReasonVersionNotSupported, false,
			"Kubernetes %s is not in the platform catalog (supported minors: %s)", want, strings.Join(r.Catalog.Minors(), ", "))
	}
	in.Release = release
	switch {
	case in.Class.Image != nil:
		in.KubernetesVersion = in.Class.Image.KubernetesVersion
	case isPatch(in.Spec.KubernetesVersion) && in.Class.OS == v1.OSTalos:
		// Talos runs any patch of the minor: honour an exact request.
		in.KubernetesVersion = in.Spec.KubernetesVersion
	default:
		in.KubernetesVersion = release.Kubernetes
	}
	return nil
}

// ControlPlaneVersion reads spec.version of the Cluster's control plane object, whose
// served version is found through the RESTMapper (v1beta2 references carry no version).
func (r *Resolver) ControlPlaneVersion(ctx context.Context, c *clusterv1.Cluster) (string, error) {
	ref := c.Spec.ControlPlaneRef
	if ref.Name == "" {
		return c.Spec.Topology.Version, nil
	}
	mapping, err := r.Mapper.RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		return "", fail(v1.ConditionClusterFound, ReasonControlPlanePending, true,
			"the control plane kind %s.%s of Cluster %q is not served: %v", ref.Kind, ref.APIGroup, c.Name, err)
	}
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(mapping.GroupVersionKind)
	reader, opts := r.Client, []client.GetOption(nil)
	if r.Cache != nil && mapping.GroupVersionKind.GroupKind() == kamajiControlPlane {
		// Only this kind: the operator is allowed to watch it (and does), while an
		// informer on a kind it may not list would never sync. One field is read: no
		// copy of the cached object.
		reader, opts = r.Cache, []client.GetOption{client.UnsafeDisableDeepCopy}
	}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, cp, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fail(v1.ConditionClusterFound, ReasonControlPlanePending, true,
				"%s %q of Cluster %q does not exist yet; waiting for it", ref.Kind, ref.Name, c.Name)
		}
		return "", err
	}
	v, _, _ := unstructured.NestedString(cp.Object, "spec", "version")
	if v != "" && !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v, nil
}

func (r *Resolver) machineSize(ctx context.Context, ng *v1.NodeGroup) (render.MachineSize, error) {
	if res := ng.Spec.Resources; res != nil {
		return render.MachineSize{MilliCPU: res.CPU.MilliValue(), MemoryBytes: res.Memory.Value()}, nil
	}
	name := ng.Spec.InstanceType
	it := &unstructured.Unstructured{}
	mapping, err := r.Mapper.RESTMapping(schema.GroupKind{Group: instancetypeGroup, Kind: instancetypeKind})
	if err != nil {
		return render.MachineSize{}, fail(v1.ConditionRendered, ReasonInstanceTypeNotFound, true,
			"spec.instanceType %q: KubeVirt instancetypes are not served by this cluster (%v): use spec.resources", name, err)
	}
	it.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, it); err != nil {
		if apierrors.IsNotFound(err) {
			return render.MachineSize{}, fail(v1.ConditionRendered, ReasonInstanceTypeNotFound, true,
				"spec.instanceType %q: no VirtualMachineClusterInstancetype of that name (kubectl get virtualmachineclusterinstancetypes)", name)
		}
		return render.MachineSize{}, err
	}
	cpus, _, _ := unstructured.NestedInt64(it.Object, "spec", "cpu", "guest")
	memory, _, _ := unstructured.NestedString(it.Object, "spec", "memory", "guest")
	q, err := resource.ParseQuantity(memory)
	if err != nil || cpus <= 0 {
		return render.MachineSize{}, fail(v1.ConditionRendered, ReasonInstanceTypeNotFound, false,
			"VirtualMachineClusterInstancetype %q has no usable spec.cpu.guest and spec.memory.guest", name)
	}
	return render.MachineSize{MilliCPU: cpus * 1000, MemoryBytes: q.Value(), InstanceType: name}, nil
}

func (r *Resolver) talosSecrets(ctx context.Context, namespace, cluster string) (*render.TalosSecrets, error) {
	v, err := once(ctx, r, &r.secrets, secretGVK, types.NamespacedName{Namespace: namespace, Name: cluster + TalosSecretSuffix}, r.talosSecretsLive)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func (r *Resolver) talosSecretsLive(ctx context.Context, key types.NamespacedName) (render.TalosSecrets, error) {
	namespace, name := key.Namespace, key.Name
	var s corev1.Secret
	if err := r.APIReader.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return render.TalosSecrets{}, fail(v1.ConditionRendered, ReasonTalosSecretsMissing, true,
				"Secret %s/%s with the cluster's Talos join identity does not exist yet: the operator makes it from the cluster's CA once the control-plane provider has written it (condition TalosIdentityReady says what it waits for), unless the platform brings its own (keys %s)",
				namespace, name, strings.Join(talosKeys, ", "))
		}
		return render.TalosSecrets{}, err
	}
	var missing []string
	for _, k := range talosKeys {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return render.TalosSecrets{}, fail(v1.ConditionRendered, ReasonTalosSecretsMissing, true,
			"Secret %s/%s lacks the keys %s", namespace, name, strings.Join(missing, ", "))
	}
	v := render.TalosSecrets{
		MachineToken:   string(s.Data[TalosKeyMachineToken]),
		MachineCACert:  string(s.Data[TalosKeyMachineCACert]),
		ClusterCACert:  string(s.Data[TalosKeyClusterCACert]),
		ClusterID:      string(s.Data[TalosKeyClusterID]),
		ClusterSecret:  string(s.Data[TalosKeyClusterSecret]),
		BootstrapToken: string(s.Data[TalosKeyBootstrapToken]),
	}
	remember(r, &r.secrets, key, s.ResourceVersion, v)
	return v, nil
}

var kamajiControlPlane = schema.GroupKind{Group: kamajiControlPlaneGroup, Kind: kamajiControlPlaneKind}

var talosKeys = []string{TalosKeyMachineToken, TalosKeyMachineCACert, TalosKeyClusterCACert, TalosKeyClusterID, TalosKeyClusterSecret, TalosKeyBootstrapToken}

func isPatch(v string) bool { return strings.Count(v, ".") == 2 }
