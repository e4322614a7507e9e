package tenant

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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

// Status holds the State of every Cluster that has Talos pools, and tells the pool
// controller when one changes.
type Status struct {
	mu     sync.Mutex
	states map[types.NamespacedName]State
	events chan event.GenericEvent
}

// NewStatus makes an empty Status.
func NewStatus() *Status {
	// Buffered so a burst of changes never blocks the controller that records them;
	// a change that finds the buffer full is dropped, and the pool's next resync
	// reports it.
	return &Status{states: map[types.NamespacedName]State{}, events: make(chan event.GenericEvent, 1024)}
}

// Get is the Cluster's last State.
func (s *Status) Get(cluster types.NamespacedName) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[cluster]
	return st, ok
}

// Set records the Cluster's State, and tells the pool controller when it changed.
func (s *Status) Set(cluster types.NamespacedName, st State) {
	s.mu.Lock()
	old, ok := s.states[cluster]
	s.states[cluster] = st
	s.mu.Unlock()
	if !ok || old != st {
		s.notify(cluster)
	}
}

// Forget drops the Cluster's State.
func (s *Status) Forget(cluster types.NamespacedName) {
	s.mu.Lock()
	_, ok := s.states[cluster]
	delete(s.states, cluster)
	s.mu.Unlock()
	if ok {
		s.notify(cluster)
	}
}

func (s *Status) notify(cluster types.NamespacedName) {
	obj := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name}}
	select {
	case s.events <- event.GenericEvent{Object: obj}:
	default:
	}
}

// Source delivers a Cluster each time its State changes, mapped by h (to the cluster's
// pools). Only one controller may use it.
func (s *Status) Source(h handler.EventHandler) source.Source {
	return source.Channel(s.events, h)
}
