package controlplanedns

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
)

// Reconciler publishes the tenant DNS address of Clusters with pools on their
// KamajiControlPlane. See the package comment.
type Reconciler struct {
	// Client reads Clusters and NodeGroups from the cache and sends the apply.
	Client client.Client
	// APIReader reads the KamajiControlPlane live, so the comparison before a write
	// never sees a stale copy.
	APIReader client.Reader
	// Cache is the manager's informer cache (Register sets it when nil). The control
	// plane is read from it first; only when that copy calls for a write is it read
	// live, so a resync of a published Cluster sends no request.
	Cache client.Reader
	// Recorder emits the events on the Cluster; Register sets it when nil.
	Recorder events.EventRecorder

	mu sync.Mutex
	// reported is the last outcome reported per Cluster (its UID, reason and message),
	// so an unchanged outcome is not reported again on every resync.
	reported map[types.NamespacedName]string
}

// Name of the controller.
func (r *Reconciler) Name() string { return "controlplanedns" }

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kamajicontrolplanes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile publishes one Cluster's DNS address. Every outcome other than an API error
// ends the reconcile without a requeue: what could change it (the Cluster, its control
// plane, its pools) is watched.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() || !kamaji.IsControlPlaneOf(c) || paused.Cluster(c) {
		return ctrl.Result{}, nil // a paused Cluster's control plane is left alone; the pools say why
	}
	pools := &v1.NodeGroupList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(c.Namespace), client.MatchingFields{operator.PoolsByCluster: c.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	if len(pools.Items) == 0 {
		return ctrl.Result{}, nil // no workers to join: nothing needs the address
	}
	kcp, a, err := r.assess(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	if kcp != nil && !kcp.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}

	wrote := false
	if a.write {
		switch err := r.publish(ctx, kcp, a.addr); {
		case err == nil:
			wrote = true
			log.FromContext(ctx).Info("published the tenant DNS address", "kamajiControlPlane", kcp.GetName(), "address", a.addr)
			r.event(c, corev1.EventTypeNormal, ReasonPublished, "set spec.network.dnsServiceIPs of KamajiControlPlane %s to [%s], the 10th address of service CIDR %s",
				kcp.GetName(), a.addr, c.Spec.ClusterNetwork.Services.CIDRBlocks[0])
		case apierrors.IsConflict(err):
			// Another manager took the field between our read and the apply.
			a.ok, a.reason = false, ReasonConflict
			a.message = fmt.Sprintf("spec.network.dnsServiceIPs of KamajiControlPlane %s was not set to [%s]: %v. The operator does not take the field over",
				kcp.GetName(), a.addr, err)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			// Refused for its content (an admission webhook, the schema): retrying sends
			// the same request, so it waits for a change like the other outcomes.
			a.ok, a.reason = false, ReasonNotPublished
			a.message = fmt.Sprintf("setting spec.network.dnsServiceIPs of KamajiControlPlane %s to [%s] was refused: %v", kcp.GetName(), a.addr, err)
		default:
			return ctrl.Result{}, fmt.Errorf("setting spec.network.dnsServiceIPs of KamajiControlPlane %s: %w", kcp.GetName(), err)
		}
	}
	r.report(ctx, c, a, wrote)
	return ctrl.Result{}, nil
}

// assess reads the Cluster's control plane from the cache and assesses it. The cache
// strips managedFields, so a copy that holds another address cannot tell a conflict
// from a write: then, or when the cache cannot answer, the live object decides. A copy
// without the field needs no read: nobody owns an unset field, and should someone set
// it meanwhile, the apply (never forced) fails with a conflict that is reported as one.
func (r *Reconciler) assess(ctx context.Context, c *clusterv1.Cluster) (*unstructured.Unstructured, assessment, error) {
	if r.Cache != nil {
		if kcp, err := getControlPlane(ctx, r.Cache, c); err == nil && kcp != nil {
			a := assess(c, kcp)
			if _, set, _ := unstructured.NestedFieldNoCopy(kcp.Object, dnsField...); !a.write || !set {
				return kcp, a, nil
			}
		}
	}
	kcp, err := getControlPlane(ctx, r.APIReader, c)
	if err != nil {
		return nil, assessment{}, err
	}
	return kcp, assess(c, kcp), nil
}

// publish applies spec.network.dnsServiceIPs = [addr] and nothing else, without forcing
// ownership: the API server refuses it with a conflict if another manager owns the field.
func (r *Reconciler) publish(ctx context.Context, kcp *unstructured.Unstructured, addr string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	u.SetNamespace(kcp.GetNamespace())
	u.SetName(kcp.GetName())
	if err := unstructured.SetNestedStringSlice(u.Object, []string{addr}, dnsField...); err != nil {
		return err
	}
	return r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager))
}

// report emits an event and a log line when the outcome for the Cluster changed. A
// cluster found fine on the first look (after a restart, or a value someone else set)
// gets no event, and neither does an outcome our own write already announced.
func (r *Reconciler) report(ctx context.Context, c *clusterv1.Cluster, a assessment, wrote bool) {
	key := client.ObjectKeyFromObject(c)
	state := string(c.UID) + "\x00" + a.reason + "\x00" + a.message
	r.mu.Lock()
	if r.reported == nil {
		r.reported = map[types.NamespacedName]string{}
	}
	prev, seen := r.reported[key]
	r.reported[key] = state
	r.mu.Unlock()

	logger := log.FromContext(ctx).WithValues("reason", a.reason)
	if prev == state || (a.ok && (wrote || !seen)) {
		logger.V(1).Info(a.message)
		return
	}
	logger.Info(a.message)
	kind := corev1.EventTypeNormal
	if !a.ok {
		kind = corev1.EventTypeWarning
	}
	r.event(c, kind, a.reason, "%s", a.message)
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.reported, key)
	r.mu.Unlock()
}

func (r *Reconciler) event(c *clusterv1.Cluster, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, kind, reason, "PublishDNSServiceIPs", format, args...)
	}
}
