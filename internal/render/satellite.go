package render

import (
	"fmt"

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
)

// The satellite of a tenant cluster on a location is to be a Cluster API Cluster of its
// own (LOCATIONS.md) whose InfraCluster is the location's (ProxmoxCluster). Only that
// InfraCluster is rendered so far; nothing creates a satellite yet.

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
