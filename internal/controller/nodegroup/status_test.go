package nodegroup

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// The pool is at generation 2 in every case; conditions said for generation 1 are from
// an earlier reconcile.
const gen = 2

var (
	yes, no, unknown = metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	earlier          = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
)

func cond(typ string, status metav1.ConditionStatus, reason string, generation int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message",
		ObservedGeneration: generation, LastTransitionTime: earlier}
}

// gates are the conditions Ready is derived from, all True for generation g.
func gates(g int64) []metav1.Condition {
	var out []metav1.Condition
	for _, t := range readyFrom {
		out = append(out, cond(t, yes, ReasonResolved, g))
	}
	return out
}

// TestConditionFromFinding: a condition evaluated in this reconcile says what was found
// for the current generation; one not evaluated keeps what it said and the generation
// it said it for, or is Unknown when it never said anything; one that does not apply is
// removed.
func TestConditionFromFinding(t *testing.T) {
	const typ = v1.ConditionTalosIdentityReady
	for _, tc := range []struct {
		name  string
		old   *metav1.Condition
		found func(*scope)
		want  *metav1.Condition // nil: no condition
	}{
		{"evaluated, never set", nil, func(s *scope) { s.set(typ, yes, "Minted", "Minted message") },
			&metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: gen}},
		{"evaluated, was True", &metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: 1}, func(s *scope) { s.set(typ, yes, "Minted", "Minted message") },
			&metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: gen, LastTransitionTime: earlier}},
		{"evaluated, was False", &metav1.Condition{Status: no, Reason: "Missing", ObservedGeneration: 1}, func(s *scope) { s.set(typ, yes, "Minted", "Minted message") },
			&metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: gen}},
		{"not evaluated, never set", nil, func(s *scope) { s.set(typ, "", "", "") },
			&metav1.Condition{Status: unknown, Reason: ReasonNotChecked, ObservedGeneration: gen}},
		{"not evaluated, was True", &metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: 1}, func(s *scope) { s.set(typ, "", "", "") },
			&metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: 1, LastTransitionTime: earlier}},
		{"not evaluated, was False", &metav1.Condition{Status: no, Reason: "Missing", ObservedGeneration: 1}, func(s *scope) { s.set(typ, "", "", "") },
			&metav1.Condition{Status: no, Reason: "Missing", ObservedGeneration: 1, LastTransitionTime: earlier}},
		{"not the reconcile's business", &metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: 1}, func(*scope) {},
			&metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: 1, LastTransitionTime: earlier}},
		{"does not apply, was True", &metav1.Condition{Status: yes, Reason: "Minted", ObservedGeneration: 1}, func(s *scope) { s.remove(typ) }, nil},
		{"does not apply, never set", nil, func(s *scope) { s.remove(typ) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old []metav1.Condition
			if tc.old != nil {
				c := cond(typ, tc.old.Status, tc.old.Reason, tc.old.ObservedGeneration)
				old = append(old, c)
			}
			s := &scope{}
			tc.found(s)
			got := meta.FindStatusCondition(s.conditions(old, gen), typ)
			if tc.want == nil || got == nil {
				if (tc.want == nil) != (got == nil) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
				return
			}
			if got.Status != tc.want.Status || got.Reason != tc.want.Reason || got.ObservedGeneration != tc.want.ObservedGeneration {
				t.Errorf("got %s %s for generation %d, want %s %s for %d", got.Status, got.Reason, got.ObservedGeneration,
					tc.want.Status, tc.want.Reason, tc.want.ObservedGeneration)
			}
			if !tc.want.LastTransitionTime.IsZero() && !got.LastTransitionTime.Equal(&tc.want.LastTransitionTime) {
				t.Errorf("transition time moved to %v without a transition", got.LastTransitionTime)
			}
			if tc.old != nil && (old[0].Status != tc.old.Status || old[0].ObservedGeneration != tc.old.ObservedGeneration) {
				t.Errorf("the old conditions were modified: %+v", old[0])
			}
		})
	}
}

