package nodelink_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodelink"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// The controller runs against one real API server that is both the management cluster
// and every tenant cluster (their <cluster>-kubeconfig is the API server's own): the
// Nodes are that API server's.

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		return e.RunOperator(nil, func(mgr ctrl.Manager) error {
			r := &nodelink.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
			return r.Register(mgr)
		})
	})
}

var seq atomic.Int32

// tenantWithSatellite makes a tenant namespace whose Cluster has a satellite on a
// Proxmox location (controlled by it, as the operator makes it, unless foreign) and a
// pool's MachineDeployment under it, and returns the namespace and the satellite.
func tenantWithSatellite(t *testing.T, foreign bool) (string, string) {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("nl-%d", seq.Add(1))
	if err := testenv.CreateTenant(ctx, env.Client, ns, testenv.TenantOptions{Kubeconfig: env.KubeConfig()}); err != nil {
		t.Fatal(err)
	}
	sat := addSatellite(t, ns, "pve-lab", foreign)
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-lab", Labels: map[string]string{
		names.LabelTenantCluster: testenv.TenantCluster, names.LabelManagedBy: names.ManagedByValue, names.LabelClusterName: sat,
	}}, Spec: clusterv1.MachineDeploymentSpec{
		ClusterName: sat,
		Selector:    metav1.LabelSelector{MatchLabels: map[string]string{names.LabelPool: "lab"}},
		Template: clusterv1.MachineTemplateSpec{
			ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{names.LabelPool: "lab"}},
			Spec:       machineSpec(sat, ""),
		},
	}}
	env.MustCreate(t, md)
	return ns, sat
}

// addSatellite makes the tenant Cluster of ns a satellite for location, with the
// satellite labels, controlled by the tenant's Cluster unless foreign.
func addSatellite(t *testing.T, ns, location string, foreign bool) string {
	t.Helper()
	tenant := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster}, tenant); err != nil {
		t.Fatal(err)
	}
	sat := names.SatelliteName(testenv.TenantCluster, location)
	satellite := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sat, Labels: map[string]string{
		names.LabelTenantCluster: testenv.TenantCluster, names.LabelManagedBy: names.ManagedByValue, names.LabelClusterName: sat,
	}}, Spec: clusterv1.ClusterSpec{
		ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.nodegroup.io", Kind: "SatelliteControlPlane", Name: sat},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "ProxmoxCluster", Name: sat},
	}}
	if !foreign {
		satellite.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(tenant, clusterv1.GroupVersion.WithKind("Cluster"))}
	}
	env.MustCreate(t, satellite)
	return sat
}

func machineSpec(cluster, providerID string) clusterv1.MachineSpec {
	return clusterv1.MachineSpec{
		ClusterName: cluster, Version: "v1.35.4", ProviderID: providerID,
		Bootstrap:         clusterv1.Bootstrap{DataSecretName: new("boot")},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "ProxmoxMachine", Name: "vm"},
	}
}

// provisionedMachine is a Machine of the pool whose VM capmox has made with uuid, as
// Cluster API shows it once the VM is up: providerID copied, phase Provisioned.
func provisionedMachine(t *testing.T, ns, sat, name, uuid string) {
	t.Helper()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
		names.LabelClusterName: sat, names.LabelPool: "lab", clusterv1.MachineDeploymentNameLabel: "tenant-lab",
	}}, Spec: machineSpec(sat, nodelink.ProviderIDPrefix+uuid)}
	env.MustCreate(t, m)
	m.Status.Phase = string(clusterv1.MachinePhaseProvisioned)
	if err := env.Client.Status().Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// nodeRef records on a Machine the Node Cluster API linked it to.
func nodeRef(t *testing.T, ns, machine, nodeName string) {
	t.Helper()
	m := &clusterv1.Machine{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: machine}, m); err != nil {
		t.Fatal(err)
	}
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: nodeName}
	m.Status.Phase = string(clusterv1.MachinePhaseRunning)
	if err := env.Client.Status().Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// node registers a tenant Node as a kubelet would: no providerID, its system UUID.
func node(t *testing.T, name, systemUUID, providerID string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	env.MustCreate(t, n)
	n.Status.NodeInfo.SystemUUID = systemUUID
	if err := env.Client.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func providerID(t *testing.T, name string) string {
	t.Helper()
	n := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n.Spec.ProviderID
}

// waitLinked waits until the Node carries the providerID of the VM with uuid.
func waitLinked(t *testing.T, what, nodeName, uuid string) {
	t.Helper()
	testenv.Eventually(t, what, func() bool { return providerID(t, nodeName) == nodelink.ProviderIDPrefix+uuid })
}

// events are the reasons and notes of the events on the tenant Cluster of ns.
func events(t *testing.T, ns string) string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return strings.Join(out, "\n")
}

