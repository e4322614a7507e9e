package tenant

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Every cluster is counted once, by its Reachable; one not tried yet as Unknown.
func TestCountReachable(t *testing.T) {
	s := NewStatus()
	s.Set(types.NamespacedName{Namespace: "a", Name: "c"}, State{Reachable: metav1.ConditionTrue})
	s.Set(types.NamespacedName{Namespace: "b", Name: "c"}, State{Reachable: metav1.ConditionFalse})
	s.Set(types.NamespacedName{Namespace: "c", Name: "c"}, State{Reachable: metav1.ConditionFalse})
	s.Set(types.NamespacedName{Namespace: "d", Name: "c"}, State{})
	s.Forget(types.NamespacedName{Namespace: "a", Name: "c"})
	got := s.CountReachable()
	want := map[metav1.ConditionStatus]int{metav1.ConditionTrue: 0, metav1.ConditionFalse: 2, metav1.ConditionUnknown: 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}