// TestReadyIsDerived: Ready follows the first of readyFrom that is not True, with its
// reason, message and generation; when all are True, the machines; when the machines
// were not looked at, Ready keeps what it said.
func TestReadyIsDerived(t *testing.T) {
	with := func(cs []metav1.Condition, c metav1.Condition) []metav1.Condition {
		meta.SetStatusCondition(&cs, c)
		return cs
	}
	for _, tc := range []struct {
		name     string
		old      []metav1.Condition
		found    func(*scope)
		machines *machines
		want     metav1.Condition // Type unset: no Ready
	}{
		{"all True, every machine ready", gates(1), func(s *scope) { resolvedAll(s); s.set(v1.ConditionRendered, yes, ReasonApplied, "") },
			&machines{replicas: 3, ready: 3, desired: 3},
			metav1.Condition{Status: yes, Reason: ReasonMachinesReady, Message: "3 of 3 machines ready", ObservedGeneration: gen}},
		{"all True, a machine not ready", gates(gen), func(*scope) {}, &machines{replicas: 3, ready: 2, desired: 3},
			metav1.Condition{Status: no, Reason: ReasonMachinesNotReady, Message: "2 of 3 machines ready", ObservedGeneration: gen}},
		{"all True, scaling down", gates(gen), func(*scope) {}, &machines{replicas: 4, ready: 4, desired: 3},
			metav1.Condition{Status: no, Reason: ReasonMachinesNotReady, Message: "4 of 3 machines ready", ObservedGeneration: gen}},
		{"all True, one for an earlier generation", with(gates(gen), cond(v1.ConditionRendered, yes, ReasonApplied, 1)), func(*scope) {},
			&machines{replicas: 1, ready: 1, desired: 1},
			metav1.Condition{Status: yes, Reason: ReasonMachinesReady, Message: "1 of 1 machines ready", ObservedGeneration: 1}},
		{"class not found this reconcile", gates(1), func(s *scope) { s.set(v1.ConditionClassResolved, no, "ClassNotFound", "no class") }, nil,
			metav1.Condition{Status: no, Reason: "ClassNotFound", Message: "no class", ObservedGeneration: gen}},
		{"the first failure decides", gates(1), func(s *scope) {
			s.set(v1.ConditionClusterFound, no, "ClusterNotFound", "no cluster")
			s.set(v1.ConditionRendered, no, ReasonWaiting, "not rendered: no cluster")
		}, nil, metav1.Condition{Status: no, Reason: "ClusterNotFound", Message: "no cluster", ObservedGeneration: gen}},
		{"a failure not evaluated again keeps its generation", with(gates(1), cond(v1.ConditionLocationResolved, no, "LocationNotAllowed", 1)), func(*scope) {}, nil,
			metav1.Condition{Status: no, Reason: "LocationNotAllowed", Message: "LocationNotAllowed message", ObservedGeneration: 1}},
		{"a new pool whose class is missing", nil, func(s *scope) { s.set(v1.ConditionClassResolved, no, "ClassNotFound", "no class") }, nil,
			metav1.Condition{Status: no, Reason: "ClassNotFound", Message: "no class", ObservedGeneration: gen}},
		{"a new pool stopped by an API error", nil, func(*scope) {}, nil,
			metav1.Condition{Status: unknown, Reason: ReasonNotChecked, Message: "not checked yet", ObservedGeneration: gen}},
		{"machines not looked at, Ready was True", with(gates(1), cond(v1.ConditionReady, yes, ReasonMachinesReady, 1)),
			func(s *scope) { resolvedAll(s); s.set(v1.ConditionRendered, yes, ReasonApplied, "") }, nil,
			metav1.Condition{Status: yes, Reason: ReasonMachinesReady, Message: "MachinesReady message", ObservedGeneration: 1}},
		{"machines not looked at, Ready never set", nil, func(s *scope) { resolvedAll(s); s.set(v1.ConditionRendered, yes, ReasonApplied, "") }, nil,
			metav1.Condition{Status: unknown, Reason: ReasonNotChecked, Message: "not checked yet", ObservedGeneration: gen}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScope()
			tc.found(s)
			s.machines = tc.machines
			got := meta.FindStatusCondition(s.conditions(tc.old, gen), v1.ConditionReady)
			if got == nil {
				t.Fatalf("no Ready, want %+v", tc.want)
			}
			if fmt.Sprint(got.Status, got.Reason, got.Message, got.ObservedGeneration) !=
				fmt.Sprint(tc.want.Status, tc.want.Reason, tc.want.Message, tc.want.ObservedGeneration) {
				t.Errorf("Ready %s %s %q for generation %d, want %s %s %q for %d", got.Status, got.Reason, got.Message, got.ObservedGeneration,
					tc.want.Status, tc.want.Reason, tc.want.Message, tc.want.ObservedGeneration)
			}
		})
	}
}

// resolvedAll records every condition resolve decides as True.
func resolvedAll(s *scope) {
	for _, t := range resolve.Conditions() {
		s.set(t, yes, ReasonResolved, "")
	}
}
