package operator

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
)

// The field indexes the controllers list by, so an event finds the objects it concerns
// without a list of every pool. A name is the field to pass to client.MatchingFields;
// RegisterIndexes registers all of them, once per manager.
const (
	// PoolsByClass: NodeGroups by spec.nodeGroupClassName.
	PoolsByClass = "spec.nodeGroupClassName"
	// PoolsByLocation: NodeGroups by spec.locationName.
	PoolsByLocation = "spec.locationName"
	// PoolsByCluster: NodeGroups by spec.clusterName (list within the Cluster's
	// namespace).
	PoolsByCluster = "spec.clusterName"
	// PoolsByLabel: NodeGroups by the value of names.LabelPool their objects carry
	// (names.LabelValue of the pool's name).
	PoolsByLabel = "poolLabel"
	// ClassesByPullSecret: NodeGroupClasses by their spec.imagePullSecretRef, as
	// "namespace/name" (types.NamespacedName's String).
	ClassesByPullSecret = "spec.imagePullSecretRef"
	// ClustersByKamajiControlPlane: Clusters by the name of their KamajiControlPlane;
	// a Cluster with another kind of control plane is not indexed.
	ClustersByKamajiControlPlane = "spec.controlPlaneRef.kamaji"
)

// index is one field index: the kind it indexes, its name and its extractor.
type index struct {
	obj     client.Object
	name    string
	extract client.IndexerFunc
}

var indexes = []index{
	{&v1.NodeGroup{}, PoolsByClass, poolField(func(ng *v1.NodeGroup) string { return ng.Spec.NodeGroupClassName })},
	{&v1.NodeGroup{}, PoolsByLocation, poolField(func(ng *v1.NodeGroup) string { return ng.Spec.LocationName })},
	{&v1.NodeGroup{}, PoolsByCluster, poolField(func(ng *v1.NodeGroup) string { return ng.Spec.ClusterName })},
	{&v1.NodeGroup{}, PoolsByLabel, poolField(func(ng *v1.NodeGroup) string { return names.LabelValue(ng.Name) })},
	{&v1.NodeGroupClass{}, ClassesByPullSecret, func(o client.Object) []string {
		if ref := o.(*v1.NodeGroupClass).Spec.ImagePullSecretRef; ref != nil {
			return []string{types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}.String()}
		}
		return nil
	}},
	{&clusterv1.Cluster{}, ClustersByKamajiControlPlane, func(o client.Object) []string {
		if c := o.(*clusterv1.Cluster); kamaji.IsControlPlaneOf(c) {
			return []string{c.Spec.ControlPlaneRef.Name}
		}
		return nil
	}},
}

func poolField(field func(*v1.NodeGroup) string) client.IndexerFunc {
	return func(o client.Object) []string { return []string{field(o.(*v1.NodeGroup))} }
}

// RegisterIndexes registers every field index of the operator's controllers with a
// manager's indexer (mgr.GetFieldIndexer()), before the manager starts. It is the one
// registration: an indexer refuses a second index of a name, and a controller listing
// by an index nobody registered gets an error, so every manager that runs the
// controllers, the operator's and each test suite's, calls it once.
func RegisterIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, i := range indexes {
		if err := indexer.IndexField(ctx, i.obj, i.name, i.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", i.obj, i.name, err)
		}
	}
	return nil
}
