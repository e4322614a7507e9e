package simulator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	// cacheLag is how long to wait for an object the simulator itself just wrote to
	// reach the cache.
	cacheLag = time.Second
	// CAPK's requeue intervals while it waits for the workload cluster's Node, and after
	// the workload cluster failed to answer (updateNodeProviderID).
	nodeWait  = 10 * time.Second
	nodeRetry = 5 * time.Second
)

// addInfra plays CAPK for KubevirtMachines: once the Machine has bootstrap data, the
// "VM" is up at once; once its Node has registered, the Node gets the providerID.
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
	providerID, _, _ := unstructured.NestedString(vm.Object, "spec", "providerID")
	if providerID == "" {
		providerID = "kubevirt://" + vm.GetName()
		if err := s.patch(ctx, vm, false, func() error {
			return unstructured.SetNestedField(vm.Object, providerID, "spec", "providerID")
		}); err != nil {
			return reconcile.Result{}, err
		}
	}
	// CAPK v0.11 is a v1beta1-contract provider: its status has ready, no initialization.
	if err := s.patch(ctx, vm, true, func() error {
		return unstructured.SetNestedField(vm.Object, true, "status", "ready")
	}); err != nil {
		return reconcile.Result{}, err
	}
	return s.updateNodeProviderID(ctx, vm, m.Spec.ClusterName, providerID)
}

// updateNodeProviderID is CAPK's: there is no KubeVirt cloud provider to set the Node's
// providerID, so CAPK patches it onto the workload cluster's Node named after the
// KubevirtMachine, through the <cluster>-kubeconfig Secret, and records that in
// status.nodeupdated.
func (s *sim) updateNodeProviderID(ctx context.Context, vm *unstructured.Unstructured, cluster, providerID string) (reconcile.Result, error) {
	if updated, _, _ := unstructured.NestedBool(vm.Object, "status", "nodeupdated"); updated {
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx)
	workload, err := s.workloadCluster(ctx, vm.GetNamespace(), cluster, agentCAPK)
	if err != nil || workload == nil {
		logger.Info("simulated CAPK: waiting for the workload cluster client", "error", fmt.Sprint(err))
		return reconcile.Result{RequeueAfter: nodeWait}, nil
	}
	node, err := workload.CoreV1().Nodes().Get(ctx, vm.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{RequeueAfter: nodeWait}, nil
	case err != nil:
		logger.Info("simulated CAPK: failed to fetch the workload cluster Node", "node", vm.GetName(), "error", err.Error())
		return reconcile.Result{RequeueAfter: nodeRetry}, nil
	case node.Spec.ProviderID != providerID:
		patch := fmt.Appendf(nil, `{"spec":{"providerID":%q}}`, providerID)
		if _, err := workload.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			logger.Info("simulated CAPK: failed to patch the workload cluster Node", "node", node.Name, "error", err.Error())
			return reconcile.Result{RequeueAfter: nodeRetry}, nil
		}
	}
	return reconcile.Result{}, s.patch(ctx, vm, true, func() error {
		return unstructured.SetNestedField(vm.Object, true, "status", "nodeupdated")
	})
}
