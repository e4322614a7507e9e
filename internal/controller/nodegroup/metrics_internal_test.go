package nodegroup

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// A reconcile is counted as failed by the first condition Ready is derived from that
// is False; a pool waiting for its machines is not failing.
func TestFailingReason(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		err   error
		want  string
	}{
		{"ready", []metav1.Condition{{Type: v1.ConditionRendered, Status: metav1.ConditionTrue, Reason: ReasonApplied}}, nil, ""},
		{"waiting for machines", []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonMachinesNotReady}}, nil, ""},
		{"the first False decides", []metav1.Condition{
			{Type: v1.ConditionRendered, Status: metav1.ConditionFalse, Reason: ReasonWaiting},
			{Type: v1.ConditionClassResolved, Status: metav1.ConditionFalse, Reason: resolve.ReasonClassNotFound},
		}, nil, resolve.ReasonClassNotFound},
		{"an apply that failed", []metav1.Condition{{Type: v1.ConditionRendered, Status: metav1.ConditionFalse, Reason: ReasonApplyFailed}},
			errors.New("conflict"), ReasonApplyFailed},
		{"an API error", nil, errors.New("timeout"), ReasonError},
	} {
		if got := failingReason(tc.conds, tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
