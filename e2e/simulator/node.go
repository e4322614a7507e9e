// A Machine's Node: once its VM is ready, the kubelet joins the tenant and registers
// the Node, and the OS sets its labels, taints and annotations on it.

package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// addNodes plays the worker's kubelet: for each Machine whose infrastructure machine is
// ready, it joins the tenant with what the bootstrap data gives it and registers a Node.
func (s *sim) addNodes(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simulator-node").
		For(&clusterv1.Machine{}).
		Watches(newObject(KubevirtMachineGVK), handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.Machine{})).
		Watches(newObject(ProxmoxMachineGVK), handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.Machine{})).
		// A join waits a moment for its certificate; other Machines need not wait behind it.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(reconcile.Func(s.reconcileNode))
}

func (s *sim) reconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &clusterv1.Machine{}
	if err := s.Get(ctx, req.NamespacedName, m); err != nil || !m.DeletionTimestamp.IsZero() || m.Spec.Bootstrap.DataSecretName == nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // a Machine being deleted never gets a Node
	}
	gvk := KubevirtMachineGVK
	switch {
	case refRequest(m.Namespace, m.Spec.InfrastructureRef, ProxmoxMachineGVK) != nil:
		gvk = ProxmoxMachineGVK
	case refRequest(m.Namespace, m.Spec.InfrastructureRef, KubevirtMachineGVK) == nil:
		return reconcile.Result{}, nil
	}
	vm, err := s.get(ctx, gvk, m.Namespace, m.Spec.InfrastructureRef.Name)
	if vm == nil || err != nil || !vm.GetDeletionTimestamp().IsZero() || vm.GetAnnotations()[AnnotationSimulatedNode] != "" {
		return reconcile.Result{}, err // the VM is gone, or has booted once already
	}
	ready, _, _ := unstructured.NestedBool(vm.Object, "status", "ready")
	if gvk == ProxmoxMachineGVK { // v1beta2 contract
		ready, _, _ = unstructured.NestedBool(vm.Object, "status", "initialization", "provisioned")
	}
	providerID, _, _ := unstructured.NestedString(vm.Object, "spec", "providerID")
	if !ready || providerID == "" {
		return reconcile.Result{}, nil
	}
	// The cache may not hold yet the annotation written when the Node was made: ask the
	// API server before making it a second time.
	fresh := newObject(gvk)
	if err := s.live.Get(ctx, client.ObjectKeyFromObject(vm), fresh); err != nil || fresh.GetAnnotations()[AnnotationSimulatedNode] != "" {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	secret := &corev1.Secret{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}, secret); err != nil {
		return reconcile.Result{RequeueAfter: cacheLag}, client.IgnoreNotFound(err)
	}

	k, err := readBootstrap(m, vm.GetName(), secret.Data[dataKey])
	var node *corev1.Node
	if err == nil {
		if gvk == ProxmoxMachineGVK {
			// The kubelet reports the VM's SMBIOS UUID; the providerID capmox wrote into
			// the NoCloud metadata does not reach it on Talos.
			node, err = k.node(proxmoxCapacity(vm))
			if node != nil {
				node.Status.NodeInfo.SystemUUID = systemUUID(providerID)
			}
		} else {
			node, err = k.node(vmCapacity(vm))
		}
	}
	if err != nil {
		s.refuse(ctx, m, "KubeletRefused", err)
		return reconcile.Result{}, nil
	}
	st, err := s.joinState(fresh.GetUID())
	if err != nil {
		return reconcile.Result{}, err
	}
	credentials, err := s.tlsBootstrap(ctx, st, k)
	if err != nil {
		return s.joinFailed(ctx, m, st, err), nil
	}
	if credentials == nil {
		return reconcile.Result{RequeueAfter: certificatePoll}, nil
	}
	err = register(ctx, credentials, node, osChanges{labels: k.osLabels, annotations: k.annotations, taints: k.osTaints})
	switch {
	case errors.Is(err, errOSRefused):
		// The Node is registered without what the OS asked for; the OS would keep trying
		// and failing, the simulator reports it once.
		s.refuse(ctx, m, "NodeRefused", err)
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		s.refuse(ctx, m, "NodeRefused", err)
		s.joined(fresh.GetUID())
		return reconcile.Result{}, nil
	case err != nil:
		return s.joinFailed(ctx, m, st, err), nil
	}
	s.joined(fresh.GetUID())
	return reconcile.Result{}, s.patch(ctx, vm, false, func() error {
		vm.SetAnnotations(mergeMaps(vm.GetAnnotations(), map[string]string{AnnotationSimulatedNode: node.Name}))
		return nil
	})
}

