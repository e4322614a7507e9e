package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocationSpec says where the machines of a pool run. Where (provider, region, zone) is
// immutable; who may use it (allowedNamespaces) may change.
type LocationSpec struct {
	// provider is the machine provider of this location; exactly one is set.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.provider is immutable: publish a new location and move pools to it"
	Provider LocationProvider `json:"provider"`

	// region becomes the topology.kubernetes.io/region label of the nodes.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.region is immutable: publish a new location and move pools to it"
	Region string `json:"region,omitempty"`

	// zone becomes the topology.kubernetes.io/zone label of the nodes.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.zone is immutable: publish a new location and move pools to it"
	Zone string `json:"zone,omitempty"`

	// allowedNamespaces selects, by their labels, the tenant namespaces that may place
	// pools here. Unset admits no namespace; an empty selector ({}) admits every one.
	// It may change: a pool in a namespace it no longer admits keeps its machines, is
	// reported LocationResolved=False, and is refused any change but a move to a
	// location that admits it.
	// +optional
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`
}

// ProviderType names the machine provider of a location.
// +kubebuilder:validation:Enum=KubeVirt;Proxmox;HCloud;Static
type ProviderType string

const (
	ProviderKubeVirt ProviderType = "KubeVirt"
	ProviderProxmox  ProviderType = "Proxmox"
	ProviderHCloud   ProviderType = "HCloud"
	ProviderStatic   ProviderType = "Static"
)

// LocationProvider holds the settings of exactly one machine provider, named by type.
//
// +kubebuilder:validation:XValidation:rule="[has(self.kubevirt), has(self.proxmox), has(self.hcloud), has(self.static)].filter(x, x).size() == 1",message="spec.provider must set exactly one of kubevirt, proxmox, hcloud, static"
// +kubebuilder:validation:XValidation:rule="self.type == 'KubeVirt' ? has(self.kubevirt) : self.type == 'Proxmox' ? has(self.proxmox) : self.type == 'HCloud' ? has(self.hcloud) : has(self.static)",message="spec.provider.type must name the provider block that is set (KubeVirt: kubevirt, Proxmox: proxmox, HCloud: hcloud, Static: static)"
type LocationProvider struct {
	// type names the provider whose block is set.
	// +required
	Type ProviderType `json:"type"`

	// kubevirt runs machines as KubeVirt VMs in the management cluster, in the pool's
	// namespace.
	// +optional
	KubeVirt *KubeVirtProvider `json:"kubevirt,omitempty"`

	// proxmox runs machines as Proxmox VE VMs. Accepted by the API; the operator reports
	// pools on it as not yet supported.
	// +optional
	Proxmox *ProxmoxProvider `json:"proxmox,omitempty"`

	// hcloud runs machines as Hetzner Cloud servers. Accepted by the API; the operator
	// reports pools on it as not yet supported.
	// +optional
	HCloud *HCloudProvider `json:"hcloud,omitempty"`

	// static adopts machines the platform brings itself. Accepted by the API; the
	// operator reports pools on it as not yet supported.
	// +optional
	Static *StaticProvider `json:"static,omitempty"`
}

// EvictionStrategy says what happens to a VM when its host is drained.
// +kubebuilder:validation:Enum=External;LiveMigrate;None
type EvictionStrategy string

// KubeVirtProvider places VMs in the management cluster.
type KubeVirtProvider struct {
	// storageClassName is the storage class of the system disk. Empty uses the
	// cluster's default class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName string `json:"storageClassName,omitempty"`

	// networks are Multus networks attached after the pod network.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	Networks []KubeVirtNetwork `json:"networks,omitempty"`

	// evictionStrategy of the VMs. External (the default) lets Cluster API drain the
	// node and replace the machine, which works without live migration.
	// +optional
	// +kubebuilder:default=External
	EvictionStrategy EvictionStrategy `json:"evictionStrategy,omitempty"`
}

// KubeVirtNetwork attaches a Multus network to the VMs.
type KubeVirtNetwork struct {
	// name of the interface in the VM.
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// networkName is the NetworkAttachmentDefinition, as `name` or `namespace/name`.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	NetworkName string `json:"networkName"`
}

// ProxmoxProvider places VMs on a Proxmox VE cluster.
type ProxmoxProvider struct {
	// credentialsRef names the Secret with the Proxmox API token.
	// +required
	CredentialsRef SecretReference `json:"credentialsRef"`
	// sourceNode is the Proxmox node holding the VM template.
	// +required
	// +kubebuilder:validation:MaxLength=63
	SourceNode string `json:"sourceNode"`
}

// HCloudProvider places servers in Hetzner Cloud.
type HCloudProvider struct {
	// credentialsRef names the Secret with the Hetzner Cloud API token.
	// +required
	CredentialsRef SecretReference `json:"credentialsRef"`
	// location is the Hetzner location, such as fsn1.
	// +required
	// +kubebuilder:validation:MaxLength=16
	Location string `json:"location"`
}

// StaticProvider adopts machines the platform brings itself.
type StaticProvider struct {
	// hostSelector selects the hosts of this location by their labels.
	// +required
	HostSelector metav1.LabelSelector `json:"hostSelector"`
}

// LocationStatus is what the operator observes about a location.
type LocationStatus struct {
	// conditions: InUse says which pools name the location.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Location is a place where the machines of pools run. It is cluster-scoped, its
// placement is immutable, and it admits only the namespaces its allowedNamespaces
// selects.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="helm.sh/resource-policy=keep"
// +kubebuilder:resource:scope=Cluster,shortName=ngloc,categories=nodegroup-all
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider.type`
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.spec.region`
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.spec.zone`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Location struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is immutable but for allowedNamespaces: a change of provider, region or
	// zone would move running machines, while who may use the location is the
	// platform's to change (the chart's built-in location follows helm upgrade).
	// +required
	// The fields carry their own rules (self == oldSelf costs nothing to estimate, a
	// comparison of the provider here would exceed the cost budget); this one catches
	// a region or zone added or removed, which a field's own rule never sees.
	// +kubebuilder:validation:XValidation:rule="has(self.region) == has(oldSelf.region) && has(self.zone) == has(oldSelf.zone)",message="spec.region and spec.zone cannot be added or removed: publish a new location and move pools to it"
	Spec LocationSpec `json:"spec"`

	// +optional
	Status LocationStatus `json:"status,omitempty"`
}

// LocationList is a list of Location.
//
// +kubebuilder:object:root=true
type LocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Location `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Location{}, &LocationList{})
}
