package controlplanedns

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// FieldManager is the field manager of the one field this controller writes. It is not
// the nodegroup controller's: that one forces ownership of what it applies, this one
// never does.
const FieldManager = "nodegroup-operator-dns"

// ConditionControlPlaneDNS is the condition type for a pool's view of Status, for the
// controller that writes the pools' status.
const ConditionControlPlaneDNS = "ControlPlaneDNS"

// Reasons of the events on the Cluster and of Status.
const (
	// ReasonPublished: Kamaji uses the tenant DNS address.
	ReasonPublished = "DNSPublished"
	// ReasonConflict: another manager owns spec.network.dnsServiceIPs with another value.
	ReasonConflict = "DNSConflict"
	// ReasonOverridden: spec.addons.coreDNS replaces spec.network.dnsServiceIPs in Kamaji
	// and does not carry the tenant DNS address.
	ReasonOverridden = "DNSOverridden"
	// ReasonNotPublished: the address is unknown (no or too small a service CIDR), the
	// control plane does not exist yet, or the field is not written yet.
	ReasonNotPublished = "DNSNotPublished"
	// ReasonNotManaged: the Cluster's control plane is not a KamajiControlPlane.
	ReasonNotManaged = "DNSNotManaged"
)

var (
	dnsField   = []string{"spec", "network", "dnsServiceIPs"}
	addonField = []string{"spec", "addons", "coreDNS"}
	// dnsFieldSet is dnsField in a managedFields entry.
	dnsFieldSet = []string{"f:spec", "f:network", "f:dnsServiceIPs"}
)

// Status says whether Kamaji uses the tenant DNS address for the Cluster, reading its
// control plane through reader. A Cluster whose control plane is not a
// KamajiControlPlane is ok (ReasonNotManaged): its DNS is not the operator's to publish.
func Status(ctx context.Context, reader client.Reader, cluster *clusterv1.Cluster) (ok bool, reason, message string) {
	if !kamaji.IsControlPlaneOf(cluster) {
		ref := cluster.Spec.ControlPlaneRef
		return true, ReasonNotManaged, fmt.Sprintf("the control plane of Cluster %s is %s %q, not a KamajiControlPlane: the operator does not publish its DNS address",
			cluster.Name, ref.Kind, ref.Name)
	}
	kcp, err := getControlPlane(ctx, reader, cluster)
	if err != nil {
		return false, ReasonNotPublished, fmt.Sprintf("reading KamajiControlPlane %s: %v", cluster.Spec.ControlPlaneRef.Name, err)
	}
	a := assess(cluster, kcp)
	if a.write && !a.addon {
		return false, ReasonNotPublished, fmt.Sprintf("spec.network.dnsServiceIPs of KamajiControlPlane %s is not [%s] yet",
			kcp.GetName(), a.addr)
	}
	return a.ok, a.reason, a.message
}

// assessment is what the controller makes of a Cluster and its control plane.
type assessment struct {
	// addr is the tenant DNS address; empty when it cannot be computed.
	addr string
	// write: spec.network.dnsServiceIPs does not hold addr and nobody else owns it.
	write bool
	// addon: spec.addons.coreDNS is present, so Kamaji takes the address from it.
	addon bool
	// ok, reason and message describe the outcome once write (if any) is done.
	ok              bool
	reason, message string
}

func notPublished(format string, args ...any) assessment {
	return assessment{reason: ReasonNotPublished, message: fmt.Sprintf(format, args...)}
}

