package paused_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
)

func TestWhy(t *testing.T) {
	annotated := map[string]string{clusterv1.PausedAnnotation: ""}
	const tail = ": the operator changes nothing of it, here or in the tenant cluster, until it is resumed"
	for _, tc := range []struct {
		name    string
		cluster *clusterv1.Cluster
		pool    *v1.NodeGroup
		want    string
	}{
		{"nothing paused", &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}},
			&v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, ""},
		{"spec.paused", &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}, nil,
			"Cluster c has spec.paused set to true" + tail},
		{"the Cluster's annotation", &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: annotated}}, nil,
			"Cluster c has the annotation cluster.x-k8s.io/paused" + tail},
		{"the pool's annotation, no Cluster", nil, &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotated}},
			"NodeGroup p has the annotation cluster.x-k8s.io/paused" + tail},
		{"all three", &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: annotated}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}},
			&v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotated}},
			"Cluster c has spec.paused set to true; Cluster c has the annotation cluster.x-k8s.io/paused; NodeGroup p has the annotation cluster.x-k8s.io/paused" + tail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pool metav1.Object
			if tc.pool != nil {
				pool = tc.pool
			}
			if got := paused.Why(tc.cluster, pool); got != tc.want {
				t.Errorf("Why = %q\nwant  %q", got, tc.want)
			}
			// Cluster decides for the Cluster alone, as Why does without a pool.
			if tc.cluster != nil {
				if got, want := paused.Cluster(tc.cluster), paused.Why(tc.cluster, nil) != ""; got != want {
					t.Errorf("Cluster = %v, want %v", got, want)
				}
			}
		})
	}
}

func TestAnnotationToggled(t *testing.T) {
	plain := &v1.NodeGroup{}
	other := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"x": "y"}}}
	annotated := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{clusterv1.PausedAnnotation: ""}}}
	p := paused.AnnotationToggled()
	for _, tc := range []struct {
		name     string
		old, new *v1.NodeGroup
		want     bool
	}{
		{"added", plain, annotated, true},
		{"removed", annotated, plain, true},
		{"another annotation", plain, other, false},
		{"kept", annotated, annotated, false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBeingMoved(t *testing.T) {
	if paused.BeingMoved(&v1.NodeGroup{}) {
		t.Error("a pool without the annotation is taken for one being moved")
	}
	if !paused.BeingMoved(&v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"clusterctl.cluster.x-k8s.io/delete-for-move": ""}}}) {
		t.Error("a pool clusterctl move deletes is not taken for one being moved")
	}
}
