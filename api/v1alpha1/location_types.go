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

	// proxmox runs machines as Proxmox VE VMs, Talos pools only. Each tenant cluster
	// with pools here gets a satellite Cluster API Cluster in its namespace, which the
	// pools' machines run under (docs/locations.md).
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

// Satellite is true when pools on the location run under a satellite Cluster API
// Cluster of their tenant cluster (one per tenant cluster and location) rather than
// under the tenant's Cluster itself: the location's infrastructure provider reads its
// endpoint and credentials from the one InfraCluster a Cluster has.
func (p *LocationProvider) Satellite() bool { return p.Proxmox != nil }

// ProxmoxProvider places VMs on a Proxmox VE cluster through the Cluster API Proxmox
// provider (capmox v0.9). Everything here is the platform's: tenants may read a Location,
// so it names the credentials Secret but never holds the token.
//
// +kubebuilder:validation:XValidation:rule="has(self.ipv4) || has(self.ipv6)",message="spec.provider.proxmox must set ipv4, ipv6 or both: every worker gets its address from them"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv4) || self.ipv4.addresses.all(a, a.contains('/') ? isCIDR(a) && cidr(a).ip().family() == 4 : a.split('-').size() <= 2 && a.split('-').all(p, isIP(p) && ip(p).family() == 4))",message="spec.provider.proxmox.ipv4.addresses must be IPv4 addresses, ranges (first-last) or CIDRs"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv4) || (isIP(self.ipv4.gateway) && ip(self.ipv4.gateway).family() == 4)",message="spec.provider.proxmox.ipv4.gateway must be an IPv4 address"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv4) || self.ipv4.prefix <= 32",message="spec.provider.proxmox.ipv4.prefix must be between 1 and 32"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv6) || self.ipv6.addresses.all(a, a.contains('/') ? isCIDR(a) && cidr(a).ip().family() == 6 : a.split('-').size() <= 2 && a.split('-').all(p, isIP(p) && ip(p).family() == 6))",message="spec.provider.proxmox.ipv6.addresses must be IPv6 addresses, ranges (first-last) or CIDRs"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv6) || (isIP(self.ipv6.gateway) && ip(self.ipv6.gateway).family() == 6)",message="spec.provider.proxmox.ipv6.gateway must be an IPv6 address"
// +kubebuilder:validation:XValidation:rule="self.dnsServers.all(s, isIP(s))",message="spec.provider.proxmox.dnsServers must be IP addresses"
type ProxmoxProvider struct {
	// credentialsRef names the Secret with the Proxmox API endpoint and token (keys url,
	// token, secret, as capmox reads them), in the platform's namespace. Tenants never
	// see it: the operator copies it into each tenant namespace that has pools here.
	// Give each location its own API token with the least privileges capmox documents.
	// +required
	CredentialsRef SecretReference `json:"credentialsRef"`

	// tenantAPIServer says how workers here reach their tenant's API server. Unset,
	// they dial the tenant Cluster's spec.controlPlaneEndpoint, which must then be
	// reachable from this location.
	// +optional
	TenantAPIServer *ProxmoxTenantAPIServer `json:"tenantAPIServer,omitempty"`

	// ipv4 is the pool the workers' IPv4 addresses come from (the Cluster API in-cluster
	// IPAM provider serves it; capmox has no DHCP mode).
	// +optional
	IPv4 *ProxmoxIPPool `json:"ipv4,omitempty"`

	// ipv6 is the pool of the workers' IPv6 addresses, alone or beside ipv4.
	// +optional
	IPv6 *ProxmoxIPPool `json:"ipv6,omitempty"`

	// dnsServers are the workers' name servers.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=45
	DNSServers []string `json:"dnsServers,omitempty"`

	// allowedNodes are the Proxmox nodes VMs may be placed on. Unset: any node of the
	// Proxmox cluster (capmox's choice).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$`
	AllowedNodes []string `json:"allowedNodes,omitempty"`

	// network is the bridge (and VLAN) the workers' network device is on.
	// +required
	Network ProxmoxNetwork `json:"network"`

	// template says which VM template a pool's machines are cloned from, per Talos
	// version. The platform builds the templates (this project does not).
	// +required
	Template ProxmoxTemplate `json:"template"`

	// bootDisk is the template's boot disk device, which capmox grows to the pool's
	// spec.ephemeralStorage.
	// +optional
	// +kubebuilder:default=scsi0
	// +kubebuilder:validation:Pattern=`^(ide[0-3]|sata[0-5]|scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5]))$`
	BootDisk string `json:"bootDisk,omitempty"`

	// storage is the Proxmox storage of the cloned disks. Unset: the template's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z][-A-Za-z0-9_.]*$`
	Storage string `json:"storage,omitempty"`
}

