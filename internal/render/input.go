// Package render turns one resolved pool (an Input) into the Cluster API objects that
// run it. It is pure: no client, no clock, no randomness. The same Input gives the same
// objects, byte for byte, which is what lets a resync that changes nothing send nothing.
package render

import (
	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// Input is everything render needs, resolved from the API server by internal/resolve.
type Input struct {
	// Namespace and Name of the NodeGroup.
	Namespace string
	Name      string
	// Spec of the NodeGroup, with API defaults applied.
	Spec v1.NodeGroupSpec

	// ClassName and Class are the pool's NodeGroupClass.
	ClassName string
	Class     v1.NodeGroupClassSpec

	// LocationName and Location are the pool's Location.
	LocationName string
	Location     v1.LocationSpec

	// Cluster holds the facts of the pool's Cluster and its control plane.
	Cluster Cluster

	// Release is the catalog entry of the pool's Kubernetes minor.
	Release catalog.Release
	// Factory is the catalog's Talos Image Factory, for Talos installers and disks.
	Factory catalog.TalosFactory
	// KubernetesVersion is the exact release the pool runs (vMAJOR.MINOR.PATCH).
	KubernetesVersion string
	// ControlPlaneVersion is the release of the pool's control plane, empty when unknown;
	// the admission rules read it, render does not.
	ControlPlaneVersion string

	// Machine is the size of each machine, from spec.resources or the instancetype.
	Machine MachineSize

	// TalosSecrets are the cluster's Talos secrets; set for Talos classes.
	TalosSecrets *TalosSecrets

	// KairosUserSecret names the per-cluster Secret holding the worker user's random
	// password (key "password"); set for Kairos classes.
	KairosUserSecret string
	// ImagePullSecret names the operator's copy of the class's pull secret in the pool's
	// namespace, for CDI to pull the worker disk; empty when the class has none.
	ImagePullSecret string
}

// Cluster holds the facts of a CAPI Cluster and its control plane that render needs.
type Cluster struct {
	// Name of the CAPI Cluster (in the pool's namespace).
	Name string
	// ControlPlaneEndpoint is the tenant API server as host and port.
	ControlPlaneHost string
	ControlPlanePort int32
	// ServiceCIDRs and PodCIDRs of the tenant cluster.
	ServiceCIDRs []string
	PodCIDRs     []string
	// DNSDomain of the tenant cluster, such as cluster.local.
	DNSDomain string
	// TenantDNS is the tenant CoreDNS address (the 10th address of the first service CIDR).
	TenantDNS string
	// APIServer is the tenant API server's Service in the management cluster; workers
	// map its names to its ClusterIP so it resolves at first boot.
	APIServer ServiceAddress
	// ManagementDNS is the management cluster's DNS address, the workers' nameserver.
	ManagementDNS string
	// ManagementDNSDomain is the management cluster's DNS domain, such as cluster.local.
	ManagementDNSDomain string
}

// ServiceAddress is a Service in the management cluster and its ClusterIP.
type ServiceAddress struct {
	Name      string
	Namespace string
	ClusterIP string
}

// MachineSize is the size of one machine.
type MachineSize struct {
	// MilliCPU is the machine's CPU in thousandths of a core.
	MilliCPU int64
	// MemoryBytes is the machine's memory.
	MemoryBytes int64
	// InstanceType, when set, sizes the VM instead of explicit CPU and memory.
	InstanceType string
}

// TalosSecrets are the per-cluster secrets a Talos worker config carries. They come from
// the Secret `<cluster>-talos` in the pool's namespace (keys documented in
// internal/resolve).
type TalosSecrets struct {
	// MachineToken is the trustd token workers use to get their certificates.
	MachineToken string
	// MachineCACert is the Talos machine CA certificate (PEM).
	MachineCACert string
	// ClusterCACert is the Kubernetes CA certificate of the tenant cluster (PEM).
	ClusterCACert string
	// ClusterID and ClusterSecret identify the cluster for Talos discovery.
	ClusterID     string
	ClusterSecret string
	// BootstrapToken is the Kubernetes bootstrap token, `abcdef.0123456789abcdef`.
	BootstrapToken string
}
