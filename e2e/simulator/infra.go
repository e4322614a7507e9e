package simulator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// cacheLag is how long to wait for an object the simulator itself just wrote to reach
// the cache, the only case it requeues for.
const cacheLag = time.Second

// addInfra plays CAPK for KubevirtMachines: once the Machine has bootstrap data, the
// "VM" is up at once.
func (s *sim) addInfra(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simulator-kubevirtmachine").
		For(newObject(KubevirtMachineGVK)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return refRequest(o.GetNamespace(), o.(*clusterv1.Machine).Spec.InfrastructureRef, KubevirtMachineGVK)
		})).
		Complete(reconcile.Func(s.reconcileInfra))
}

func (s *sim) reconcileInfra(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vm, err := s.get(ctx, KubevirtMachineGVK, req.Namespace, req.Name)
	if vm == nil || err != nil || !vm.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, err
	}
	m, err := s.ownerMachine(ctx, vm)
	if m == nil || err != nil || m.Spec.Bootstrap.DataSecretName == nil {
		return reconcile.Result{}, err
	}
	// CAPK reads the data Secret's "value" to build the VM's cloud-init disk.
	secret := &corev1.Secret{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: vm.GetNamespace(), Name: *m.Spec.Bootstrap.DataSecretName}, secret); err != nil {
		return reconcile.Result{RequeueAfter: cacheLag}, client.IgnoreNotFound(err)
	}
	if _, ok := secret.Data[dataKey]; !ok {
		s.refuse(ctx, m, "BootstrapDataMissing", fmt.Errorf("the bootstrap data Secret %s has no %q key", secret.Name, dataKey))
		return reconcile.Result{}, nil
	}
	if id, _, _ := unstructured.NestedString(vm.Object, "spec", "providerID"); id == "" {
		if err := s.patch(ctx, vm, false, func() error {
			return unstructured.SetNestedField(vm.Object, "kubevirt://"+vm.GetName(), "spec", "providerID")
		}); err != nil {
			return reconcile.Result{}, err
		}
	}
	// CAPK v0.11 is a v1beta1-contract provider: its status has ready, no initialization.
	return reconcile.Result{}, s.patch(ctx, vm, true, func() error {
		return unstructured.SetNestedField(vm.Object, true, "status", "ready")
	})
}

// addCluster plays the cluster level: the KubevirtCluster, the KamajiControlPlane and the
// <cluster>-kubeconfig Secret.
func (s *sim) addCluster(mgr ctrl.Manager) error {
	toCluster := handler.EnqueueRequestsFromMapFunc(s.clustersReferencing)
	return ctrl.NewControllerManagedBy(mgr).
		Named("simulator-cluster").
		For(&clusterv1.Cluster{}).
		Watches(newObject(KubevirtClusterGVK), toCluster).
		Watches(newObject(KamajiControlPlaneGVK), toCluster).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if c := o.GetLabels()[clusterv1.ClusterNameLabel]; c != "" && o.GetName() == c+"-kubeconfig" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: c}}}
			}
			return nil
		})).
		Complete(reconcile.Func(s.reconcileCluster))
}

// clustersReferencing maps an infrastructure cluster or a control plane to the Clusters
// of its namespace that reference it.
func (s *sim) clustersReferencing(ctx context.Context, obj client.Object) []reconcile.Request {
	var clusters clusterv1.ClusterList
	if err := s.List(ctx, &clusters, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	var out []reconcile.Request
	for _, c := range clusters.Items {
		for _, ref := range []clusterv1.ContractVersionedObjectReference{c.Spec.InfrastructureRef, c.Spec.ControlPlaneRef} {
			if ref.APIGroup == gvk.Group && ref.Kind == gvk.Kind && ref.Name == obj.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
			}
		}
	}
	return out
}

