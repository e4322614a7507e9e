// Package talos holds the parts of the Talos Cluster API bootstrap provider's API
// (CABPT v0.6, bootstrap.cluster.x-k8s.io/v1alpha3) that this operator writes. Only the
// fields we render are declared; the integration tests apply them to the upstream CRD with
// strict field validation, so a wrong name is caught there.
//
// +kubebuilder:object:generate=true
// +groupName=bootstrap.cluster.x-k8s.io
package talos

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of the TalosConfigTemplate we render.
var GroupVersion = schema.GroupVersion{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3"}

// GenerateTypeNone makes CABPT use the rendered machine config as it is.
const GenerateTypeNone = "none"

// TalosConfigTemplate is a template of Talos machine configs for a MachineDeployment.
//
// +kubebuilder:object:root=true
type TalosConfigTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TalosConfigTemplateSpec `json:"spec"`
}

// TalosConfigTemplateSpec holds the template.
type TalosConfigTemplateSpec struct {
	Template TalosConfigTemplateResource `json:"template"`
}

// TalosConfigTemplateResource is the TalosConfig each Machine gets.
type TalosConfigTemplateResource struct {
	Spec TalosConfigSpec `json:"spec"`
}

// TalosConfigSpec is the bootstrap config of one machine.
type TalosConfigSpec struct {
	// GenerateType "none" with Data: the machine config is complete as rendered.
	GenerateType string `json:"generateType"`
	// TalosVersion the config is written for.
	TalosVersion string `json:"talosVersion,omitempty"`
	// Data is the full machine config document.
	Data string `json:"data,omitempty"`
}

// TalosConfigTemplateList is a list of TalosConfigTemplate.
//
// +kubebuilder:object:root=true
type TalosConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TalosConfigTemplate `json:"items"`
}

// AddToScheme registers the kinds of this package.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &TalosConfigTemplate{}, &TalosConfigTemplateList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