// TestNodesLinkedByExactlyOneSystemUUID: a tenant Node without a providerID gets the
// providerID of the one machine of the tenant whose VM has its system UUID (compared
// without regard to case, as SMBIOS UUIDs are written either way); a Node whose UUID
// is that of two machines, or of none, is left alone with an event; so are two Nodes
// that both claim one machine's UUID, and a Node whose machine's providerID another
// Node already carries.
func TestNodesLinkedByExactlyOneSystemUUID(t *testing.T) {
	ns, sat := tenantWithSatellite(t, false)
	p := fmt.Sprintf("%08d", seq.Add(1))
	one, twice, none, taken, claimed := p+"-0000-4000-8000-000000000001", p+"-0000-4000-8000-000000000002",
		p+"-0000-4000-8000-000000000003", p+"-0000-4000-8000-000000000004", p+"-0000-4000-8000-000000000006"
	node(t, ns+"-one", strings.ToUpper(one), "")
	node(t, ns+"-twice", twice, "")
	node(t, ns+"-none", none, "")
	node(t, ns+"-holder", "", nodelink.ProviderIDPrefix+taken) // a kubelet told its providerID
	node(t, ns+"-taken", taken, "")
	node(t, ns+"-claim-a", claimed, "")
	node(t, ns+"-claim-b", claimed, "")
	provisionedMachine(t, ns, sat, "lab-a", one)
	provisionedMachine(t, ns, sat, "lab-b", twice)
	provisionedMachine(t, ns, sat, "lab-c", twice)
	provisionedMachine(t, ns, sat, "lab-d", taken)
	provisionedMachine(t, ns, sat, "lab-e", claimed)

	waitLinked(t, "the Node with one machine's UUID linked", ns+"-one", one)
	var e string
	defer func() {
		if t.Failed() {
			t.Logf("events:\n%s", e)
		}
	}()
	testenv.Eventually(t, "events on the tenant Cluster", func() bool {
		e = events(t, ns)
		return strings.Contains(e, nodelink.EventNodeLinked+": Node "+ns+"-one linked to machine lab-a") &&
			strings.Contains(e, nodelink.EventNodeConflict+": Node "+ns+"-twice has no providerID and its system UUID \""+twice+"\" is that of 2 machines") &&
			strings.Contains(e, nodelink.EventNodeConflict+": Node "+ns+"-taken has no providerID and its system UUID \""+taken+"\" is that of machine lab-d, whose providerID another Node already carries") &&
			strings.Contains(e, nodelink.EventNodeConflict+": Node "+ns+"-claim-a has no providerID and its system UUID \""+claimed+"\" is also that of Node "+ns+"-claim-b") &&
			strings.Contains(e, nodelink.EventNodeConflict+": Node "+ns+"-claim-b has no providerID and its system UUID \""+claimed+"\" is also that of Node "+ns+"-claim-a")
	})
	time.Sleep(2 * time.Second)
	for _, n := range []string{"-twice", "-none", "-taken", "-claim-a", "-claim-b"} {
		if got := providerID(t, ns+n); got != "" {
			t.Errorf("Node %s got providerID %q", ns+n, got)
		}
	}
}

// TestMachinesMadeLaterAreLinked: once a tenant has a linked machine, a machine made
// later, whose Node registers only after the VM is up (after the machine is
// Provisioned, as a real boot takes), is linked as well: the controller keeps
// looking while any machine waits for its Node.
func TestMachinesMadeLaterAreLinked(t *testing.T) {
	ns, sat := tenantWithSatellite(t, false)
	p := fmt.Sprintf("%08d", seq.Add(1))
	first, later := p+"-0000-4000-8000-000000000007", p+"-0000-4000-8000-000000000008"
	node(t, ns+"-first", first, "")
	provisionedMachine(t, ns, sat, "lab-first", first)
	waitLinked(t, "the first Node linked", ns+"-first", first)
	nodeRef(t, ns, "lab-first", ns+"-first") // Cluster API links it

	provisionedMachine(t, ns, sat, "lab-later", later)
	time.Sleep(2 * time.Second) // the VM boots: the controller has looked and found no Node
	node(t, ns+"-later", later, "")
	waitLinked(t, "the later Node linked", ns+"-later", later)
}

// TestNeverLinksAnotherTenantsMachines: a Cluster that carries the satellite labels but
// is not controlled by the tenant's Cluster (a tenant can label its own Clusters) does
// not make its Machines the tenant's: a Node with their UUID is left alone.
func TestNeverLinksAnotherTenantsMachines(t *testing.T) {
	ns, sat := tenantWithSatellite(t, true)
	p := fmt.Sprintf("%08d", seq.Add(1))
	uuid, own := p+"-0000-4000-8000-000000000005", p+"-0000-4000-8000-000000000009"
	node(t, ns+"-foreign", uuid, "")
	provisionedMachine(t, ns, sat, "lab-f", uuid)
	// The tenant's own satellite beside it: its machine's Node is linked, so the
	// controller did look at this tenant.
	node(t, ns+"-own", own, "")
	provisionedMachine(t, ns, addSatellite(t, ns, "pve-wan", false), "wan-own", own)
	waitLinked(t, "the Node of the tenant's own satellite linked", ns+"-own", own)
	time.Sleep(2 * time.Second)
	if got := providerID(t, ns+"-foreign"); got != "" {
		t.Errorf("a Node was linked to a machine of a Cluster the tenant's Cluster does not control: %q", got)
	}
}

// TestPausedTenantLinkedOnceResumed: a paused tenant Cluster gets no write in its
// cluster; once it resumes, the Node that waited is linked without another machine
// event.
func TestPausedTenantLinkedOnceResumed(t *testing.T) {
	ns, sat := tenantWithSatellite(t, false)
	ctx := context.Background()
	tenant := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster}, tenant); err != nil {
		t.Fatal(err)
	}
	tenant.Spec.Paused = new(true)
	if err := env.Client.Update(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	uuid := fmt.Sprintf("%08d-0000-4000-8000-00000000000a", seq.Add(1))
	node(t, ns+"-paused", uuid, "")
	provisionedMachine(t, ns, sat, "lab-p", uuid)
	time.Sleep(2 * time.Second)
	if got := providerID(t, ns+"-paused"); got != "" {
		t.Fatalf("a Node of a paused tenant got providerID %q", got)
	}
	tenant.Spec.Paused = new(false)
	if err := env.Client.Update(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	waitLinked(t, "the Node linked once the tenant resumes", ns+"-paused", uuid)
}