func (s *sim) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &clusterv1.Cluster{}
	if err := s.Get(ctx, req.NamespacedName, c); err != nil || !c.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	endpoint := map[string]any{"host": s.endpointOf(c).Host, "port": int64(s.endpointOf(c).Port)}

	// The infrastructure cluster (v1beta1 contract): ready, with the endpoint Kamaji
	// would write into it.
	if ref := c.Spec.InfrastructureRef; ref.APIGroup == KubevirtClusterGVK.Group && ref.Kind == KubevirtClusterGVK.Kind {
		kc, err := s.get(ctx, KubevirtClusterGVK, c.Namespace, ref.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if kc != nil && kc.GetDeletionTimestamp().IsZero() {
			if err := s.setEndpoint(ctx, kc, endpoint); err != nil {
				return reconcile.Result{}, err
			}
			if err := s.patch(ctx, kc, true, func() error { return unstructured.SetNestedField(kc.Object, true, "status", "ready") }); err != nil {
				return reconcile.Result{}, err
			}
		}
	}

	// The control plane (v1beta2 contract): initialized, every replica up to date and
	// available, at spec.version. It also owns the kubeconfig Secret, as Kamaji does.
	var owner client.Object = c
	if ref := c.Spec.ControlPlaneRef; ref.APIGroup == KamajiControlPlaneGVK.Group && ref.Kind == KamajiControlPlaneGVK.Kind {
		kcp, err := s.get(ctx, KamajiControlPlaneGVK, c.Namespace, ref.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if kcp != nil && kcp.GetDeletionTimestamp().IsZero() {
			owner = kcp
			if err := s.setEndpoint(ctx, kcp, endpoint); err != nil {
				return reconcile.Result{}, err
			}
			if err := s.patch(ctx, kcp, true, func() error { return controlPlaneStatus(kcp) }); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	return reconcile.Result{}, s.ensureSecret(ctx, owner, c.Name+"-kubeconfig", c.Name, s.kubeconfig)
}

// setEndpoint fills spec.controlPlaneEndpoint when it is empty.
func (s *sim) setEndpoint(ctx context.Context, obj *unstructured.Unstructured, endpoint map[string]any) error {
	if host, _, _ := unstructured.NestedString(obj.Object, "spec", "controlPlaneEndpoint", "host"); host != "" {
		return nil
	}
	return s.patch(ctx, obj, false, func() error {
		return unstructured.SetNestedMap(obj.Object, endpoint, "spec", "controlPlaneEndpoint")
	})
}

// controlPlaneStatus sets the KamajiControlPlane status Cluster API reads: initialized
// (v1beta2 contract), ready, the version, replica counts that say it is stable, and an
// Available condition.
func controlPlaneStatus(kcp *unstructured.Unstructured) error {
	version, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	replicas, found, _ := unstructured.NestedInt64(kcp.Object, "spec", "replicas")
	if !found {
		replicas = 2 // the CRD's default
	}
	conditions, _, _ := unstructured.NestedSlice(kcp.Object, "status", "conditions")
	available := false
	for _, c := range conditions {
		if c, _ := c.(map[string]any); c["type"] == "Available" && c["status"] == string(metav1.ConditionTrue) {
			available = true
		}
	}
	if !available {
		kept := conditions[:0]
		for _, c := range conditions {
			if c, _ := c.(map[string]any); c["type"] != "Available" {
				kept = append(kept, c)
			}
		}
		conditions = append(kept, map[string]any{
			"type": "Available", "status": string(metav1.ConditionTrue), "reason": "Available",
			"message": "simulated: the test API server is the control plane", "observedGeneration": kcp.GetGeneration(),
			"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
		})
	}
	return setFields(kcp, map[string]any{
		"status.ready": true,
		"status.initialization.controlPlaneInitialized": true,
		"status.externalManagedControlPlane":            true,
		"status.version":                                version,
		"status.replicas":                               replicas,
		"status.readyReplicas":                          replicas,
		"status.availableReplicas":                      replicas,
		"status.upToDateReplicas":                       replicas,
		"status.conditions":                             conditions,
	})
}
