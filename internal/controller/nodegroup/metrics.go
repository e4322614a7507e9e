package nodegroup

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"slices"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// ReasonError is the reason a failed reconcile is counted under when no condition
// names the failure: an API error, retried with backoff.
const ReasonError = "Error"

// recordMetrics counts what one reconcile of a pool ended with: a failure by its
// reason, and the pool turning Ready (the status written over old, when written).
func (r *Reconciler) recordMetrics(old, ng *v1.NodeGroup, err error, written bool) {
	if reason := failingReason(ng.Status.Conditions, err); reason != "" {
		metrics.ReconcileFailed(reason)
	}
	if written {
		r.readyTimer.Written(old, ng)
	}
}

// failingReason is the reason of the first condition Ready is derived from that is
// False, ReasonError when none is but the reconcile failed, or empty.
func failingReason(conds []metav1.Condition, err error) string {
	for _, t := range readyFrom {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse {
			return c.Reason
		}
	}
	if err != nil {
		return ReasonError
	}
	return ""
}

// causes says who must act on a pool whose Ready condition is False for a reason
// (Cause). Every reason a condition of readyFrom can be False for is here, so adding
// one is a decision (TestEveryFailureHasACause).
var causes = map[string]string{
	// The pool's spec names what does not exist, is not allowed, or breaks a rule: the
	// tenant fixes it, and the condition's message says how.
	resolve.ReasonClassNotFound:        metrics.CauseTenant,
	resolve.ReasonLocationNotFound:     metrics.CauseTenant,
	resolve.ReasonProviderNotSupported: metrics.CauseTenant, // "use a KubeVirt location"
	resolve.ReasonClusterNotFound:      metrics.CauseTenant,
	resolve.ReasonInstanceTypeNotFound: metrics.CauseTenant,
	ReasonLocationNotAllowed:           metrics.CauseTenant,
	ReasonPolicyViolation:              metrics.CauseTenant,
	ReasonVersionAhead:                 metrics.CauseTenant,
	// The platform's part does not hold: its Cluster and control plane, its catalog,
	// classes and their pull secrets, the join identity, or the operator's own writes.
	resolve.ReasonControlPlanePending: metrics.CausePlatform,
	resolve.ReasonNetworkNotSupported: metrics.CausePlatform,
	resolve.ReasonLocationInUse:       metrics.CausePlatform, // it admitted two tenant clusters to a Proxmox location
	resolve.ReasonTalosSecretsMissing: metrics.CausePlatform,
	resolve.ReasonImageNotAvailable:   metrics.CausePlatform,
	resolve.ReasonVersionNotSupported: metrics.CausePlatform, // unless the pool asks for the release (Cause)
	ReasonRenderFailed:                metrics.CausePlatform,
	ReasonApplyFailed:                 metrics.CausePlatform,
	ReasonCredentialsFailed:           metrics.CausePlatform,
	ReasonWaiting:                     metrics.CausePlatform,
	ReasonMachinesNotReady:            metrics.CausePlatform, // unless progressing (Cause)
}

// Cause says who must act on a pool whose Ready condition is False (the pools gauge's
// cause label, metrics.Collector.Cause), from Ready's reason (causes), with two
// refinements:
//   - a release the catalog does not have is the tenant's to fix when the pool's spec
//     asks for it, the platform's when it comes from the control plane or the class;
//   - machines not all ready while a rollout or a scaling is under way and the pool
//     is Available are progressing, not failing: a long rollout of a large pool is
//     healthy. A rollout that leaves the pool unavailable, or one of whose machines
//     failed its health check (a broken image, a VM that never comes up), is the
//     platform's.
//
// A reason it does not know is the platform's: an alert too many rather than a pool
// failing unseen.
func Cause(ng *v1.NodeGroup) string {
	conds := ng.Status.Conditions
	ready := meta.FindStatusCondition(conds, v1.ConditionReady)
	if ready == nil {
		return metrics.CausePlatform
	}
	switch ready.Reason {
	case resolve.ReasonVersionNotSupported:
		if ng.Spec.KubernetesVersion != "" {
			return metrics.CauseTenant
		}
	case ReasonMachinesNotReady:
		moving := meta.IsStatusConditionTrue(conds, v1.ConditionRollingOut) ||
			meta.IsStatusConditionTrue(conds, v1.ConditionScalingUp) || meta.IsStatusConditionTrue(conds, v1.ConditionScalingDown)
		if moving && meta.IsStatusConditionTrue(conds, v1.ConditionAvailable) && !slices.ContainsFunc(ng.Status.NotRunningMachines, failing) {
			return metrics.CauseProgressing
		}
	}
	if c, ok := causes[ready.Reason]; ok {
		return c
	}
	return metrics.CausePlatform
}

// failing says whether a machine that is not running failed its health check (and is
// being replaced), rather than still coming up or going away. Cluster API v1beta2
// sets no Failed phase: a machine that never comes up fails its health check's
// startup timeout.
func failing(m v1.MachineNotRunning) bool {
	return m.Condition == clusterv1.MachineHealthCheckSucceededCondition
}
