package operator_test

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// builderIndexer registers indexes with a fake client, which, as the manager's cache,
// lists by a field only through an index registered for it.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	i.b.WithIndex(obj, field, extract)
	return nil
}

// TestIndexesFindByWhatTheControllersLookUp: each index finds its objects by the value
// a controller lists with: a class's or location's name, a Cluster's name in its
// namespace, a MachineSet's pool label, a pull Secret's key, a KamajiControlPlane's
// name (and a Cluster with another kind of control plane by none).
func TestIndexesFindByWhatTheControllersLookUp(t *testing.T) {
	b := fake.NewClientBuilder().WithScheme(scheme.New())
	if err := operator.RegisterIndexes(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	pool := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "workers"},
		Spec: v1.NodeGroupSpec{ClusterName: "tenant", NodeGroupClassName: "gpu", LocationName: "zone-a"}}
	class := &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: v1.NodeGroupClassSpec{ImagePullSecretRef: &v1.SecretReference{Namespace: "platform", Name: "pull"}}}
	kamajiCluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: kamaji.ControlPlaneGVK.Group, Kind: kamaji.ControlPlaneGVK.Kind, Name: "tenant-cp"}}}
	otherCluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "other"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "tenant-cp"}}}
	c := b.WithObjects(pool, class, kamajiCluster, otherCluster).Build()

	for _, tc := range []struct {
		list  client.ObjectList
		field string
		value string
		want  []string
	}{
		{&v1.NodeGroupList{}, operator.PoolsByClass, "gpu", []string{"workers"}},
		{&v1.NodeGroupList{}, operator.PoolsByLocation, "zone-a", []string{"workers"}},
		{&v1.NodeGroupList{}, operator.PoolsByCluster, "tenant", []string{"workers"}},
		{&v1.NodeGroupList{}, operator.PoolsByLabel, names.LabelValue("workers"), []string{"workers"}},
		{&v1.NodeGroupClassList{}, operator.ClassesByPullSecret, client.ObjectKey{Namespace: "platform", Name: "pull"}.String(), []string{"gpu"}},
		{&clusterv1.ClusterList{}, operator.ClustersByKamajiControlPlane, "tenant-cp", []string{"tenant"}},
	} {
		if err := c.List(context.Background(), tc.list, client.MatchingFields{tc.field: tc.value}); err != nil {
			t.Fatalf("%s=%s: %v", tc.field, tc.value, err)
		}
		items, err := meta.ExtractList(tc.list)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range items {
			got = append(got, o.(client.Object).GetName())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s=%s: got %v, want %v", tc.field, tc.value, got, tc.want)
		}
	}
}
