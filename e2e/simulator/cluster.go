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
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// tenantRetry is how soon the simulated Kamaji tries again a tenant API server that did
// not answer.
const tenantRetry = 2 * time.Second

// addCluster plays the cluster level: the KubevirtCluster, and Kamaji for a
// KamajiControlPlane (its status, the tenant's join setup, and the <cluster>-kubeconfig
// and <cluster>-ca Secrets).
func (s *sim) addCluster(mgr ctrl.Manager) error {
	toCluster := handler.EnqueueRequestsFromMapFunc(s.clustersReferencing)
	return ctrl.NewControllerManagedBy(mgr).
		Named("simulator-cluster").
		For(&clusterv1.Cluster{}).
		Watches(newObject(KubevirtClusterGVK), toCluster).
		Watches(newObject(KamajiControlPlaneGVK), toCluster).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			c := o.GetLabels()[clusterv1.ClusterNameLabel]
			if c != "" && (o.GetName() == c+kubeconfigSuffix || o.GetName() == c+caSuffix) {
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
	var kcp *unstructured.Unstructured
	if ref := c.Spec.ControlPlaneRef; ref.APIGroup == KamajiControlPlaneGVK.Group && ref.Kind == KamajiControlPlaneGVK.Kind {
		var err error
		if kcp, err = s.get(ctx, KamajiControlPlaneGVK, c.Namespace, ref.Name); err != nil {
			return reconcile.Result{}, err
		}
		if kcp != nil && !kcp.GetDeletionTimestamp().IsZero() {
			kcp = nil
		}
	}
	// The endpoint Kamaji writes into the control plane and the infrastructure cluster:
	// the Cluster's own, else the tenant API server's.
	endpoint := c.Spec.ControlPlaneEndpoint
	var tenant Tenant
	if kcp != nil {
		var err error
		if tenant, err = s.tenants(req.NamespacedName); err != nil {
			return reconcile.Result{}, fmt.Errorf("the tenant of Cluster %s: %w", req.NamespacedName, err)
		}
		if !endpoint.IsValid() {
			if endpoint, err = kubeconfigEndpoint(tenant.Kubeconfig); err != nil {
				return reconcile.Result{}, fmt.Errorf("the tenant of Cluster %s: %w", req.NamespacedName, err)
			}
		}
	}

	// The infrastructure cluster (v1beta1 contract): ready, with that endpoint.
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
	if kcp == nil {
		return reconcile.Result{}, nil
	}

	// The control plane (v1beta2 contract): its endpoint at once, as Kamaji does once the
	// tenant control plane has one; initialized, every replica up to date and available
	// at spec.version once the tenant is set up for joins; then the Secrets.
	if err := s.setEndpoint(ctx, kcp, endpoint); err != nil {
		return reconcile.Result{}, err
	}
	if err := s.prepareTenant(ctx, tenant); err != nil {
		log.FromContext(ctx).Info("simulated Kamaji: the tenant API server does not answer yet", "cluster", req.NamespacedName, "error", err.Error())
		return reconcile.Result{RequeueAfter: tenantRetry}, nil
	}
	if err := s.patch(ctx, kcp, true, func() error { return controlPlaneStatus(kcp) }); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, s.kamajiSecrets(ctx, c, kcp, tenant)
}

// setEndpoint fills spec.controlPlaneEndpoint when it is empty.
func (s *sim) setEndpoint(ctx context.Context, obj *unstructured.Unstructured, endpoint clusterv1.APIEndpoint) error {
	if !endpoint.IsValid() {
		return nil
	}
	if host, _, _ := unstructured.NestedString(obj.Object, "spec", "controlPlaneEndpoint", "host"); host != "" {
		return nil
	}
	return s.patch(ctx, obj, false, func() error {
		return unstructured.SetNestedMap(obj.Object, map[string]any{"host": endpoint.Host, "port": int64(endpoint.Port)}, "spec", "controlPlaneEndpoint")
	})
}

// controlPlaneStatus sets the KamajiControlPlane status Cluster API reads: initialized
// (v1beta2 contract), ready, the version, replica counts that say it is stable, and an
// Available condition.
func controlPlaneStatus(kcp *unstructured.Unstructured) error {
	version, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	if reported, _, _ := unstructured.NestedString(kcp.Object, "status", "version"); reported != "" && kcp.GetAnnotations()[AnnotationUpgradeInProgress] != "" {
		// An upgrade takes Kamaji a while: until the test says it is over, the tenant
		// control plane still reports the version it ran.
		version = reported
	}
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
			"message": "simulated: the tenant API server is the control plane", "observedGeneration": kcp.GetGeneration(),
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
