package nodegroup

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
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
