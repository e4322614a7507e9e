// capmox v0.9 for workers: a ProxmoxCluster is provisioned once its credentials log in
// to a Proxmox VE site; a ProxmoxMachine gets its VM there, the providerID
// proxmox://<SMBIOS UUID>, once its Machine has bootstrap data and its cluster is
// provisioned. The VM's Talos then joins through its machine config (node.go), and its
// kubelet registers the Node without a providerID, as Talos on Proxmox does
// (siderolabs/talos#14342): linking it is the operator's job.

package simulator

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The capmox kinds the simulator plays, at the version the operator renders (capmox's
// storage version).
var (
	ProxmoxClusterGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha2", Kind: "ProxmoxCluster"}
	ProxmoxMachineGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha2", Kind: "ProxmoxMachine"}
)

const (
	// proxmoxProviderIDPrefix is capmox's providerID scheme.
	proxmoxProviderIDPrefix = "proxmox://"
	// AnnotationProxmoxSite, on a ProxmoxMachine, is the URL of the site its VM was made
	// at: what the credentials of its cluster logged in to.
	AnnotationProxmoxSite = "e2e.nodegroup.io/proxmox-site"
)

// ProxmoxSite is a simulated Proxmox VE cluster: its API URL and the one API token it
// accepts, as capmox reads them from a credentials Secret (keys url, token, secret).
type ProxmoxSite struct {
	URL, Token, Secret string
}

// addProxmox plays capmox.
func (s *sim) addProxmox(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("simulator-proxmoxcluster").
		For(newObject(ProxmoxClusterGVK)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(s.proxmoxClustersOfSecret)).
		Complete(reconcile.Func(s.reconcileProxmoxCluster))
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("simulator-proxmoxmachine").
		For(newObject(ProxmoxMachineGVK)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return refRequest(o.GetNamespace(), o.(*clusterv1.Machine).Spec.InfrastructureRef, ProxmoxMachineGVK)
		})).
		Complete(reconcile.Func(s.reconcileProxmoxMachine))
}

// proxmoxClustersOfSecret maps a Secret to the ProxmoxClusters that read it.
func (s *sim) proxmoxClustersOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ProxmoxClusterGVK.GroupVersion().WithKind(ProxmoxClusterGVK.Kind + "List"))
	if err := s.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, pc := range list.Items {
		if name, _, _ := unstructured.NestedString(pc.Object, "spec", "credentialsRef", "name"); name == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pc)})
		}
	}
	return out
}

// site is the Proxmox VE site a ProxmoxCluster's credentials log in to; an error says
// why they do not, as capmox's login would fail.
func (s *sim) site(ctx context.Context, pc *unstructured.Unstructured) (*ProxmoxSite, error) {
	name, _, _ := unstructured.NestedString(pc.Object, "spec", "credentialsRef", "name")
	ns, _, _ := unstructured.NestedString(pc.Object, "spec", "credentialsRef", "namespace")
	if name == "" {
		return nil, fmt.Errorf("ProxmoxCluster %s has no credentialsRef", pc.GetName())
	}
	if ns == "" {
		ns = pc.GetNamespace()
	}
	secret := &corev1.Secret{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("the credentials Secret %s/%s: %w", ns, name, err)
	}
	url, token, key := string(secret.Data["url"]), string(secret.Data["token"]), string(secret.Data["secret"])
	for i := range s.proxmoxSites {
		site := &s.proxmoxSites[i]
		if site.URL == url {
			if site.Token != token || site.Secret != key {
				return nil, fmt.Errorf("%s refuses the API token %q of Secret %s/%s: 401 authentication failure", url, token, ns, name)
			}
			return site, nil
		}
	}
	return nil, fmt.Errorf("no Proxmox VE API answers at %q (Secret %s/%s)", url, ns, name)
}