// assess compares the control plane (nil: it does not exist) with the Cluster's tenant
// DNS address. It reads nothing: the same objects always give the same assessment.
func assess(c *clusterv1.Cluster, kcp *unstructured.Unstructured) assessment {
	cidrs := c.Spec.ClusterNetwork.Services.CIDRBlocks
	if len(cidrs) == 0 {
		return notPublished("Cluster %s has no spec.clusterNetwork.services.cidrBlocks: its DNS address is not known", c.Name)
	}
	addr, err := resolve.TenantDNSAddress(cidrs[0])
	if err != nil {
		return notPublished("Cluster %s: %v; the DNS address is not published", c.Name, err)
	}
	if kcp == nil {
		return notPublished("KamajiControlPlane %s of Cluster %s does not exist yet", c.Spec.ControlPlaneRef.Name, c.Name)
	}
	name := kcp.GetName()
	a := assessment{addr: addr, ok: true, reason: ReasonPublished,
		message: fmt.Sprintf("spec.network.dnsServiceIPs of KamajiControlPlane %s is [%s], the 10th address of service CIDR %s", name, addr, cidrs[0])}

	live, found, _ := unstructured.NestedStringSlice(kcp.Object, dnsField...)
	if !found || !sameAddresses(live, addr) {
		if owners := otherOwners(kcp); len(owners) > 0 {
			a.ok, a.reason = false, ReasonConflict
			a.message = fmt.Sprintf("spec.network.dnsServiceIPs of KamajiControlPlane %s is %s, set by %s; the tenant DNS address is %s "+
				"(service CIDR %s). The operator does not take the field over: correct or remove it there",
				name, show(live), strings.Join(owners, ", "), addr, cidrs[0])
		} else {
			a.write = true
		}
	}

	addon, hasAddon, _ := unstructured.NestedMap(kcp.Object, addonField...)
	if !hasAddon {
		return a
	}
	a.addon = true
	ips, _, _ := unstructured.NestedStringSlice(addon, "dnsServiceIPs")
	switch {
	case sameAddresses(ips, addr):
		a.ok, a.reason = true, ReasonPublished
		a.message = fmt.Sprintf("KamajiControlPlane %s: Kamaji uses spec.addons.coreDNS.dnsServiceIPs [%s], the tenant DNS address", name, addr)
	case len(ips) == 0:
		a.ok, a.reason = false, ReasonOverridden
		a.message = fmt.Sprintf("KamajiControlPlane %s sets spec.addons.coreDNS without dnsServiceIPs: the Kamaji provider then ignores "+
			"spec.network.dnsServiceIPs and Kamaji picks the address itself. Set spec.addons.coreDNS.dnsServiceIPs to [%s]; the operator does not edit the addon",
			name, addr)
	default:
		a.ok, a.reason = false, ReasonOverridden
		a.message = fmt.Sprintf("KamajiControlPlane %s: spec.addons.coreDNS.dnsServiceIPs %s overrides spec.network.dnsServiceIPs in Kamaji; "+
			"the tenant DNS address is %s (service CIDR %s). The operator does not edit the addon", name, show(ips), addr, cidrs[0])
	}
	return a
}

// sameAddresses: the list is exactly the one address, however it is spelled.
func sameAddresses(list []string, addr string) bool {
	if len(list) != 1 {
		return false
	}
	a, errA := netip.ParseAddr(list[0])
	b, errB := netip.ParseAddr(addr)
	if errA != nil || errB != nil {
		return list[0] == addr
	}
	return a == b
}

// otherOwners are the field managers other than ours that own spec.network.dnsServiceIPs.
// Server-side apply refuses to change a field another manager owns unless forced, so a
// value of theirs that differs from ours is a conflict before anything is sent.
func otherOwners(kcp *unstructured.Unstructured) []string {
	var owners []string
	for _, e := range kcp.GetManagedFields() {
		if e.Manager == FieldManager || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var set map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &set); err != nil {
			continue
		}
		if hasPath(set, dnsFieldSet) && !slices.Contains(owners, e.Manager) {
			owners = append(owners, e.Manager)
		}
	}
	slices.Sort(owners)
	return owners
}

func hasPath(set map[string]any, path []string) bool {
	for _, p := range path {
		next, ok := set[p].(map[string]any)
		if !ok {
			return false
		}
		set = next
	}
	return true
}

func show(list []string) string {
	if list == nil {
		return "unset"
	}
	return "[" + strings.Join(list, ", ") + "]"
}

// getControlPlane reads the Cluster's KamajiControlPlane; nil when it does not exist.
func getControlPlane(ctx context.Context, reader client.Reader, c *clusterv1.Cluster) (*unstructured.Unstructured, error) {
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	if err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}, kcp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return kcp, nil
}
