// Package controlplanedns publishes a tenant cluster's DNS address on its Kamaji control
// plane, so that kubeadm-joined workers get cluster DNS.
//
// Kamaji writes clusterDNS into the tenant's kubelet-config ConfigMap from the
// KamajiControlPlane's spec.network.dnsServiceIPs. For every Cluster API Cluster whose
// control plane is a KamajiControlPlane and that at least one NodeGroup names, the
// controller sets that one field to the tenant CoreDNS address (resolve.TenantDNSAddress
// of the Cluster's first service CIDR) by server-side apply with its own field manager,
// FieldManager, and sends nothing else: no other field of the control plane is claimed,
// so the control plane is never rolled by us and no other writer is fought.
//
//   - The field is never taken from another writer. The apply does not force ownership,
//     and a field another manager owns with another value is reported as a conflict
//     without a write (the managed fields say so before the API server would). It is
//     looked at again when the Cluster, the KamajiControlPlane or the Cluster's pools
//     change, never on a timer.
//   - A field that already holds the address, whoever wrote it, is not written: the live
//     object is compared first, so a resync sends nothing.
//   - A service CIDR that cannot hold the address (or no service CIDR) is reported, not
//     retried. IPv6 ranges are published like IPv4 ones (fd00:10:96::/108 gives
//     fd00:10:96::a, the kubeadm convention).
//   - In the Kamaji provider (v0.20.0, controllers/kamajicontrolplane_controller_tcp.go) a
//     present spec.addons.coreDNS replaces spec.network.dnsServiceIPs with its own
//     dnsServiceIPs, even an empty one. The controller reports an addon that does not
//     carry the address, and never edits the addon.
//   - When the last pool of a cluster goes, the field is left as it is: it is still the
//     right address, and removing it would change the control plane for nothing.
//
// Where it reports. The KamajiControlPlane is not ours to put conditions on, and a
// condition written on each NodeGroup would make a second writer of the pools' status,
// fighting the nodegroup controller's status updates. So the controller reports with
// events on the Cluster (ReasonPublished, ReasonConflict, ReasonOverridden,
// ReasonNotPublished), sent when it writes or when the outcome changes, and Status
// computes the same outcome from the live objects for any caller: the nodegroup
// controller, the single writer of the pools' status, can set ConditionControlPlaneDNS
// from it.
package controlplanedns
