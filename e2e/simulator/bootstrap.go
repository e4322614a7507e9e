package simulator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// bootstrapData computes a config's bootstrap data for its Machine, as the provider
// would. An error wrapping errNotReady is a wait, retried without an event.
type bootstrapData func(ctx context.Context, cfg *unstructured.Unstructured, m *clusterv1.Machine) (*bootstrapResult, error)

// bootstrapResult is a bootstrap provider's output for one config.
type bootstrapResult struct {
	// value is the data Secret's "value".
	value []byte
	// status holds status fields of the config besides the contract's, by dotted path.
	status map[string]any
	// recheck, if set, is when to look again (a token to refresh).
	recheck time.Duration
}

// errNotReady is what a bootstrap provider waits for: something another controller
// makes (a Secret, an endpoint).
var errNotReady = errors.New("not ready")

// notReadyRetry is how soon a bootstrap provider looks again at what it waits for.
const notReadyRetry = 2 * time.Second

// addBootstrap plays a bootstrap provider for one config kind: once the owning Machine
// exists, the data Secret and the config's status.
func (s *sim) addBootstrap(mgr ctrl.Manager, gvk schema.GroupVersionKind, data bootstrapData) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simulator-"+strings.ToLower(gvk.Kind)).
		For(newObject(gvk)).
		Owns(&corev1.Secret{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return refRequest(o.GetNamespace(), o.(*clusterv1.Machine).Spec.Bootstrap.ConfigRef, gvk)
		})).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return s.reconcileBootstrap(ctx, req, gvk, data)
		}))
}

func (s *sim) reconcileBootstrap(ctx context.Context, req reconcile.Request, gvk schema.GroupVersionKind, data bootstrapData) (reconcile.Result, error) {
	cfg, err := s.get(ctx, gvk, req.Namespace, req.Name)
	if cfg == nil || err != nil || !cfg.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, err
	}
	m, err := s.ownerMachine(ctx, cfg)
	if m == nil || err != nil {
		return reconcile.Result{}, err // no owner yet: the update that adds it brings us back
	}
	out, err := data(ctx, cfg, m)
	if errors.Is(err, errNotReady) {
		log.FromContext(ctx).Info("simulated bootstrap provider: waiting", "config", req.NamespacedName, "for", err.Error())
		return reconcile.Result{RequeueAfter: notReadyRetry}, nil
	}
	if err != nil {
		s.refuse(ctx, m, "BootstrapDataRefused", fmt.Errorf("%s %s: %w", gvk.Kind, cfg.GetName(), err))
		return reconcile.Result{}, nil
	}
	if err := s.ensureSecret(ctx, cfg, cfg.GetName(), map[string]string{clusterv1.ClusterNameLabel: m.Spec.ClusterName},
		map[string][]byte{dataKey: out.value}); err != nil {
		return reconcile.Result{}, err
	}
	// Both contract forms where the kind's schema has them: status.ready (v1beta1) and
	// status.initialization.dataSecretCreated (v1beta2, KairosConfig only).
	fields := map[string]any{"status.ready": true, "status.dataSecretName": cfg.GetName()}
	if gvk == KairosConfigGVK {
		fields["status.initialization.dataSecretCreated"] = true
	}
	maps.Copy(fields, out.status)
	return reconcile.Result{RequeueAfter: out.recheck}, s.patch(ctx, cfg, true, func() error { return setFields(cfg, fields) })
}

// talosData is CABPT with generateType none: the machine config in spec.data, as is.
func (s *sim) talosData(_ context.Context, cfg *unstructured.Unstructured, _ *clusterv1.Machine) (*bootstrapResult, error) {
	spec, _, _ := unstructured.NestedMap(cfg.Object, "spec")
	if t := spec["generateType"]; t != "none" {
		return nil, fmt.Errorf("generateType %v is not simulated (only none)", t)
	}
	for _, f := range []string{"configPatches", "strategicPatches", "hostname"} {
		if _, ok := spec[f]; ok {
			return nil, fmt.Errorf("spec.%s is not simulated", f)
		}
	}
	data, _ := spec["data"].(string)
	if data == "" {
		return nil, errors.New("spec.data is empty, and generateType none needs it")
	}
	return &bootstrapResult{value: []byte(data)}, nil
}

// refuse reports what a provider or a kubelet would refuse, on the Machine and in the
// log; it is not retried (the objects it is computed from do not change).
func (s *sim) refuse(ctx context.Context, m *clusterv1.Machine, reason string, err error) {
	log.FromContext(ctx).Error(err, "simulated provider refuses", "machine", client.ObjectKeyFromObject(m), "reason", reason)
	s.events.Eventf(m, nil, corev1.EventTypeWarning, reason, "Simulate", "%v", err)
}

// newObject is an empty object of a provider kind.
func newObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	return obj
}

// refRequest is the request for the object a contract reference names, if it is of kind gvk.
func refRequest(ns string, ref clusterv1.ContractVersionedObjectReference, gvk schema.GroupVersionKind) []reconcile.Request {
	if ref.APIGroup != gvk.Group || ref.Kind != gvk.Kind || ref.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: ref.Name}}}
}
