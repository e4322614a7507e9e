// Package v1alpha1 holds the controlplane.nodegroup.io/v1alpha1 API: SatelliteControlPlane,
// the control plane of a satellite Cluster. The operator makes one per tenant Cluster and
// location other than the management cluster (LOCATIONS.md in the docs); tenants and
// platform operators read it, nobody edits it.
//
// +kubebuilder:object:generate=true
// +groupName=controlplane.nodegroup.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "controlplane.nodegroup.io", Version: "v1alpha1"}

	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &SatelliteControlPlane{}, &SatelliteControlPlaneList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
