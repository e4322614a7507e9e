package nodegroup

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
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

// TestMachineConditions: the conditions of the pool's machines mirror the
// MachineDeployment's status and reason where it has them, are derived from its counts
// where it does not, and say in their message what goes on.
func TestMachineConditions(t *testing.T) {
	type want struct {
		status  metav1.ConditionStatus
		reason  string
		message string
	}
	mdCond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name    string
		m       machines
		mdConds []metav1.Condition
		want    map[string]want
	}{
		{"steady, no conditions on the MachineDeployment", machines{replicas: 3, ready: 3, desired: 3, available: 3, upToDate: 3}, nil, map[string]want{
			v1.ConditionAvailable:   {yes, "Available", "3 of 3 machines available"},
			v1.ConditionRollingOut:  {no, "NotRollingOut", "not rolling out, 3 of 3 machines up to date"},
			v1.ConditionScalingUp:   {no, "NotScalingUp", "not scaling up, 3 of 3 machines"},
			v1.ConditionScalingDown: {no, "NotScalingDown", "not scaling down, 3 of 3 machines"},
			v1.ConditionUpToDate:    {yes, "UpToDate", "3 of 3 machines up to date"},
		}},
		{"rolling out, derived", machines{replicas: 4, ready: 3, desired: 3, available: 3, upToDate: 2}, nil, map[string]want{
			v1.ConditionRollingOut:  {yes, "RollingOut", "2 of 4 machines up to date, rolling out bootstrap template web-b"},
			v1.ConditionScalingDown: {yes, "ScalingDown", "scaling down from 4 to 3 machines"},
			v1.ConditionUpToDate:    {no, "NotUpToDate", "2 of 4 machines up to date"},
		}},
		{"scaling up, mirrored with Cluster API's message", machines{replicas: 1, ready: 1, desired: 3, available: 1, upToDate: 1}, []metav1.Condition{
			mdCond("ScalingUp", yes, "ScalingUp", "Scaling up from 1 to 3 replicas\n* Machine web-x: waiting for infrastructure"),
			mdCond("Available", no, "NotAvailable", "1 available replicas, at least 3 required"),
		}, map[string]want{
			v1.ConditionScalingUp: {yes, "ScalingUp", "scaling up from 1 to 3 machines: Scaling up from 1 to 3 replicas; Machine web-x: waiting for infrastructure"},
			v1.ConditionAvailable: {no, "NotAvailable", "1 of 3 machines available: 1 available replicas, at least 3 required"},
		}},
		{"Cluster API's status wins over the counts", machines{replicas: 3, desired: 3, available: 3, upToDate: 2}, []metav1.Condition{
			mdCond("RollingOut", no, "NotRollingOut", ""),
			mdCond("MachinesUpToDate", unknown, "UpToDateUnknown", "some machines report no UpToDate"),
		}, map[string]want{
			v1.ConditionRollingOut: {no, "NotRollingOut", "not rolling out, 2 of 3 machines up to date"},
			v1.ConditionUpToDate:   {unknown, "UpToDateUnknown", "2 of 3 machines up to date"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{machines: &tc.m}
			for _, f := range tc.m.conditions(tc.mdConds, "bootstrap template web-b") {
				s.put(f)
			}
			conds := s.conditions(nil, gen)
			for typ, w := range tc.want {
				c := meta.FindStatusCondition(conds, typ)
				if c == nil {
					t.Fatalf("no %s", typ)
				}
				if c.Status != w.status || c.Reason != w.reason || c.Message != w.message || c.ObservedGeneration != gen {
					t.Errorf("%s: %s %s %q for %d, want %s %s %q for %d", typ, c.Status, c.Reason, c.Message, c.ObservedGeneration,
						w.status, w.reason, w.message, gen)
				}
			}
		})
	}
}

