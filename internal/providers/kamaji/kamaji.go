// Package kamaji names the Kamaji control-plane provider's KamajiControlPlane. The
// operator reads and writes it unstructured (Kamaji's module is not a dependency), so
// only its kind is declared here, where the controllers, the field indexes and the
// cache options all find it.
package kamaji

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ControlPlaneGVK is the kind and the served version the operator reads and writes
// (Kamaji control-plane provider v0.20.0 serves only v1alpha2).
var ControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha2", Kind: "KamajiControlPlane"}

// IsControlPlaneOf says whether the Cluster's control plane is a KamajiControlPlane.
func IsControlPlaneOf(c *clusterv1.Cluster) bool {
	ref := c.Spec.ControlPlaneRef
	return ref.Name != "" && ref.Kind == ControlPlaneGVK.Kind && ref.APIGroup == ControlPlaneGVK.Group
}
