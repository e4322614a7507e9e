// Package capmox holds the parts of the Cluster API Proxmox provider's API (capmox v0.9,
// infrastructure.cluster.x-k8s.io/v1alpha2, the storage version of its CRDs) that this
// operator writes. capmox's own module pins an older Cluster API and controller-runtime,
// so this thin wrapper is declared here with only the fields the operator sets; the
// tests check every rendered object against the upstream CRDs with strict validation,
// so a field misspelt or mistyped here fails there.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package capmox

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of the capmox kinds we render.
var GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha2"}

// ProxmoxMachineTemplate is a template of Proxmox VMs for a MachineDeployment.
//
// +kubebuilder:object:root=true
type ProxmoxMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ProxmoxMachineTemplateSpec `json:"spec"`
}

// ProxmoxMachineTemplateSpec holds the template.
type ProxmoxMachineTemplateSpec struct {
	Template ProxmoxMachineTemplateResource `json:"template"`
}

// ProxmoxMachineTemplateResource is the ProxmoxMachine each Machine gets.
type ProxmoxMachineTemplateResource struct {
	Spec ProxmoxMachineSpec `json:"spec"`
}

// ProxmoxMachineSpec is one VM, cloned from a template VM.
type ProxmoxMachineSpec struct {
	// SourceNode and TemplateID name the template VM; TemplateSelector finds it by its
	// tags instead.
	SourceNode       string            `json:"sourceNode,omitempty"`
	TemplateID       *int32            `json:"templateID,omitempty"`
	TemplateSelector *TemplateSelector `json:"templateSelector,omitempty"`
	// Storage of the full clone's disks; empty keeps the template's.
	Storage string `json:"storage,omitempty"`

	NumSockets int32 `json:"numSockets"`
	NumCores   int32 `json:"numCores"`
	// MemoryMiB must be a multiple of 8.
	MemoryMiB int32 `json:"memoryMiB"`

	Disks            Storage          `json:"disks"`
	Network          NetworkSpec      `json:"network"`
	Checks           Checks           `json:"checks"`
	MetadataSettings MetadataSettings `json:"metadataSettings"`
	AllowedNodes     []string         `json:"allowedNodes,omitempty"`
}

// TemplateSelector finds the template VM by its Proxmox tags.
type TemplateSelector struct {
	MatchTags []string `json:"matchTags"`
	// MatchPolicy is exact, uniqueSubset or bestSubset.
	MatchPolicy string `json:"matchPolicy"`
}

// Storage holds the boot volume, which capmox grows to SizeGB before the first boot.
type Storage struct {
	BootVolume DiskSize `json:"bootVolume"`
}

// DiskSize is a disk device (scsi0) and its size in GiB.
type DiskSize struct {
	Disk   string `json:"disk"`
	SizeGB int32  `json:"sizeGb"`
}

// NetworkSpec holds the VM's network devices.
type NetworkSpec struct {
	NetworkDevices []NetworkDevice `json:"networkDevices"`
}

// NetworkDevice is one network device. DefaultIPv4 and DefaultIPv6 give it an address
// from the IPAM pools capmox makes of the ProxmoxCluster's ipv4Config and ipv6Config.
type NetworkDevice struct {
	Name        string `json:"name"`
	Bridge      string `json:"bridge"`
	Model       string `json:"model"`
	VLAN        *int32 `json:"vlan,omitempty"`
	DefaultIPv4 *bool  `json:"defaultIPv4,omitempty"`
	DefaultIPv6 *bool  `json:"defaultIPv6,omitempty"`
}

// Checks capmox makes before it reports a VM provisioned.
type Checks struct {
	SkipQemuGuestAgent  bool `json:"skipQemuGuestAgent"`
	SkipCloudInitStatus bool `json:"skipCloudInitStatus"`
}

// MetadataSettings of the VM's NoCloud metadata.
type MetadataSettings struct {
	// ProviderIDInjection writes the providerID into the metadata.
	ProviderIDInjection bool `json:"providerIDInjection"`
}

// ProxmoxMachineTemplateList is a list of ProxmoxMachineTemplate.
//
// +kubebuilder:object:root=true
type ProxmoxMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProxmoxMachineTemplate `json:"items"`
}

// ProxmoxCluster is the InfraCluster of a Cluster whose machines run on one Proxmox VE
// cluster: its API credentials, address pools and DNS servers.
//
// +kubebuilder:object:root=true
type ProxmoxCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ProxmoxClusterSpec `json:"spec"`
}

// ProxmoxClusterSpec is what the operator sets of a ProxmoxCluster.
type ProxmoxClusterSpec struct {
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint"`
	// ExternalManagedControlPlane: the control plane is not capmox's (Kamaji runs it),
	// so capmox takes the endpoint as given.
	ExternalManagedControlPlane bool             `json:"externalManagedControlPlane"`
	AllowedNodes                []string         `json:"allowedNodes,omitempty"`
	IPv4Config                  *IPConfig        `json:"ipv4Config,omitempty"`
	IPv6Config                  *IPConfig        `json:"ipv6Config,omitempty"`
	DNSServers                  []string         `json:"dnsServers"`
	CredentialsRef              *SecretReference `json:"credentialsRef,omitempty"`
}

// APIEndpoint is a host and port.
type APIEndpoint struct {
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// IPConfig is an address pool: addresses, ranges or CIDRs, with prefix and gateway.
type IPConfig struct {
	Addresses []string `json:"addresses"`
	Prefix    int32    `json:"prefix"`
	Gateway   string   `json:"gateway"`
}

// SecretReference names a Secret; capmox reads the keys url, token and secret.
type SecretReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ProxmoxClusterList is a list of ProxmoxCluster.
//
// +kubebuilder:object:root=true
type ProxmoxClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProxmoxCluster `json:"items"`
}

// AddToScheme registers the kinds of this package.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ProxmoxMachineTemplate{}, &ProxmoxMachineTemplateList{}, &ProxmoxCluster{}, &ProxmoxClusterList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