// joinFailed reports a failed join on the Machine, as a kubelet's log would show it, and
// retries it with backoff, as a kubelet does. A step that is only waiting (cluster-info
// not signed yet for a new token) is retried quietly for a while first.
func (s *sim) joinFailed(ctx context.Context, m *clusterv1.Machine, st *joinState, err error) reconcile.Result {
	var pending pendingError
	if errors.As(err, &pending) && time.Since(st.started) < discoveryGrace {
		return reconcile.Result{RequeueAfter: certificatePoll}
	}
	st.failures++
	log.FromContext(ctx).Info("simulated kubelet: the join failed", "machine", client.ObjectKeyFromObject(m), "error", err.Error())
	s.events.Eventf(m, nil, corev1.EventTypeWarning, "JoinFailed", "Join", "%v", err)
	return reconcile.Result{RequeueAfter: min(time.Second<<min(st.failures-1, 5), joinBackoffCap)}
}

// joinBackoffCap bounds the wait between a kubelet's attempts to join.
const joinBackoffCap = 30 * time.Second

// register creates the Node as the kubelet, with its own credentials (the Node
// authorizer and NodeRestriction apply) and its initial status, as a kubelet's
// registration does (the API server keeps the status of a Node it creates), then has
// the OS set its labels, taints and annotations on it, as Talos does with the kubelet's
// identity. A Node an earlier attempt created is taken as it is. An error wrapping
// errOSRefused is the tenant refusing the OS's step: the Node is registered without
// what it asked for.
func register(ctx context.Context, credentials *rest.Config, node *corev1.Node, fromOS osChanges) error {
	cs, err := kubernetes.NewForConfig(credentials)
	if err != nil {
		return err
	}
	nodes := cs.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = nodes.Get(ctx, node.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	patch, err := fromOS.patch(created)
	if err != nil || patch == nil {
		return err
	}
	if _, err := nodes.Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return fmt.Errorf("%w: %w", errOSRefused, err)
		}
		return err
	}
	return nil
}

// errOSRefused is the tenant API server refusing what the OS sets on its registered
// Node.
var errOSRefused = errors.New("the tenant refuses the node labels, taints or annotations of the machine config")

// osChanges are what the OS sets on the Node once the kubelet has registered it (Talos
// machine.nodeLabels, nodeTaints and nodeAnnotations).
type osChanges struct {
	labels, annotations map[string]string
	taints              []corev1.Taint
}

// patch is the merge patch that brings the Node to what the OS wants, nil when it has it.
func (o osChanges) patch(n *corev1.Node) ([]byte, error) {
	meta := map[string]any{}
	if missing := missingEntries(n.Labels, o.labels); missing != nil {
		meta["labels"] = missing
	}
	if missing := missingEntries(n.Annotations, o.annotations); missing != nil {
		meta["annotations"] = missing
	}
	patch := map[string]any{}
	if len(meta) > 0 {
		patch["metadata"] = meta
	}
	taints := slices.Clone(n.Spec.Taints)
	for _, t := range o.taints {
		if !slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
			taints = slices.DeleteFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
			taints = append(taints, t)
		}
	}
	if len(taints) != len(n.Spec.Taints) || !slices.Equal(taints, n.Spec.Taints) {
		patch["spec"] = map[string]any{"taints": taints}
	}
	if len(patch) == 0 {
		return nil, nil
	}
	return json.Marshal(patch)
}

// missingEntries are the entries of want that have has not, nil when none.
func missingEntries(has, want map[string]string) map[string]string {
	var out map[string]string
	for k, v := range want {
		if got, ok := has[k]; !ok || got != v {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}
