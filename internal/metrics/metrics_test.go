package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// poolAt is a pool at generation gen whose status observed observed, with a Ready
// condition of status ready at gen ("" for none).
func poolAt(name string, gen, observed int64, ready metav1.ConditionStatus, conds ...metav1.Condition) *v1.NodeGroup {
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, Generation: gen, CreationTimestamp: metav1.NewTime(t0)}}
	ng.Status.ObservedGeneration = observed
	ng.Status.Conditions = conds
	if ready != "" {
		ng.Status.Conditions = append(ng.Status.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: ready, Reason: "R", ObservedGeneration: gen})
	}
	return ng
}

func observations(t *testing.T, trigger string) (count float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	samples, err := Gather(reg, Prefix+"pool_ready_seconds")
	if err != nil {
		t.Fatal(err)
	}
	return Sum(samples, map[string]string{"trigger": trigger})
}

func TestReadyTimerObservesEachGenerationOnce(t *testing.T) {
	now := t0
	timer := &ReadyTimer{now: func() time.Time { return now }}
	created, changed := observations(t, TriggerCreated), observations(t, TriggerChanged)

	// Created: timed from the creation, observed when Ready turns True.
	now = t0.Add(time.Minute)
	timer.Seen(poolAt("a", 1, 0, ""))
	timer.Written(poolAt("a", 1, 0, ""), poolAt("a", 1, 1, metav1.ConditionFalse))
	now = t0.Add(5 * time.Minute)
	timer.Seen(poolAt("a", 1, 1, metav1.ConditionFalse)) // the status observed it: no new clock
	timer.Written(poolAt("a", 1, 1, metav1.ConditionFalse), poolAt("a", 1, 1, metav1.ConditionTrue))
	if got := observations(t, TriggerCreated) - created; got != 1 {
		t.Fatalf("created: %v observations, want 1", got)
	}
	// Ready lost and regained at the same generation: not observed again.
	timer.Written(poolAt("a", 1, 1, metav1.ConditionFalse), poolAt("a", 1, 1, metav1.ConditionTrue))
	if got := observations(t, TriggerCreated) - created; got != 1 {
		t.Fatalf("a second True at generation 1: %v observations, want 1", got)
	}

	// Changed: Ready stays True on the first status of the new generation, then the
	// rollout turns it False and True again: observed once, as changed.
	timer.Seen(poolAt("a", 2, 1, metav1.ConditionTrue))
	timer.Written(poolAt("a", 1, 1, metav1.ConditionTrue), poolAt("a", 2, 2, metav1.ConditionTrue))
	timer.Written(poolAt("a", 2, 2, metav1.ConditionTrue), poolAt("a", 2, 2, metav1.ConditionFalse))
	timer.Written(poolAt("a", 2, 2, metav1.ConditionFalse), poolAt("a", 2, 2, metav1.ConditionTrue))
	timer.Written(poolAt("a", 2, 2, metav1.ConditionFalse), poolAt("a", 2, 2, metav1.ConditionTrue))
	if got := observations(t, TriggerChanged) - changed; got != 1 {
		t.Fatalf("changed: %v observations, want 1", got)
	}

	// After a restart (a new timer), a pool whose status observed its generation has
	// no clock: nothing is observed rather than a guess.
	restarted := &ReadyTimer{now: func() time.Time { return now }}
	restarted.Seen(poolAt("a", 1, 1, metav1.ConditionFalse))
	restarted.Written(poolAt("a", 1, 1, metav1.ConditionFalse), poolAt("a", 1, 1, metav1.ConditionTrue))
	if got := observations(t, TriggerCreated) - created; got != 1 {
		t.Fatalf("after a restart: %v observations, want 1", got)
	}

	// A deleted pool's clock is dropped.
	timer.Seen(poolAt("b", 1, 0, ""))
	timer.Forget(types.NamespacedName{Namespace: "tenant", Name: "b"})
	timer.Written(poolAt("b", 1, 1, metav1.ConditionFalse), poolAt("b", 1, 1, metav1.ConditionTrue))
	if got := observations(t, TriggerCreated) - created; got != 1 {
		t.Fatalf("a forgotten pool: %v observations, want 1", got)
	}
}

type tenants map[metav1.ConditionStatus]int

func (t tenants) CountReachable() map[metav1.ConditionStatus]int { return t }

func TestCollectorCountsPoolsWithBoundedLabels(t *testing.T) {
	resolved := []metav1.Condition{
		{Type: v1.ConditionClassResolved, Status: metav1.ConditionTrue, Reason: "Resolved"},
		{Type: v1.ConditionLocationResolved, Status: metav1.ConditionTrue, Reason: "Resolved"},
	}
	spec := func(ng *v1.NodeGroup, class string) *v1.NodeGroup {
		ng.Spec.NodeGroupClassName, ng.Spec.LocationName, ng.Status.OS = class, "builtin", v1.OSTalos
		return ng
	}
	typo := spec(poolAt("typo", 1, 1, metav1.ConditionFalse,
		metav1.Condition{Type: v1.ConditionClassResolved, Status: metav1.ConditionFalse, Reason: "ClassNotFound"}), "talso-typo")
	typo.Status.OS = ""
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		spec(poolAt("a", 1, 1, metav1.ConditionTrue, resolved...), "talos"),
		spec(poolAt("b", 1, 1, metav1.ConditionTrue, resolved...), "talos"),
		spec(poolAt("c", 1, 1, metav1.ConditionFalse, resolved...), "talos"),
		typo,
	).Build()
	elected := make(chan struct{})
	reg := prometheus.NewRegistry()
	if err := reg.Register(&Collector{Pools: c, Tenants: tenants{metav1.ConditionTrue: 3, metav1.ConditionFalse: 1}, Elected: elected}); err != nil {
		t.Fatal(err)
	}
	if pools, _ := Gather(reg, Prefix+"pools"); len(pools) != 0 {
		t.Fatalf("a replica that does not lead reports %v", pools)
	}
	close(elected)

	pools, err := Gather(reg, Prefix+"pools")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"class": "talos", "location": "builtin", "os": string(v1.OSTalos), "state": StateReady}, 2},
		{map[string]string{"class": "talos", "state": StateNotReady, "reason": "R"}, 1},
		{map[string]string{"class": "", "location": "", "os": "", "state": StateNotReady}, 1},
		{map[string]string{"class": "talso-typo"}, 0},
	} {
		if got := Sum(pools, tc.labels); got != tc.want {
			t.Errorf("pools %v = %v, want %v (all: %v)", tc.labels, got, tc.want, pools)
		}
	}
	clusters, err := Gather(reg, Prefix+"tenant_clusters")
	if err != nil {
		t.Fatal(err)
	}
	if Sum(clusters, map[string]string{"reachable": "true"}) != 3 || Sum(clusters, map[string]string{"reachable": "false"}) != 1 {
		t.Errorf("tenant clusters: %v", clusters)
	}
}
