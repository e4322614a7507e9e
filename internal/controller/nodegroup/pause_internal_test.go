package nodegroup

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// TestMovedAway: clusterctl's mark skips the clean-up only of a pool being deleted whose
// Cluster is gone; a tenant's mark on a live pool, or a failed move's, changes nothing.
func TestMovedAway(t *testing.T) {
	const mark = "clusterctl.cluster.x-k8s.io/delete-for-move"
	now := metav1.Now()
	for _, tc := range []struct {
		name        string
		marked      bool
		deleting    bool
		clusterGone bool
		want        bool
	}{
		{name: "deleted by clusterctl after its Cluster", marked: true, deleting: true, clusterGone: true, want: true},
		{name: "marked but its Cluster is still here", marked: true, deleting: true},
		{name: "marked, not deleting", marked: true, clusterGone: true},
		{name: "deleting without the mark", deleting: true, clusterGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ng := &v1.NodeGroup{}
			if tc.marked {
				ng.Annotations = map[string]string{mark: ""}
			}
			if tc.deleting {
				ng.DeletionTimestamp = &now
			}
			if got := movedAway(ng, tc.clusterGone); got != tc.want {
				t.Errorf("movedAway = %t, want %t", got, tc.want)
			}
		})
	}
}
