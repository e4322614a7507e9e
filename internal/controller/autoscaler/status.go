package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

// DefaultStatusPoll is how often the status of a running autoscaler is read.
const DefaultStatusPoll = time.Minute

// unknownPoll is how soon a cluster is looked at again while the autoscaler controller
// has not said whether its autoscaler runs: it says within seconds of a start, and the
// pools' conditions then settle with the rest of their status rather than a poll later.
const unknownPoll = 2 * time.Second

// errNoStatus says the autoscaler has written no status yet.
var errNoStatus = errors.New("not found")

// StatusReader reads, for every Cluster with autoscaled pools whose autoscaler runs,
// the autoscaler's status ConfigMap in the tenant cluster, and records for each pool
// whether the autoscaler may scale it up (AbleToScaleUp, reported by the pool
// controller). It polls: the autoscaler rewrites the ConfigMap on every scan (its
// timestamp changes each time), so a watch would bring an event per scan per cluster;
// a poll costs one GET of the kubeconfig Secret and one of the ConfigMap per interval,
// and pools are queued only when what it says of them changes.
type StatusReader struct {
	Client client.Client
	Status *tenant.Status
	Conns  *tenant.Connections
	// Poll is how often a running autoscaler's status is read (DefaultStatusPoll when 0;
	// the chart's autoscaler.statusInterval).
	Poll time.Duration
	// ScanInterval is the autoscaler's --scan-interval: a status older than ten scans
	// (and 5 minutes) is reported stale.
	ScanInterval time.Duration
}

// Reconcile reads the Cluster's autoscaler status once and records it per pool.
func (r *StatusReader) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	poll := r.Poll
	if poll == 0 {
		poll = DefaultStatusPoll
	}
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.stop(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if paused.Cluster(c) {
		// No poll while paused: the pools keep what they said, and the Cluster's
		// resume brings it back.
		return ctrl.Result{}, nil
	}
	autoscaled, err := autoscaledPools(ctx, r.Client, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	var pools []types.NamespacedName
	for _, ng := range autoscaled {
		pools = append(pools, client.ObjectKeyFromObject(&ng))
	}
	if len(pools) == 0 || !c.DeletionTimestamp.IsZero() {
		r.stop(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	all := func(s metav1.ConditionStatus, reason, msg string) map[types.NamespacedName]tenant.Condition {
		out := map[types.NamespacedName]tenant.Condition{}
		for _, p := range pools {
			out[p] = tenant.Condition{Status: s, Reason: reason, Message: msg}
		}
		return out
	}
	running, known := r.Status.Autoscaler(req.NamespacedName)
	if !known {
		// The autoscaler controller has not looked since a restart: look again soon
		// (it does within seconds), leaving the pools' conditions as they were.
		return ctrl.Result{RequeueAfter: min(poll, unknownPoll)}, nil
	}
	if running.Reason == ReasonManagedElsewhere {
		// The platform's own autoscaler may write its status elsewhere, and what the
		// operator's last wrote stays in the tenant: nothing is read.
		r.Conns.Close(req.NamespacedName)
		r.Status.SetScaleUp(req.NamespacedName, all(metav1.ConditionUnknown, ReasonManagedElsewhere,
			"the platform runs its own autoscaler for this cluster; the operator does not read its status"))
		return ctrl.Result{}, nil
	}
	if running.Reason != ReasonRunning {
		r.Conns.Close(req.NamespacedName)
		r.Status.SetScaleUp(req.NamespacedName, all(metav1.ConditionUnknown, autoscaler.ReasonNotRunning,
			"the cluster's autoscaler does not run yet (see AutoscalerReady), so nothing says whether it may add nodes"))
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	st, err := r.read(ctx, c)
	if err != nil {
		// The error may carry the tenant's words (a body, the ConfigMap's text) and
		// varies from try to try: the pools get a fixed sentence, the log the error.
		reason, msg := autoscaler.ReasonStatusUnknown, fmt.Sprintf("%s could not be read (the operator's log has the error)", statusWhere)
		if errors.Is(err, errNoStatus) {
			reason, msg = autoscaler.ReasonNoStatus, fmt.Sprintf("%s does not exist yet (the autoscaler writes it on its first scan)", statusWhere)
		} else {
			log.FromContext(ctx).Info("reading the autoscaler's status", "error", err)
		}
		r.Status.SetScaleUp(req.NamespacedName, all(metav1.ConditionUnknown, reason, msg))
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	if stale, msg := st.Stale(time.Now(), r.maxAge()); stale {
		r.Status.SetScaleUp(req.NamespacedName, all(metav1.ConditionUnknown, autoscaler.ReasonStale, msg))
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	out := map[types.NamespacedName]tenant.Condition{}
	for _, p := range pools {
		s, reason, msg := st.PoolCondition(types.NamespacedName{Namespace: p.Namespace, Name: names.MachineDeploymentName(c.Name, p.Name)})
		out[p] = tenant.Condition{Status: s, Reason: reason, Message: msg}
	}
	r.Status.SetScaleUp(req.NamespacedName, out)
	return ctrl.Result{RequeueAfter: poll}, nil
}

// statusWhere names the autoscaler's status ConfigMap in messages.
var statusWhere = fmt.Sprintf("the autoscaler's status ConfigMap %s/%s in the tenant cluster", autoscaler.StatusNamespace, autoscaler.StatusConfigMapName)

// maxAge is how old a status may be before it is taken for the status of an autoscaler
// that no longer scans: ten scans, and never under 5 minutes.
func (r *StatusReader) maxAge() time.Duration {
	return max(5*time.Minute, 10*r.ScanInterval)
}

// read is the autoscaler's status from the tenant cluster.
func (r *StatusReader) read(ctx context.Context, c *clusterv1.Cluster) (*autoscaler.Status, error) {
	conn, err := r.Conns.Get(ctx, client.ObjectKeyFromObject(c), c.UID)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", statusWhere, err)
	}
	ctx, cancel := context.WithTimeout(ctx, tenant.RequestTimeout)
	defer cancel()
	cm, err := conn.Client.ConfigMaps(autoscaler.StatusNamespace).Get(ctx, autoscaler.StatusConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, errNoStatus
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", statusWhere, err)
	}
	st, err := autoscaler.ParseStatus(cm.Data[autoscaler.StatusKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", statusWhere, err)
	}
	return st, nil
}

// stop forgets what is known of the Cluster's pools and closes its connection.
func (r *StatusReader) stop(cluster types.NamespacedName) {
	r.Conns.Close(cluster)
	r.Status.SetScaleUp(cluster, nil)
}

// Register adds the status reader to a manager.
func (r *StatusReader) Register(mgr ctrl.Manager) error {
	if r.Conns == nil {
		r.Conns = &tenant.Connections{Secrets: mgr.GetAPIReader(), Versions: mgr.GetCache(), UserAgent: "nodegroup-operator"}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("autoscalerstatus").
		// The managed-autoscaler annotation decides whether there is a status to read.
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// A pool made autoscaled starts the polling of its cluster; the last one gone
		// or made fixed ends it.
		Watches(&v1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(controlplanedns.ClusterOfPool),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleting()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, RateLimiter: operator.Retries()}).
		Complete(r)
}
