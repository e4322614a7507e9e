// Package nodelink links the tenant Nodes of machines on Proxmox locations to their
// Machines. capmox gives each VM the providerID proxmox://<SMBIOS UUID> and writes it
// into the VM's NoCloud metadata, but Talos does not pass it on to the kubelet
// (siderolabs/talos#14342): the Node registers without one, and Cluster API, which
// finds a Machine's Node by providerID, would never link them (nor could the
// autoscaler, which maps Nodes to node groups the same way). The kubelet reports the
// VM's SMBIOS UUID as the Node's system UUID, so the operator sets spec.providerID on a
// tenant Node that has none when its system UUID is that of exactly one of the tenant's
// Machines on Proxmox, and never otherwise.
package nodelink

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

const (
	// ProviderIDPrefix is capmox's providerID scheme: proxmox://<SMBIOS UUID>.
	ProviderIDPrefix = "proxmox://"
	// recheck is how soon a tenant with machines that have no Node yet is looked at
	// again: the operator watches no tenant Nodes (a Node cache per tenant would cost
	// what thousands of tenants cannot afford), so it asks while, and only while,
	// something waits for its Node.
	recheck = 15 * time.Second
	// maxReported bounds the memory of Nodes already reported as not linkable.
	maxReported = 10_000
)

// Events on the tenant's Cluster.
const (
	EventNodeLinked   = "NodeLinked"
	EventNodeNoMatch  = "NodeNotLinked"
	EventNodeConflict = "NodeLinkConflict"
)

// Reconciler links the Nodes of one tenant Cluster's Proxmox machines at a time.
type Reconciler struct {
	Client client.Client
	// APIReader reads the tenant's Machines: the cache keeps nothing of their spec.
	APIReader client.Reader
	Conns     *tenant.Connections
	Recorder  events.EventRecorder

	mu sync.Mutex
	// reported are the Nodes already reported as not linkable, so a tenant waiting for
	// a machine is not sent the same event every recheck.
	reported map[string]struct{}
}

// Name of the controller.
func (r *Reconciler) Name() string { return "nodelink" }

// machine is one of the tenant's Machines on a Proxmox location with its VM's UUID.
type machine struct {
	name       string
	providerID string
	uuid       string
	linked     bool
}

