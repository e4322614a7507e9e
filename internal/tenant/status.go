package tenant

import (
	"cmp"
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// State is what the operator last found of a Cluster's tenant side: whether the tenant
// API server answers, and whether the cluster's Talos join identity is in place. The
// controller that keeps the identity writes it; the pool controller reports it on the
// cluster's Talos pools, so one controller writes a pool's status.
type State struct {
	// Reachable is True when the last request to the tenant API server succeeded.
	Reachable        metav1.ConditionStatus
	ReachableReason  string
	ReachableMessage string
	// Identity is True when <cluster>-talos exists and its bootstrap token is kept in
	// the tenant cluster.
	Identity        metav1.ConditionStatus
	IdentityReason  string
	IdentityMessage string
}

// Condition is one condition the pool controller reports on a cluster's pools for the
// controller that decided it.
type Condition struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// Status holds the State of every Cluster that has Talos pools and the state of the
// autoscaler of every Cluster that has autoscaled pools, and tells the pool controller
// when one changes. Each has one writer: the join identity controller and the
// autoscaler controller.
type Status struct {
	mu         sync.Mutex
	states     map[types.NamespacedName]State
	autoscaler map[types.NamespacedName]Condition
	// scaleUp is the autoscaler's view of each autoscaled pool (keyed by the pool), with
	// the Cluster it belongs to.
	scaleUp map[types.NamespacedName]poolCondition
	queue   Queue
}

type poolCondition struct {
	cluster types.NamespacedName
	Condition
}

// NewStatus makes an empty Status.
func NewStatus() *Status {
	return &Status{states: map[types.NamespacedName]State{}, autoscaler: map[types.NamespacedName]Condition{},
		scaleUp: map[types.NamespacedName]poolCondition{}}
}

// ScaleUp is what the Cluster's autoscaler last said of the pool (AbleToScaleUp); ok is
// false when nothing is known.
func (s *Status) ScaleUp(pool types.NamespacedName) (Condition, bool) {
	pc, ok := get(s, s.scaleUp, pool)
	return pc.Condition, ok
}

// SetScaleUp records what the autoscaler of cluster says of each of these pools and
// forgets what was known of the cluster's other pools; the pool controller is told of
// each pool whose condition changed or went.
func (s *Status) SetScaleUp(cluster types.NamespacedName, pools map[types.NamespacedName]Condition) {
	var changed []types.NamespacedName
	s.mu.Lock()
	for pool, pc := range s.scaleUp {
		if _, keep := pools[pool]; !keep && pc.cluster == cluster {
			delete(s.scaleUp, pool)
			changed = append(changed, pool)
		}
	}
	for pool, c := range pools {
		if old, ok := s.scaleUp[pool]; !ok || old.Condition != c {
			s.scaleUp[pool] = poolCondition{cluster: cluster, Condition: c}
			changed = append(changed, pool)
		}
	}
	s.mu.Unlock()
	for _, pool := range changed {
		s.queue.AddRequest(reconcile.Request{NamespacedName: pool})
	}
}

// Autoscaler is what the autoscaler controller last found of the Cluster's autoscaler;
// ok is false when the Cluster has none to report (no autoscaled pool).
func (s *Status) Autoscaler(cluster types.NamespacedName) (Condition, bool) {
	return get(s, s.autoscaler, cluster)
}

// SetAutoscaler records the state of the Cluster's autoscaler, and tells the pool
// controller when it changed.
func (s *Status) SetAutoscaler(cluster types.NamespacedName, c Condition) {
	set(s, s.autoscaler, cluster, c)
}

// ForgetAutoscaler drops the state of the Cluster's autoscaler.
func (s *Status) ForgetAutoscaler(cluster types.NamespacedName) { forget(s, s.autoscaler, cluster) }

// Get is the Cluster's last State.
func (s *Status) Get(cluster types.NamespacedName) (State, bool) { return get(s, s.states, cluster) }

// Set records the Cluster's State, and tells the pool controller when it changed.
func (s *Status) Set(cluster types.NamespacedName, st State) { set(s, s.states, cluster, st) }

// CountReachable counts the Clusters by whether their tenant API server answered the
// last request (a State's Reachable; empty, not tried yet, counts as Unknown).
func (s *Status) CountReachable() map[metav1.ConditionStatus]int {
	out := map[metav1.ConditionStatus]int{metav1.ConditionTrue: 0, metav1.ConditionFalse: 0, metav1.ConditionUnknown: 0}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.states {
		out[cmp.Or(st.Reachable, metav1.ConditionUnknown)]++
	}
	return out
}

// Forget drops the Cluster's State.
func (s *Status) Forget(cluster types.NamespacedName) { forget(s, s.states, cluster) }

// get, set and forget read and write one of the Status's maps under its lock; set and
// forget tell the pool controller when the value changed or went.
func get[V any](s *Status, m map[types.NamespacedName]V, cluster types.NamespacedName) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := m[cluster]
	return v, ok
}

func set[V comparable](s *Status, m map[types.NamespacedName]V, cluster types.NamespacedName, v V) {
	s.mu.Lock()
	old, ok := m[cluster]
	m[cluster] = v
	s.mu.Unlock()
	if !ok || old != v {
		s.notify(cluster)
	}
}

func forget[V any](s *Status, m map[types.NamespacedName]V, cluster types.NamespacedName) {
	s.mu.Lock()
	_, ok := m[cluster]
	delete(m, cluster)
	s.mu.Unlock()
	if ok {
		s.notify(cluster)
	}
}

func (s *Status) notify(cluster types.NamespacedName) { s.queue.Add(cluster) }

// Source queues, each time a Cluster's State changes, what requests maps it to (its
// pools). Only one controller may use it.
func (s *Status) Source(requests func(context.Context, types.NamespacedName) []reconcile.Request) source.Source {
	s.queue.requests = requests
	return &s.queue
}

// Queue is a source that queues requests straight into its controller's workqueue,
// which merges duplicates and never drops one (a channel source drops what finds its
// buffer full). Until the controller starts, nothing is queued: its first reconciles
// come from its informers.
type Queue struct {
	// requests maps a Cluster to what to reconcile; nil queues the Cluster itself.
	requests func(context.Context, types.NamespacedName) []reconcile.Request
	// RateLimited queues through the workqueue's rate limiter, so a cluster whose
	// tenant keeps changing is not reconciled in a loop.
	RateLimited bool

	mu sync.Mutex
	q  workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// Start is the source's start: it records the controller's queue.
func (q *Queue) Start(_ context.Context, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.q = wq
	return nil
}

// Add queues the Cluster's requests.
func (q *Queue) Add(cluster types.NamespacedName) {
	if !q.started() {
		return // before the start, what requests reads may not be ready either
	}
	reqs := []reconcile.Request{{NamespacedName: cluster}}
	if q.requests != nil {
		reqs = q.requests(context.Background(), cluster)
	}
	for _, r := range reqs {
		q.AddRequest(r)
	}
}

func (q *Queue) started() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.q != nil
}

// AddRequest queues one request as it is.
func (q *Queue) AddRequest(r reconcile.Request) {
	q.mu.Lock()
	wq := q.q
	q.mu.Unlock()
	if wq == nil {
		return
	}
	if q.RateLimited {
		wq.AddRateLimited(r)
	} else {
		wq.Add(r)
	}
}
