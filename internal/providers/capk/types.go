// Package capk holds the parts of the Cluster API KubeVirt provider's API (CAPK v0.11,
// infrastructure.cluster.x-k8s.io/v1alpha1) that this operator writes. CAPK's own module
// pins an older Cluster API and controller-runtime, so this thin wrapper is declared here;
// the VirtualMachine it embeds is kubevirt.io/api's, at the version CAPK v0.11 builds
// against. The integration tests apply it to the upstream CRD with strict field validation.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package capk

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// GroupVersion of the KubevirtMachineTemplate we render.
var GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1"}

// KubevirtMachineTemplate is a template of KubeVirt machines for a MachineDeployment.
//
// +kubebuilder:object:root=true
type KubevirtMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              KubevirtMachineTemplateSpec `json:"spec"`
}

// KubevirtMachineTemplateSpec holds the template.
type KubevirtMachineTemplateSpec struct {
	Template KubevirtMachineTemplateResource `json:"template"`
}

// KubevirtMachineTemplateResource is the KubevirtMachine each Machine gets.
type KubevirtMachineTemplateResource struct {
	Spec KubevirtMachineSpec `json:"spec"`
}

// KubevirtMachineSpec is one machine.
type KubevirtMachineSpec struct {
	VirtualMachineTemplate       VirtualMachineTemplateSpec   `json:"virtualMachineTemplate"`
	VirtualMachineBootstrapCheck VirtualMachineBootstrapCheck `json:"virtualMachineBootstrapCheck"`
}

// VirtualMachineBootstrapCheck says how CAPK decides the bootstrap finished. "none":
// Talos and our Kairos workers have no SSH for CAPK to check.
type VirtualMachineBootstrapCheck struct {
	CheckStrategy string `json:"checkStrategy"`
}

// VirtualMachineTemplateSpec is the KubeVirt VirtualMachine of a machine: KubeVirt's own
// VirtualMachineSpec, with CDI's DataVolumeSpec in its dataVolumeTemplates.
type VirtualMachineTemplateSpec struct {
	ObjectMeta metav1.ObjectMeta             `json:"metadata,omitempty"`
	Spec       kubevirtv1.VirtualMachineSpec `json:"spec"`
}

// KubevirtMachineTemplateList is a list of KubevirtMachineTemplate.
//
// +kubebuilder:object:root=true
type KubevirtMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubevirtMachineTemplate `json:"items"`
}

// AddToScheme registers the kinds of this package.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &KubevirtMachineTemplate{}, &KubevirtMachineTemplateList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
