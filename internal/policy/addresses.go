package policy

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// LocationTaken reports whether the machines of another tenant cluster already take
// their addresses from a satellite location (Proxmox), so the tenant Cluster
// namespace/cluster may not start machines there.
//
// capmox makes an in-cluster IP pool per ProxmoxCluster from its ipv4Config and
// ipv6Config, and every satellite on a location gets the location's whole range: two
// tenant clusters' satellites on one location would hand their machines the same
// addresses. So a location serves the first tenant cluster whose satellite is made
// there, until that satellite is gone (a satellite being deleted still holds addresses
// while its machines drain). A cluster that has its satellite there is never refused,
// so nothing that runs is cut off; two satellites made before this rule keep running.
func LocationTaken(ctx context.Context, r client.Reader, location, namespace, cluster string) (bool, error) {
	list := &clusterv1.ClusterList{}
	if err := r.List(ctx, list, client.MatchingLabels{
		names.LabelManagedBy: names.ManagedByValue, names.LabelLocation: names.LabelValue(location),
	}); err != nil {
		return false, err
	}
	own := names.SatelliteName(cluster, location)
	taken := false
	for i := range list.Items {
		sat := &list.Items[i]
		if sat.Namespace == namespace && sat.Name == own {
			return false, nil
		}
		// The label may be a shortened location name: a satellite whose tenant Cluster
		// is known, and whose name (made of that Cluster's and the location's) is not
		// this location's, is on another one. One without an owner (orphaned, say)
		// still holds its addresses, so it counts.
		if owner := metav1.GetControllerOf(sat); owner != nil && owner.Kind == "Cluster" && sat.Name != names.SatelliteName(owner.Name, location) {
			continue
		}
		taken = true
	}
	return taken, nil
}