// TestSummary: status.summary is Failed with the reason of the first failing step, Pending
// until Ready is known, and otherwise what the machines do.
func TestSummary(t *testing.T) {
	with := func(cs ...metav1.Condition) []metav1.Condition { return cs }
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  string
	}{
		{"new", nil, "Pending"},
		{"not checked", with(cond(v1.ConditionReady, unknown, ReasonNotChecked, gen)), "Pending"},
		{"class missing", with(cond(v1.ConditionReady, no, "ClassNotFound", gen)), "Failed: ClassNotFound"},
		{"rolling out", with(cond(v1.ConditionReady, no, ReasonMachinesNotReady, gen), cond(v1.ConditionRollingOut, yes, "RollingOut", gen)), "RollingOut"},
		{"ready while rolling out", with(cond(v1.ConditionReady, yes, ReasonMachinesReady, gen), cond(v1.ConditionRollingOut, yes, "RollingOut", gen)), "RollingOut"},
		{"scaling down", with(cond(v1.ConditionReady, no, ReasonMachinesNotReady, gen), cond(v1.ConditionScalingDown, yes, "ScalingDown", gen)), "Scaling"},
		{"a machine not ready", with(cond(v1.ConditionReady, no, ReasonMachinesNotReady, gen), cond(v1.ConditionRollingOut, no, "NotRollingOut", gen)), "NotReady"},
		{"ready", with(cond(v1.ConditionReady, yes, ReasonMachinesReady, gen), cond(v1.ConditionScalingUp, no, "NotScalingUp", gen)), "Ready"},
		{"paused while ready", with(cond(v1.ConditionReady, yes, ReasonMachinesReady, gen), cond(paused.Condition, yes, "Paused", gen)), "Paused"},
		{"paused while failing", with(cond(v1.ConditionReady, no, "ClassNotFound", gen), cond(paused.Condition, yes, "Paused", gen)), "Paused"},
	} {
		if got := summary(tc.conds); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestMachineNotRunning: a machine not running is reported with the first condition
// that says why, its message on one line and bounded.
func TestMachineNotRunning(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		m    clusterv1.Machine
		want v1.MachineNotRunning
	}{
		{"waiting for infrastructure", clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: clusterv1.MachineStatus{Phase: "Provisioning",
			Conditions: []metav1.Condition{
				{Type: "BootstrapConfigReady", Status: yes, Reason: "Ready"},
				{Type: "InfrastructureReady", Status: no, Reason: "NotReady", Message: "* VM web-a:\n  * not scheduled"},
				{Type: "Ready", Status: no, Reason: "NotReady", Message: "everything"},
			}}},
			v1.MachineNotRunning{Name: "a", Phase: "Provisioning", Condition: "InfrastructureReady", Reason: "NotReady", Message: "VM web-a:; not scheduled"}},
		{"deleting", clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: clusterv1.MachineStatus{Phase: "Deleting",
			Conditions: []metav1.Condition{{Type: "Deleting", Status: yes, Reason: "DrainingNode", Message: long}}}},
			v1.MachineNotRunning{Name: "b", Phase: "Deleting", Condition: "Deleting", Reason: "DrainingNode", Message: long[:253] + "..."}},
		{"no conditions", clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Status: clusterv1.MachineStatus{Phase: "Pending"}},
			v1.MachineNotRunning{Name: "c", Phase: "Pending"}},
	} {
		if got := machineNotRunning(&tc.m); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestEventKind: a condition turning False is a Warning, except RollingOut ending; a
// condition found for the first time (absent, or never evaluated) has an event only
// when it is False; the machines' comings and goings (their conditions, and Ready
// between MachinesReady and MachinesNotReady) have none.
func TestEventKind(t *testing.T) {
	was := func(s metav1.ConditionStatus) *metav1.Condition { return &metav1.Condition{Status: s} }
	wasReason := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Status: s, Reason: reason}
	}
	for _, tc := range []struct {
		typ    string
		status metav1.ConditionStatus
		reason string
		was    *metav1.Condition
		kind   string // empty: no event
	}{
		{v1.ConditionRendered, no, "RenderFailed", was(yes), "Warning"},
		{v1.ConditionRendered, yes, "Rendered", nil, ""},
		{v1.ConditionRendered, yes, "Rendered", wasReason(no, ReasonWaiting), "Normal"},
		{v1.ConditionTalosIdentityReady, no, "SecretNotOwned", nil, "Warning"},
		{v1.ConditionAvailable, no, "NotAvailable", was(yes), ""},
		{v1.ConditionAvailable, yes, "Available", was(no), ""},
		{v1.ConditionAvailable, no, "NotAvailable", nil, ""},
		{v1.ConditionRollingOut, yes, "RollingOut", was(no), "Normal"},
		{v1.ConditionRollingOut, no, "NotRollingOut", was(yes), "Normal"},
		{v1.ConditionRollingOut, yes, "RollingOut", nil, ""},
		{v1.ConditionScalingUp, yes, "ScalingUp", was(no), ""},
		{v1.ConditionScalingDown, no, "NotScalingDown", was(yes), ""},
		{v1.ConditionUpToDate, no, "NotUpToDate", was(yes), ""},
		{v1.ConditionReady, no, ReasonMachinesNotReady, wasReason(yes, ReasonMachinesReady), ""},
		{v1.ConditionReady, yes, ReasonMachinesReady, wasReason(no, ReasonMachinesNotReady), ""},
		{v1.ConditionReady, no, "ClassNotFound", wasReason(no, ReasonMachinesNotReady), "Warning"},
		{v1.ConditionReady, no, ReasonMachinesNotReady, wasReason(no, "ClassNotFound"), "Warning"},
		{v1.ConditionReady, yes, ReasonMachinesReady, wasReason(metav1.ConditionUnknown, ReasonNotChecked), ""},
		{v1.ConditionReady, no, "ClassNotFound", wasReason(metav1.ConditionUnknown, ReasonNotChecked), "Warning"},
		{v1.ConditionTalosIdentityReady, yes, "Minted", wasReason(metav1.ConditionUnknown, ReasonNotChecked), ""},
		{v1.ConditionTenantClusterReachable, yes, "Reachable", nil, ""},
		{v1.ConditionAutoscalerReady, metav1.ConditionUnknown, "AutoscalerNotRunning", wasReason(metav1.ConditionUnknown, ReasonNotChecked), ""},
		{v1.ConditionAutoscalerReady, yes, "Running", wasReason(metav1.ConditionUnknown, "AutoscalerNotRunning"), "Normal"},
		{v1.ConditionAutoscalerReady, metav1.ConditionUnknown, "StaleStatus", wasReason(yes, "Running"), "Normal"},
		{v1.ConditionTenantClusterReachable, no, "Unreachable", wasReason(yes, "Reachable"), "Warning"},
	} {
		kind, ok := eventKind(metav1.Condition{Type: tc.typ, Status: tc.status, Reason: tc.reason}, tc.was)
		if !ok {
			kind = ""
		}
		if kind != tc.kind {
			t.Errorf("%s=%s (was %v): event %q, want %q", tc.typ, tc.status, tc.was, kind, tc.kind)
		}
	}
}

