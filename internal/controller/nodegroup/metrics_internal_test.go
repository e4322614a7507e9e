package nodegroup

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
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

// TestEveryFailureHasACause: every reason of this package and of resolve that a
// condition Ready is derived from can be False for says who must act on it; the
// reasons of conditions that are True or not checked yet need none.
func TestEveryFailureHasACause(t *testing.T) {
	// Reasons Ready is never False for: of conditions that are True, of TemplatesIntact
	// (which does not feed Ready), and of events.
	notFailures := []string{ReasonResolved, ReasonApplied, ReasonMachinesReady, ReasonNotChecked,
		ReasonTemplateModified, ReasonTemplatesIntact, ReasonReplicasRestored}
	for _, file := range []string{"status.go", "../../resolve/errors.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "Reason") || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				found++
				reason, _ := strconv.Unquote(lit.Value)
				if _, ok := causes[reason]; !ok && !slices.Contains(notFailures, reason) {
					t.Errorf("%s: %s (%q) has no cause: add it to causes", file, name.Name, reason)
				}
			}
			return true
		})
		if found == 0 {
			t.Errorf("%s declares no reason", file)
		}
	}
}

// TestCause: who must act on a pool that is not Ready.
func TestCause(t *testing.T) {
	no, yes := metav1.ConditionFalse, metav1.ConditionTrue
	ready := func(reason string) metav1.Condition {
		return metav1.Condition{Type: v1.ConditionReady, Status: no, Reason: reason}
	}
	c := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	for _, tc := range []struct {
		name    string
		version string
		conds   []metav1.Condition
		want    string
		// machines not running, of the status
		machines []v1.MachineNotRunning
	}{
		{"a class that does not exist", "", []metav1.Condition{ready(resolve.ReasonClassNotFound)}, metrics.CauseTenant, nil},
		{"a location not allowed", "", []metav1.Condition{ready(ReasonLocationNotAllowed)}, metrics.CauseTenant, nil},
		{"a pool rule broken", "", []metav1.Condition{ready(ReasonPolicyViolation)}, metrics.CauseTenant, nil},
		{"an apply that failed", "", []metav1.Condition{ready(ReasonApplyFailed)}, metrics.CausePlatform, nil},
		{"a class's pull secret missing", "", []metav1.Condition{ready(ReasonCredentialsFailed)}, metrics.CausePlatform, nil},
		{"a release the pool asks for, not in the catalog", "v1.99", []metav1.Condition{ready(resolve.ReasonVersionNotSupported)}, metrics.CauseTenant, nil},
		{"the control plane's release, not in the catalog", "", []metav1.Condition{ready(resolve.ReasonVersionNotSupported)}, metrics.CausePlatform, nil},
		{"a rollout, the pool available", "", []metav1.Condition{ready(ReasonMachinesNotReady), c(v1.ConditionRollingOut, yes), c(v1.ConditionAvailable, yes)}, metrics.CauseProgressing, nil},
		{"a scale-down, the pool available", "", []metav1.Condition{ready(ReasonMachinesNotReady), c(v1.ConditionScalingDown, yes), c(v1.ConditionAvailable, yes)}, metrics.CauseProgressing, nil},
		{"a rollout, the pool unavailable", "", []metav1.Condition{ready(ReasonMachinesNotReady), c(v1.ConditionRollingOut, yes), c(v1.ConditionAvailable, no)}, metrics.CausePlatform, nil},
		{"machines not ready, nothing under way", "", []metav1.Condition{ready(ReasonMachinesNotReady), c(v1.ConditionRollingOut, no), c(v1.ConditionAvailable, yes)}, metrics.CausePlatform, nil},
		{"a reason not known", "", []metav1.Condition{ready("SomethingNew")}, metrics.CausePlatform, nil},
		{"a rollout, the pool available, a new machine coming up", "", []metav1.Condition{ready(ReasonMachinesNotReady), c(v1.ConditionRollingOut, yes), c(v1.ConditionAvailable, yes)},
			metrics.CauseProgressing, []v1.MachineNotRunning{{Name: "m", Phase: "Provisioning", Condition: clusterv1.InfrastructureReadyCondition}}},
		{"a rollout, the pool available, a new machine remediated", "", []metav1.Condition{ready(ReasonMachinesNotReady), c(v1.ConditionRollingOut, yes), c(v1.ConditionAvailable, yes)},
			metrics.CausePlatform, []v1.MachineNotRunning{{Name: "m", Phase: "Provisioned", Condition: clusterv1.MachineHealthCheckSucceededCondition}}},
	} {
		ng := &v1.NodeGroup{Spec: v1.NodeGroupSpec{KubernetesVersion: tc.version},
			Status: v1.NodeGroupStatus{Conditions: tc.conds, NotRunningMachines: tc.machines}}
		if got := Cause(ng); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
