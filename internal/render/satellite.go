package render

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
)

// The satellite of a tenant cluster on a location is a Cluster API Cluster of its own
// (LOCATIONS.md): its InfraCluster is the location's (ProxmoxCluster), its control plane
// a SatelliteControlPlane that mirrors the tenant's KamajiControlPlane, so that the
// location's infrastructure provider finds its endpoint and credentials through the one
// infrastructureRef a Cluster has, and Cluster API treats the Machines as it treats the
// main Cluster's.

// SatelliteLabels are the labels of every object of a satellite: Cluster API's cluster
// name (the satellite's), the tenant's Cluster and the location, and the operator's.
func SatelliteLabels(in *SatelliteInput) map[string]string {
	return map[string]string{
		names.LabelClusterName:   names.SatelliteName(in.Cluster.Name, in.LocationName),
		names.LabelTenantCluster: names.LabelValue(in.Cluster.Name),
		names.LabelLocation:      names.LabelValue(in.LocationName),
		names.LabelManagedBy:     names.ManagedByValue,
	}
}

// SatelliteControlPlane renders the satellite's control plane: the tenant's API server
// as the location's workers reach it and the tenant control plane's desired version.
// Its status (initialized, current version) is the controller's to mirror.
func SatelliteControlPlane(in *SatelliteInput) (*cpv1.SatelliteControlPlane, error) {
	endpoint, err := satelliteEndpoint(in)
	if err != nil {
		return nil, err
	}
	return &cpv1.SatelliteControlPlane{
		TypeMeta: metav1.TypeMeta{APIVersion: cpv1.GroupVersion.String(), Kind: "SatelliteControlPlane"},
		ObjectMeta: metav1.ObjectMeta{
			Name: names.SatelliteName(in.Cluster.Name, in.LocationName), Namespace: in.Namespace,
			Labels: SatelliteLabels(in),
		},
		Spec: cpv1.SatelliteControlPlaneSpec{
			ClusterName: in.Cluster.Name, LocationName: in.LocationName,
			ControlPlaneEndpoint: cpv1.APIEndpoint{Host: endpoint.Host, Port: endpoint.Port},
			Version:              in.ControlPlaneVersion,
		},
	}, nil
}

// SatelliteCluster renders the satellite's Cluster: the tenant's cluster network, the
// location's InfraCluster and the satellite's control plane. Its endpoint is the
// control plane's, which Cluster API copies.
func SatelliteCluster(in *SatelliteInput) (*clusterv1.Cluster, error) {
	if in.Location.Provider.Proxmox == nil {
		return nil, fmt.Errorf("location %q: only Proxmox locations have satellites", in.LocationName)
	}
	if _, err := satelliteEndpoint(in); err != nil {
		return nil, err
	}
	name := names.SatelliteName(in.Cluster.Name, in.LocationName)
	return &clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Namespace, Labels: SatelliteLabels(in)},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Services:      clusterv1.NetworkRanges{CIDRBlocks: in.Cluster.ServiceCIDRs},
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: in.Cluster.PodCIDRs},
				ServiceDomain: in.Cluster.DNSDomain,
			},
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: cpv1.GroupVersion.Group, Kind: "SatelliteControlPlane", Name: name,
			},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: capmox.GroupVersion.Group, Kind: "ProxmoxCluster", Name: name,
			},
		},
	}, nil
}

// satelliteEndpoint is where the location's workers reach the tenant's API server.
func satelliteEndpoint(in *SatelliteInput) (capmox.APIEndpoint, error) {
	switch {
	case in.Location.Provider.Proxmox == nil:
		return capmox.APIEndpoint{}, fmt.Errorf("location %q: only Proxmox locations have satellites", in.LocationName)
	case in.Namespace == "" || in.Cluster.Name == "" || in.LocationName == "":
		return capmox.APIEndpoint{}, fmt.Errorf("a satellite needs a namespace, a cluster and a location")
	}
	return proxmoxAPIServer(in)
}