// TestHostileProviderText: whatever a provider writes into a Machine's condition, the
// pool's status repeats it on one printable line of at most maxMessage characters: no
// terminal escapes, carriage returns that hide what precedes them, bidirectional
// overrides, zero-width characters or invalid UTF-8, and a reason as bounded as the
// message.
func TestHostileProviderText(t *testing.T) {
	hostile := "\x1b[2J\x1b[31mVM failed\x1b[0m\r\nfake: \u202eevil\u202c\u200b \x00\x07tab\there\xff\xfe" +
		"\u2028second line\n* " + strings.Repeat("界", 400)
	m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Status: clusterv1.MachineStatus{Phase: "Provisioning",
		Conditions: []metav1.Condition{{Type: "InfrastructureReady", Status: no, Reason: strings.Repeat("R", 1024), Message: hostile}}}}
	got := machineNotRunning(&m)
	for field, s := range map[string]string{"message": got.Message, "reason": got.Reason} {
		if n := utf8.RuneCountInString(s); n > maxMessage {
			t.Errorf("%s has %d characters, want at most %d", field, n, maxMessage)
		}
		if !utf8.ValidString(s) {
			t.Errorf("%s is not valid UTF-8: %q", field, s)
		}
		for _, r := range s {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' {
				t.Errorf("%s holds %U: %q", field, r, s)
				break
			}
		}
	}
	if want := "[2J [31mVM failed [0m; fake: evil tab here\uFFFD second line; 界界"; !strings.HasPrefix(got.Message, want) || !strings.HasSuffix(got.Message, "界...") {
		t.Errorf("message = %q, want it to start %q and end cut", got.Message, want)
	}

	// The mirrored MachineDeployment conditions go through the same bound.
	f := mirror{typ: v1.ConditionAvailable, from: clusterv1.AvailableCondition, no: "NotAvailable", notable: no, whenFalse: "0 of 1 machines available"}.
		finding([]metav1.Condition{{Type: clusterv1.AvailableCondition, Status: no, Reason: "NotAvailable", Message: hostile}})
	if strings.ContainsAny(f.message, "\x1b\r\n\u202e\u200b\x00") || utf8.RuneCountInString(f.message) > len("0 of 1 machines available: ")+maxMessage {
		t.Errorf("Available's message = %q", f.message)
	}
}
