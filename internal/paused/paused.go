// Package paused is the one place that decides whether the operator leaves a Cluster
// alone because Cluster API tooling paused it, as Cluster API's own controllers do
// (sigs.k8s.io/cluster-api/util/paused): the Cluster's spec.paused, or the annotation
// cluster.x-k8s.io/paused on the Cluster or on the pool at hand. clusterctl move pauses
// the source Cluster before it copies anything, keeps the copy paused on the target
// until every object is there, then deletes the source objects and resumes the target.
//
// While paused, no controller of the operator writes to the management cluster for the
// Cluster's pools and objects, nor to the tenant cluster; the pools say so in their
// Paused condition (Cluster API's v1beta2 type and reasons). Every controller watches
// the Cluster, so resuming it brings its pools back without a timer.
package paused

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Condition is the pool's condition type while paused: Cluster API's Paused, True with
// reason clusterv1.PausedReason. A pool that is not paused does not carry it.
const Condition = clusterv1.PausedCondition

// Why says why the operator leaves the Cluster alone, and, when pool is not nil, that
// pool too: a sentence that names the Cluster (or the pool) and which of spec.paused
// and the annotation paused it; empty when nothing is paused. cluster may be nil (not
// found): then only the pool's own annotation counts.
func Why(cluster *clusterv1.Cluster, pool metav1.Object) string {
	var why []string
	if cluster != nil {
		if ptr.Deref(cluster.Spec.Paused, false) {
			why = append(why, fmt.Sprintf("Cluster %s has spec.paused set to true", cluster.Name))
		}
		if annotations.HasPaused(cluster) {
			why = append(why, fmt.Sprintf("Cluster %s has the annotation %s", cluster.Name, clusterv1.PausedAnnotation))
		}
	}
	if pool != nil && annotations.HasPaused(pool) {
		why = append(why, fmt.Sprintf("NodeGroup %s has the annotation %s", pool.GetName(), clusterv1.PausedAnnotation))
	}
	if len(why) == 0 {
		return ""
	}
	return strings.Join(why, "; ") + ": the operator changes nothing of it, here or in the tenant cluster, until it is resumed"
}

// Cluster says whether the Cluster is paused (spec.paused or the annotation), as
// Cluster API's own controllers decide it: what the controllers that act for a whole
// Cluster check before anything else.
func Cluster(cluster *clusterv1.Cluster) bool {
	return annotations.IsPaused(cluster, cluster)
}

// BeingMoved says whether clusterctl move is deleting obj from the source management
// cluster (it annotates each object before it deletes it and removes its finalizers).
// Such an object lives on in the target: its deletion is not the tenant's, so nothing
// it owns is cleaned up.
func BeingMoved(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[clusterctlv1.DeleteForMoveAnnotation]
	return ok
}

// AnnotationToggled lets through an update that adds or removes the paused annotation,
// for watches that otherwise ignore annotations.
func AnnotationToggled() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return annotations.HasPaused(e.ObjectOld) != annotations.HasPaused(e.ObjectNew)
		},
	}
}
