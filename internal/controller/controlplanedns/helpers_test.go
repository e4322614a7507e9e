package controlplanedns_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// cluster is the name of every test's Cluster and KamajiControlPlane.
const cluster = "tenant"

var tenantSeq int

// tenant creates a namespace with a Cluster whose first service CIDR is cidr and its
// KamajiControlPlane (a few fields set the way a platform would; mutate adds more),
// and no pool.
func tenant(t *testing.T, cidr string, mutate func(kcp *unstructured.Unstructured)) string {
	t.Helper()
	tenantSeq++
	ns := fmt.Sprintf("dns-%d", tenantSeq)
	env.MustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	kcp.SetNamespace(ns)
	kcp.SetName(cluster)
	kcp.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": cluster})
	set(t, kcp, "v1.35.4", "spec", "version")
	set(t, kcp, int64(3), "spec", "replicas")
	set(t, kcp, "default", "spec", "dataStoreName")
	set(t, kcp, "ClusterIP", "spec", "network", "serviceType")
	set(t, kcp, []any{"tenant.example.org"}, "spec", "network", "certSANs")
	set(t, kcp, []any{"NodeRestriction"}, "spec", "admissionControllers")
	if mutate != nil {
		mutate(kcp)
	}
	env.MustCreate(t, kcp)

	env.MustCreate(t, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}, Spec: clusterv1.ClusterSpec{
		ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "tenant." + ns + ".svc", Port: 6443},
		ClusterNetwork: clusterv1.ClusterNetwork{
			Services: clusterv1.NetworkRanges{CIDRBlocks: []string{cidr}},
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
		},
		ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: kamaji.ControlPlaneGVK.Group, Kind: kamaji.ControlPlaneGVK.Kind, Name: cluster,
		},
	}})
	return ns
}

func set(t *testing.T, u *unstructured.Unstructured, value any, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		t.Fatal(err)
	}
}

func pool(ns, name string) *v1.NodeGroup {
	return &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
		ClusterName: cluster, MinReplicas: 1, MaxReplicas: 3,
		Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
	}}
}

// controlPlane reads the KamajiControlPlane live.
func controlPlane(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster}, kcp); err != nil {
		t.Fatal(err)
	}
	return kcp
}

func getCluster(t *testing.T, ns string) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// dnsIPs is spec.network.dnsServiceIPs; nil when unset.
func dnsIPs(kcp *unstructured.Unstructured) []string {
	ips, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "network", "dnsServiceIPs")
	return ips
}

// waitDNS waits until spec.network.dnsServiceIPs is want and returns the object.
func waitDNS(t *testing.T, ns string, want ...string) *unstructured.Unstructured {
	t.Helper()
	var kcp *unstructured.Unstructured
	testenv.Eventually(t, fmt.Sprintf("spec.network.dnsServiceIPs = %v", want), func() bool {
		kcp = controlPlane(t, ns)
		return slices.Equal(dnsIPs(kcp), want)
	})
	return kcp
}

// platformApply is another field manager ("platform") applying dnsServiceIPs (nil:
// nothing, which releases what it owned).
func platformApply(t *testing.T, ns string, ips []string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	u.SetNamespace(ns)
	u.SetName(cluster)
	if ips != nil {
		if err := unstructured.SetNestedStringSlice(u.Object, ips, "spec", "network", "dnsServiceIPs"); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("platform")); err != nil {
		t.Fatal(err)
	}
}

// managedBy returns the managedFields entry of a manager, nil when it owns nothing.
func managedBy(kcp *unstructured.Unstructured, manager string) *metav1.ManagedFieldsEntry {
	for _, e := range kcp.GetManagedFields() {
		if e.Manager == manager {
			return &e
		}
	}
	return nil
}

// clusterEvents are the events on the test Cluster of a namespace.
func clusterEvents(t *testing.T, ns string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Cluster" && e.InvolvedObject.Name == cluster {
			out = append(out, e)
		}
	}
	return out
}

func waitEvent(t *testing.T, ns, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	testenv.Eventually(t, "an event "+reason+" on the Cluster", func() bool {
		for _, e := range clusterEvents(t, ns) {
			if e.Reason == reason {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

func reasons(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason)
	}
	return out
}

// waitQuiet waits until the controller has finished no reconcile for a second, so what
// the events of a test's writes queued has been handled.
func waitQuiet(t *testing.T) {
	t.Helper()
	testenv.WaitQuiet(t, "the controller's reconciles", reconciles)
}

// waitReconciled waits until the controller finished a reconcile after `after`, then
// until it is quiet.
func waitReconciled(t *testing.T, after float64) {
	t.Helper()
	testenv.Eventually(t, "a reconcile", func() bool { return reconciles() > after })
	waitQuiet(t)
}

// diff lists the paths where two decoded JSON values differ.
func diff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		var out []string
		for k := range keys {
			out = append(out, diff(path+"."+k, am[k], bm[k])...)
		}
		sort.Strings(out)
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{fmt.Sprintf("%s: %v -> %v", path, a, b)}
}
