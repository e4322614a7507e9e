// Package capk holds the parts of the Cluster API KubeVirt provider's API (CAPK v0.11,
// infrastructure.cluster.x-k8s.io/v1alpha1) and of the KubeVirt VirtualMachine it embeds
// that this operator writes. Only the fields we render are declared; the integration
// tests apply them to the upstream CRD with strict field validation.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package capk

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// VirtualMachineTemplateSpec is the KubeVirt VirtualMachine of a machine.
type VirtualMachineTemplateSpec struct {
	Metadata ObjectMeta         `json:"metadata,omitempty"`
	Spec     VirtualMachineSpec `json:"spec"`
}

// ObjectMeta is the part of object metadata embedded templates carry.
type ObjectMeta struct {
	Name        string            `json:"name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// VirtualMachineSpec (kubevirt.io/v1).
type VirtualMachineSpec struct {
	RunStrategy         string                   `json:"runStrategy"`
	Instancetype        *InstancetypeMatcher     `json:"instancetype,omitempty"`
	Template            VMITemplateSpec          `json:"template"`
	DataVolumeTemplates []DataVolumeTemplateSpec `json:"dataVolumeTemplates,omitempty"`
}

// InstancetypeMatcher names a VirtualMachineClusterInstancetype.
type InstancetypeMatcher struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// VMITemplateSpec is the VirtualMachineInstance template.
type VMITemplateSpec struct {
	Metadata ObjectMeta `json:"metadata,omitempty"`
	Spec     VMISpec    `json:"spec"`
}

// VMISpec (kubevirt.io/v1 VirtualMachineInstanceSpec).
type VMISpec struct {
	Domain           DomainSpec `json:"domain"`
	EvictionStrategy string     `json:"evictionStrategy,omitempty"`
	Networks         []Network  `json:"networks,omitempty"`
	Volumes          []Volume   `json:"volumes,omitempty"`
}

// DomainSpec is the VM's virtual hardware.
type DomainSpec struct {
	CPU       *CPU       `json:"cpu,omitempty"`
	Memory    *Memory    `json:"memory,omitempty"`
	Resources *Resources `json:"resources,omitempty"`
	Firmware  *Firmware  `json:"firmware,omitempty"`
	Features  *Features  `json:"features,omitempty"`
	Devices   Devices    `json:"devices"`
}

// CPU of the VM.
type CPU struct {
	Cores   uint32 `json:"cores,omitempty"`
	Sockets uint32 `json:"sockets,omitempty"`
	Threads uint32 `json:"threads,omitempty"`
}

// Memory of the VM.
type Memory struct {
	Guest *resource.Quantity `json:"guest,omitempty"`
}

// Resources of the virt-launcher pod.
type Resources struct {
	Requests map[string]resource.Quantity `json:"requests,omitempty"`
	Limits   map[string]resource.Quantity `json:"limits,omitempty"`
}

// Firmware of the VM.
type Firmware struct {
	Bootloader *Bootloader `json:"bootloader,omitempty"`
}

// Bootloader selects BIOS or EFI.
type Bootloader struct {
	EFI *EFI `json:"efi,omitempty"`
}

// EFI firmware. SecureBoot is set explicitly: KubeVirt defaults it on, which needs SMM.
type EFI struct {
	SecureBoot *bool `json:"secureBoot,omitempty"`
}

// Features of the VM.
type Features struct {
	SMM *FeatureState `json:"smm,omitempty"`
}

// FeatureState turns a feature on or off.
type FeatureState struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// Devices of the VM.
type Devices struct {
	Disks       []Disk       `json:"disks,omitempty"`
	Interfaces  []Interface  `json:"interfaces,omitempty"`
	HostDevices []HostDevice `json:"hostDevices,omitempty"`
}

// Disk attaches a volume.
type Disk struct {
	Name      string      `json:"name"`
	BootOrder *uint32     `json:"bootOrder,omitempty"`
	Disk      *DiskTarget `json:"disk,omitempty"`
}

// DiskTarget is the bus of a disk.
type DiskTarget struct {
	Bus string `json:"bus,omitempty"`
}

// Empty is a JSON object with no fields, selecting a mode (pod network, bridge, ...).
type Empty struct{}

// Interface is a network interface.
type Interface struct {
	Name       string `json:"name"`
	Bridge     *Empty `json:"bridge,omitempty"`
	Masquerade *Empty `json:"masquerade,omitempty"`
}

// HostDevice passes a host device (GPU) through.
type HostDevice struct {
	Name       string `json:"name"`
	DeviceName string `json:"deviceName"`
}

// Network is the pod network or a Multus network.
type Network struct {
	Name   string         `json:"name"`
	Pod    *Empty         `json:"pod,omitempty"`
	Multus *MultusNetwork `json:"multus,omitempty"`
}

// MultusNetwork names a NetworkAttachmentDefinition.
type MultusNetwork struct {
	NetworkName string `json:"networkName"`
}

// Volume is a VM volume.
type Volume struct {
	Name       string                `json:"name"`
	DataVolume *DataVolumeSource     `json:"dataVolume,omitempty"`
	CloudInit  *CloudInitConfigDrive `json:"cloudInitConfigDrive,omitempty"`
}

// DataVolumeSource names a DataVolume of the VM.
type DataVolumeSource struct {
	Name string `json:"name"`
}

// CloudInitConfigDrive is a config drive volume.
type CloudInitConfigDrive struct {
	UserData string `json:"userData,omitempty"`
}

// DataVolumeTemplateSpec is a CDI DataVolume the VM owns.
type DataVolumeTemplateSpec struct {
	Metadata ObjectMeta     `json:"metadata"`
	Spec     DataVolumeSpec `json:"spec"`
}

// DataVolumeSpec (cdi.kubevirt.io/v1beta1).
type DataVolumeSpec struct {
	Source  DataVolumeSource2 `json:"source"`
	Storage StorageSpec       `json:"storage"`
}

// DataVolumeSource2 is where CDI imports the disk from.
type DataVolumeSource2 struct {
	HTTP     *HTTPSource     `json:"http,omitempty"`
	Registry *RegistrySource `json:"registry,omitempty"`
}

// HTTPSource imports from a URL (Talos Image Factory disks).
type HTTPSource struct {
	URL string `json:"url"`
}

// RegistrySource imports a containerDisk from a registry.
type RegistrySource struct {
	URL        string `json:"url"`
	SecretRef  string `json:"secretRef,omitempty"`
	PullMethod string `json:"pullMethod,omitempty"`
}

// StorageSpec sizes the disk.
type StorageSpec struct {
	StorageClassName *string          `json:"storageClassName,omitempty"`
	AccessModes      []string         `json:"accessModes,omitempty"`
	Resources        StorageResources `json:"resources"`
}

// StorageResources requests the disk size.
type StorageResources struct {
	Requests map[string]resource.Quantity `json:"requests"`
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