// reconcileProxmoxCluster provisions the cluster (v1beta2 contract) once its
// credentials log in; its endpoint is the satellite's, externally managed.
func (s *sim) reconcileProxmoxCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pc, err := s.get(ctx, ProxmoxClusterGVK, req.Namespace, req.Name)
	if pc == nil || err != nil || !pc.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, err
	}
	if _, err := s.site(ctx, pc); err != nil {
		s.events.Eventf(pc, nil, corev1.EventTypeWarning, "ProxmoxLoginFailed", "Simulate", "%v", err)
		return reconcile.Result{}, nil // a change to the Secret is watched
	}
	return reconcile.Result{}, s.patch(ctx, pc, true, func() error {
		return unstructured.SetNestedField(pc.Object, true, "status", "initialization", "provisioned")
	})
}

// reconcileProxmoxMachine makes the VM: at the site its cluster's credentials log in
// to, once the Machine has bootstrap data (capmox writes it to the VM's NoCloud disk).
// Its SMBIOS UUID is the object's UID, unique as a VM's is.
func (s *sim) reconcileProxmoxMachine(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pm, err := s.get(ctx, ProxmoxMachineGVK, req.Namespace, req.Name)
	if pm == nil || err != nil || !pm.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, err
	}
	m, err := s.ownerMachine(ctx, pm)
	if m == nil || err != nil || m.Spec.Bootstrap.DataSecretName == nil {
		return reconcile.Result{}, err
	}
	c := &clusterv1.Cluster{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ref := c.Spec.InfrastructureRef
	if refRequest(c.Namespace, ref, ProxmoxClusterGVK) == nil {
		s.refuse(ctx, m, "NotAProxmoxCluster", fmt.Errorf("the Cluster %s of a ProxmoxMachine has the infrastructure %s %s", c.Name, ref.Kind, ref.Name))
		return reconcile.Result{}, nil
	}
	pc, err := s.get(ctx, ProxmoxClusterGVK, c.Namespace, ref.Name)
	if pc == nil || err != nil {
		return reconcile.Result{}, err
	}
	if ok, _, _ := unstructured.NestedBool(pc.Object, "status", "initialization", "provisioned"); !ok {
		return reconcile.Result{}, nil // the ProxmoxCluster's update brings the Machine back
	}
	site, err := s.site(ctx, pc)
	if err != nil {
		s.refuse(ctx, m, "ProxmoxLoginFailed", err)
		return reconcile.Result{}, nil
	}
	if got := pm.GetAnnotations()[AnnotationProxmoxSite]; got == "" {
		if err := s.patch(ctx, pm, false, func() error {
			pm.SetAnnotations(mergeMaps(pm.GetAnnotations(), map[string]string{AnnotationProxmoxSite: site.URL}))
			return unstructured.SetNestedField(pm.Object, proxmoxProviderIDPrefix+string(pm.GetUID()), "spec", "providerID")
		}); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, s.patch(ctx, pm, true, func() error {
		return setFields(pm, map[string]any{"status.initialization.provisioned": true, "status.ready": true})
	})
}

// proxmoxCapacity is the VM's vCPUs (sockets times cores) and memory as capmox sizes it.
func proxmoxCapacity(vm *unstructured.Unstructured) corev1.ResourceList {
	out := corev1.ResourceList{}
	sockets, _, _ := unstructured.NestedInt64(vm.Object, "spec", "numSockets")
	cores, _, _ := unstructured.NestedInt64(vm.Object, "spec", "numCores")
	if cores > 0 {
		out[corev1.ResourceCPU] = *resource.NewQuantity(max(sockets, 1)*cores, resource.DecimalSI)
	}
	if mib, _, _ := unstructured.NestedInt64(vm.Object, "spec", "memoryMiB"); mib > 0 {
		out[corev1.ResourceMemory] = *resource.NewQuantity(mib<<20, resource.BinarySI)
	}
	return out
}

// systemUUID is the SMBIOS UUID a VM's kubelet reports: capmox's providerID names it.
func systemUUID(providerID string) string {
	uuid, _ := strings.CutPrefix(providerID, proxmoxProviderIDPrefix)
	return uuid
}
