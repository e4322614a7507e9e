// Package v1alpha1 holds the nodegroup.io/v1alpha1 API: NodeGroupClass and Location,
// which a platform operator publishes, and NodeGroup, which a tenant creates.
//
// +kubebuilder:object:generate=true
// +groupName=nodegroup.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "nodegroup.io", Version: "v1alpha1"}

	// schemeBuilder registers the kinds of this package with a runtime.Scheme. It is
	// apimachinery's, not controller-runtime's, so importing the API does not import
	// controller-runtime.
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = schemeBuilder.AddToScheme

	// objectTypes are the kinds of this package; each types file adds its own.
	objectTypes = []runtime.Object{}
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, objectTypes...)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
