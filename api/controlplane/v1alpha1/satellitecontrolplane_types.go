package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SatelliteControlPlaneSpec is what the operator mirrors of the tenant's control plane
// for the workers of one location.
//
// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName && self.locationName == oldSelf.locationName",message="spec.clusterName and spec.locationName are immutable: a satellite serves one tenant Cluster in one location"
type SatelliteControlPlaneSpec struct {
	// clusterName is the tenant Cluster, in this namespace, whose control plane this
	// mirrors: its KamajiControlPlane.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName"`
	// locationName is the Location whose workers join through this control plane.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	LocationName string `json:"locationName"`
	// controlPlaneEndpoint is the tenant's API server as the location's workers reach it
	// (the Location's tenantAPIServer, or the KamajiControlPlane's endpoint).
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitzero"`
	// version is the tenant control plane's desired Kubernetes version (the
	// KamajiControlPlane's spec.version). With status.version, Cluster API holds the
	// satellite's scale-ups while the tenant upgrades, as it holds the main Cluster's.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`
}

// APIEndpoint is a host and port, the shape Cluster API reads.
type APIEndpoint struct {
	// host is a DNS name or an IP address.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`
	// port is the TCP port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// SatelliteControlPlaneStatus mirrors the KamajiControlPlane's status in the fields
// Cluster API's control-plane contract reads.
type SatelliteControlPlaneStatus struct {
	// initialization says whether the tenant's control plane is initialized.
	// +optional
	Initialization SatelliteControlPlaneInitialization `json:"initialization,omitzero"`
	// version is the tenant control plane's current Kubernetes version (the
	// KamajiControlPlane's status.version).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`
	// externalManagedControlPlane is always true: no Machine of this Cluster is a
	// control-plane machine.
	// +optional
	ExternalManagedControlPlane *bool `json:"externalManagedControlPlane,omitempty"`
	// conditions: Ready says whether the tenant's control plane was found and mirrored.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// SatelliteControlPlaneInitialization is the contract's initialization block.
// +kubebuilder:validation:MinProperties=1
type SatelliteControlPlaneInitialization struct {
	// controlPlaneInitialized is true once the tenant's control plane is.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// SatelliteControlPlane is the control plane of a satellite Cluster: the Cluster through
// which the workers of one tenant Cluster in one location (a Proxmox VE cluster, say)
// are managed, with that location's InfraCluster. It runs nothing: it mirrors the
// tenant's KamajiControlPlane (endpoint as the location sees it, version,
// initialization) so Cluster API treats the satellite's Machines as it treats the main
// Cluster's. The operator makes, keeps and deletes it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=satcp,categories=cluster-api
// +kubebuilder:metadata:annotations="helm.sh/resource-policy=keep"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.spec.locationName`
// +kubebuilder:printcolumn:name="Initialized",type=boolean,JSONPath=`.status.initialization.controlPlaneInitialized`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SatelliteControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SatelliteControlPlaneSpec   `json:"spec"`
	Status SatelliteControlPlaneStatus `json:"status,omitzero"`
}

// SatelliteControlPlaneList is a list of SatelliteControlPlanes.
//
// +kubebuilder:object:root=true
type SatelliteControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SatelliteControlPlane `json:"items"`
}