// Reconcile links the Nodes of the tenant Cluster req's machines on Proxmox locations.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			r.Conns.Close(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if paused.Cluster(cluster) || !cluster.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	machines, err := r.proxmoxMachines(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	waiting := 0
	for _, m := range machines {
		if !m.linked {
			waiting++
		}
	}
	if waiting == 0 {
		r.Conns.Close(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	conn, err := r.Conns.Get(ctx, req.NamespacedName, cluster.UID)
	if err != nil {
		return ctrl.Result{}, err
	}
	linked, err := r.link(ctx, cluster, conn, machines)
	if err != nil {
		return ctrl.Result{}, err
	}
	if linked < waiting {
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	return ctrl.Result{}, nil
}

// proxmoxMachines are the Machines of the tenant's satellites (the Clusters the
// operator made for it, controlled by it) whose VM capmox has made: their providerID
// names it. A machine is linked once Cluster API has found its Node.
func (r *Reconciler) proxmoxMachines(ctx context.Context, cluster *clusterv1.Cluster) ([]machine, error) {
	satellites := &clusterv1.ClusterList{}
	if err := r.Client.List(ctx, satellites, client.InNamespace(cluster.Namespace), client.MatchingLabels{
		names.LabelTenantCluster: names.LabelValue(cluster.Name), names.LabelManagedBy: names.ManagedByValue,
	}); err != nil {
		return nil, err
	}
	var out []machine
	for i := range satellites.Items {
		sat := &satellites.Items[i]
		if ref := metav1.GetControllerOf(sat); ref == nil || ref.UID != cluster.UID {
			continue // not this tenant Cluster's satellite: never link its machines
		}
		list := &clusterv1.MachineList{}
		if err := r.APIReader.List(ctx, list, client.InNamespace(cluster.Namespace),
			client.MatchingLabels{names.LabelClusterName: sat.Name}); err != nil {
			return nil, err
		}
		for _, m := range list.Items {
			if m.Spec.ClusterName != sat.Name {
				continue
			}
			uuid, ok := strings.CutPrefix(m.Spec.ProviderID, ProviderIDPrefix)
			if !ok || uuid == "" {
				continue
			}
			out = append(out, machine{name: m.Name, providerID: m.Spec.ProviderID, uuid: strings.ToLower(uuid), linked: m.Status.NodeRef.IsDefined()})
		}
	}
	return out, nil
}

// link sets the providerID of each tenant Node that has none and whose system UUID is
// that of exactly one of machines (and of no other such Node), and returns how many of
// the machines Cluster API has not linked yet now have a Node carrying their
// providerID: Reconcile keeps looking until all have.
func (r *Reconciler) link(ctx context.Context, cluster *clusterv1.Cluster, conn *tenant.Conn, machines []machine) (int, error) {
	byUUID := map[string][]machine{}
	for _, m := range machines {
		byUUID[m.uuid] = append(byUUID[m.uuid], m)
	}
	listCtx, cancel := context.WithTimeout(ctx, tenant.RequestTimeout)
	defer cancel()
	nodes, err := conn.Client.Nodes().List(listCtx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing the tenant cluster's Nodes: %w", err)
	}
	found := map[string]bool{}        // providerIDs the tenant's Nodes carry
	unlinked := map[string][]string{} // system UUID -> the Nodes without a providerID that report it
	for i := range nodes.Items {
		if id := nodes.Items[i].Spec.ProviderID; id != "" {
			found[id] = true
		} else if uuid := strings.ToLower(nodes.Items[i].Status.NodeInfo.SystemUUID); uuid != "" {
			unlinked[uuid] = append(unlinked[uuid], nodes.Items[i].Name)
		}
	}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if node.Spec.ProviderID != "" {
			continue
		}
		uuid := strings.ToLower(node.Status.NodeInfo.SystemUUID)
		matches := byUUID[uuid]
		switch {
		case uuid == "" || len(matches) == 0:
			r.reportOnce(cluster, node, EventNodeNoMatch,
				"Node %s has no providerID and its system UUID %q is that of none of the cluster's machines on Proxmox locations: left alone", node.Name, uuid)
		case len(matches) > 1:
			r.reportOnce(cluster, node, EventNodeConflict,
				"Node %s has no providerID and its system UUID %q is that of %d machines (%s, %s): left alone", node.Name, uuid, len(matches), matches[0].name, matches[1].name)
		case len(unlinked[uuid]) > 1:
			// Two Nodes claim one VM: at most one of them runs on it, and the UUID does
			// not say which.
			r.reportOnce(cluster, node, EventNodeConflict,
				"Node %s has no providerID and its system UUID %q is also that of Node %s: left alone", node.Name, uuid, otherThan(unlinked[uuid], node.Name))
		case found[matches[0].providerID]:
			r.reportOnce(cluster, node, EventNodeConflict,
				"Node %s has no providerID and its system UUID %q is that of machine %s, whose providerID another Node already carries: left alone", node.Name, uuid, matches[0].name)
		default:
			if err := setProviderID(ctx, conn, node, matches[0].providerID); err != nil {
				return 0, err
			}
			found[matches[0].providerID] = true
			r.Recorder.Eventf(cluster, tenantNode(node), corev1.EventTypeNormal, EventNodeLinked, EventNodeLinked,
				"Node %s linked to machine %s: providerID %s", node.Name, matches[0].name, matches[0].providerID)
		}
	}
	linked := 0
	for _, m := range machines {
		if !m.linked && found[m.providerID] {
			linked++
		}
	}
	return linked, nil
}

// otherThan is the first of nodes that is not name.
func otherThan(nodes []string, name string) string {
	for _, n := range nodes {
		if n != name {
			return n
		}
	}
	return ""
}

// setProviderID sets a Node's providerID, only on the version of the Node that was
// read (the API server lets an empty providerID be set once, and never changed).
func setProviderID(ctx context.Context, conn *tenant.Conn, node *corev1.Node, providerID string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"providerID": providerID},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, tenant.RequestTimeout)
	defer cancel()
	if _, err := conn.Client.Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "nodegroup-operator"}); err != nil {
		return fmt.Errorf("setting the providerID of Node %s: %w", node.Name, err)
	}
	return nil
}

// reportOnce records a warning about a Node once per Node and reason.
func (r *Reconciler) reportOnce(cluster *clusterv1.Cluster, node *corev1.Node, reason, format string, args ...any) {
	key := string(cluster.UID) + "/" + node.Name + "/" + string(node.UID) + "/" + reason
	r.mu.Lock()
	_, seen := r.reported[key]
	if !seen {
		if r.reported == nil || len(r.reported) >= maxReported {
			r.reported = map[string]struct{}{}
		}
		r.reported[key] = struct{}{}
	}
	r.mu.Unlock()
	if !seen {
		r.Recorder.Eventf(cluster, tenantNode(node), corev1.EventTypeWarning, reason, reason, format, args...)
	}
}

// tenantNode is the related object of an event about a tenant Node: the Node is in the
// tenant cluster, not where the event is, but the recorder folds events of one reason
// about one object into a series that keeps the first note, so without it the second
// Node's event would be counted as the first's.
func tenantNode(node *corev1.Node) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
}