// ProxmoxTenantAPIServer names a tenant's API server as workers in a location see it.
//
// A host and port rather than a URL: Talos (a https URL), kubeadm and capmox
// (ProxmoxCluster.spec.controlPlaneEndpoint) each take host and port, and a URL would
// admit a scheme, path, user or query none of them can use. A domain rather than one
// host: a location serves many tenants, each with its own API server and certificate.
type ProxmoxTenantAPIServer struct {
	// domain names every tenant's API server for workers here:
	// <cluster>.<namespace>.<domain>. The platform resolves these names from this
	// location to where the tenant's Kamaji API server answers, and its certificate
	// must carry the name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=120
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Domain string `json:"domain"`

	// port workers dial. Unset: the port of the tenant Cluster's
	// spec.controlPlaneEndpoint.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// ProxmoxIPPool is a range of addresses for the workers of a location, with the prefix
// and gateway of their network.
type ProxmoxIPPool struct {
	// addresses are single addresses, ranges (first-last) or CIDRs.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=90
	Addresses []string `json:"addresses,omitempty"`
	// prefix is the length of the workers' network prefix.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	Prefix int32 `json:"prefix"`
	// gateway is the workers' default gateway.
	// +required
	// +kubebuilder:validation:MaxLength=45
	Gateway string `json:"gateway"`
}

// ProxmoxNetwork is where a worker's network device is attached.
type ProxmoxNetwork struct {
	// bridge is the Proxmox bridge (or SDN VNet), such as vmbr0.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z][-A-Za-z0-9_.]*$`
	Bridge string `json:"bridge"`
	// vlan tags the device. Unset: untagged.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	VLAN int32 `json:"vlan,omitempty"`
}

// ProxmoxTemplate chooses the VM template of a pool by its Talos version: by tags, or by
// template ID on a source node.
//
// +kubebuilder:validation:XValidation:rule="has(self.tags) != has(self.ids)",message="spec.provider.proxmox.template must set exactly one of tags and ids"
// +kubebuilder:validation:XValidation:rule="has(self.ids) == has(self.sourceNode)",message="spec.provider.proxmox.template.sourceNode is required with template.ids, and only with them"
type ProxmoxTemplate struct {
	// tags select the template by its Proxmox tags: the one template that carries all
	// of them and the tag talos-<version> of the pool's Talos release (talos-v1.11.5)
	// (capmox's templateSelector, matchPolicy uniqueSubset).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9_][-a-z0-9_+.]*$`
	Tags []string `json:"tags,omitempty"`

	// ids name the template of each Talos release by its VM ID. A pool whose Talos
	// release has none is not rendered.
	// +optional
	// +listType=map
	// +listMapKey=talosVersion
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	IDs []ProxmoxTemplateID `json:"ids,omitempty"`

	// sourceNode is the Proxmox node that holds the templates named by ids.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$`
	SourceNode string `json:"sourceNode,omitempty"`
}

// ProxmoxTemplateID is the VM template of one Talos release.
type ProxmoxTemplateID struct {
	// talosVersion is the Talos release, such as v1.11.5.
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^v[0-9]+\.[0-9]+\.[0-9]+$`
	TalosVersion string `json:"talosVersion"`
	// templateID is the template's Proxmox VM ID.
	// +required
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=999999999
	TemplateID int32 `json:"templateID"`
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
