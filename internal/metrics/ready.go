package metrics

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// ReadyTimer times how long each generation of a pool takes to become Ready, for the
// pool_ready_seconds histogram. It starts the clock when a reconcile first sees a
// generation the status has not observed (status.observedGeneration behind
// metadata.generation), from the pool's creation for generation 1, and stops it when a
// status write turns Ready True at that generation.
//
// Each generation is observed at most once: the clock is dropped when it stops, and
// only a reconcile that sees a generation before its first status write starts one.
// The clocks live in memory, so an operator restart forgets the pools in flight: they
// are not observed, rather than observed from a guess. Ready that stays True across a
// change does not stop the clock: the first status of a new generation may still show
// the machines of the old one, and the rollout turns Ready False only after. A change
// that never turns Ready False is not observed (its clock waits until the next
// generation or the pool's deletion).
//
// The zero value is ready to use; it is safe for concurrent use.
type ReadyTimer struct {
	mu     sync.Mutex
	clocks map[types.NamespacedName]clock
	// now is time.Now, or a test's clock.
	now func() time.Time
}

type clock struct {
	generation int64
	start      time.Time
}

// Seen starts the clock of ng's generation when its status has not observed it yet.
func (t *ReadyTimer) Seen(ng *v1.NodeGroup) {
	if ng.Generation == ng.Status.ObservedGeneration || !ng.DeletionTimestamp.IsZero() {
		return
	}
	start := t.clock()
	if ng.Generation == 1 {
		start = ng.CreationTimestamp.Time
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.clocks == nil {
		t.clocks = map[types.NamespacedName]clock{}
	}
	key := types.NamespacedName{Namespace: ng.Namespace, Name: ng.Name}
	if c, ok := t.clocks[key]; ok && c.generation == ng.Generation {
		return // a reconcile whose status write failed: the clock runs from the first
	}
	t.clocks[key] = clock{generation: ng.Generation, start: start}
}

// Written stops the clock of ng's generation when the status written (ng.Status, over
// old.Status) turned Ready from not True to True at it, and observes the time it ran.
func (t *ReadyTimer) Written(old, ng *v1.NodeGroup) {
	ready := meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != ng.Generation ||
		meta.IsStatusConditionTrue(old.Status.Conditions, v1.ConditionReady) {
		return
	}
	key := types.NamespacedName{Namespace: ng.Namespace, Name: ng.Name}
	t.mu.Lock()
	c, ok := t.clocks[key]
	ok = ok && c.generation == ng.Generation
	if ok {
		delete(t.clocks, key)
	}
	t.mu.Unlock()
	if !ok {
		return
	}
	trigger := TriggerChanged
	if c.generation == 1 {
		trigger = TriggerCreated
	}
	readySeconds.WithLabelValues(trigger).Observe(max(t.clock().Sub(c.start), 0).Seconds())
}

// Forget drops the clock of a deleted pool.
func (t *ReadyTimer) Forget(pool types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.clocks, pool)
}

func (t *ReadyTimer) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}
