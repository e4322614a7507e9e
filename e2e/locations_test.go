//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodelink"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/rulecases"
)

// proxmoxLocation is a Proxmox Location on a simulated site, admitting only the
// namespace admitted, with its credentials Secret in the platform's namespace. Workers
// there reach the tenant's API server at its own endpoint.
func proxmoxLocation(t *testing.T, name string, site simulator.ProxmoxSite, admitted string) *v1.Location {
	t.Helper()
	const platform = "e2e-pve-platform"
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platform}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: name}, StringData: map[string]string{
		"url": site.URL, "token": site.Token, "secret": site.Secret,
	}})
	loc := rulecases.ProxmoxLocation(name, func(p *v1.ProxmoxProvider) {
		p.CredentialsRef = v1.SecretReference{Namespace: platform, Name: name}
		p.TenantAPIServer = nil
	})
	loc.Spec.Zone = name
	loc.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: admitted}}
	create(t, loc)
	return loc
}

// TestPoolsOnTwoProxmoxLocations: one tenant with a KubeVirt pool and a pool on each of
// two Proxmox locations with their own credentials. Every pool's machines run with
// Ready Nodes linked to them (the Proxmox ones registered without a providerID, linked
// by the operator by system UUID); each Proxmox pool's MachineDeployment runs under the
// tenant's satellite for its location, whose ProxmoxCluster logs in to that location's
// site only. A tenant of a namespace the locations do not admit is refused and gets no
// credentials. Deleting the last pool of a location removes its satellite, control
// plane, InfraCluster, kubeconfig and credentials copy, and nothing of the other.
func TestPoolsOnTwoProxmoxLocations(t *testing.T) {
	timed(t)
	ctx := context.Background()
	ns, other := "e2e-pve", "e2e-pve-other"
	newTenant(t, ns)
	newTenant(t, other)
	lab := proxmoxLocation(t, "e2e-pve-lab", framework.ProxmoxSites[0], ns)
	wan := proxmoxLocation(t, "e2e-pve-wan", framework.ProxmoxSites[1], ns)

	on := func(name string, loc *v1.Location) *v1.NodeGroup {
		ng := newPool(ns, name, 1, 1)
		if loc != nil {
			// A Proxmox boot volume is sized by it (a Go client sends the zero quantity,
			// which the API's default does not replace).
			ng.Spec.LocationName, ng.Spec.EphemeralStorage = loc.Name, resource.MustParse("20Gi")
		}
		return ng
	}
	pools := []*v1.NodeGroup{on("kv", nil), on("lab", lab), on("wan", wan)}
	start := time.Now()
	for _, ng := range pools {
		create(t, ng)
	}
	for _, ng := range pools {
		var nodes []corev1.Node
		eventually(t, long, "pool "+ng.Name+" running with a linked Node", func(ctx context.Context) (err error) {
			if _, nodes, err = poolRunning(ctx, ng, 1); err != nil {
				if c, _ := poolCondition(ctx, ng, v1.ConditionReady); c != nil {
					err = fmt.Errorf("%w (Ready %s %s: %s)", err, c.Status, c.Reason, c.Message)
				}
			}
			return err
		})
		t.Logf("pool %s: Running with a Ready, linked Node %s after %s", ng.Name, nodes[0].Name, time.Since(start).Round(100*time.Millisecond))
	}

	for _, tc := range []struct {
		ng   *v1.NodeGroup
		loc  *v1.Location
		site simulator.ProxmoxSite
	}{{pools[1], lab, framework.ProxmoxSites[0]}, {pools[2], wan, framework.ProxmoxSites[1]}} {
		sat := names.SatelliteName(cluster, tc.loc.Name)
		md, err := machineDeployment(ctx, tc.ng)
		if err != nil {
			t.Fatal(err)
		}
		if md.Spec.ClusterName != sat {
			t.Errorf("pool %s runs under %q, want the satellite %s", tc.ng.Name, md.Spec.ClusterName, sat)
		}
		ms, err := machines(ctx, tc.ng)
		if err != nil || len(ms) != 1 {
			t.Fatalf("machines of %s: %d, %v", tc.ng.Name, len(ms), err)
		}
		vm := &unstructured.Unstructured{}
		vm.SetGroupVersionKind(simulator.ProxmoxMachineGVK)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ms[0].Spec.InfrastructureRef.Name}, vm); err != nil {
			t.Fatal(err)
		}
		if got := vm.GetAnnotations()[simulator.AnnotationProxmoxSite]; got != tc.site.URL {
			t.Errorf("pool %s's VM was made at %q, want its location's site %s", tc.ng.Name, got, tc.site.URL)
		}
		node := &corev1.Node{}
		if err := tenantClient(ns).Get(ctx, client.ObjectKey{Name: ms[0].Status.NodeRef.Name}, node); err != nil {
			t.Fatal(err)
		}
		if want := "proxmox://" + node.Status.NodeInfo.SystemUUID; node.Spec.ProviderID != want || ms[0].Spec.ProviderID != want {
			t.Errorf("node %s: providerID %q, machine %q, want %q from its system UUID", node.Name, node.Spec.ProviderID, ms[0].Spec.ProviderID, want)
		}
		if got := node.Labels[names.NodeLabelLocation]; got != tc.loc.Name {
			t.Errorf("node %s is labelled at location %q, want %s", node.Name, got, tc.loc.Name)
		}
		// The simulated capmox and kubelet leave the Node without a providerID, as Talos
		// on Proxmox does: the operator linked it.
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Reason == nodelink.EventNodeLinked && strings.Contains(e.Message, "Node "+node.Name+" linked to machine "+ms[0].Name)
		}) {
			t.Errorf("no %s event for node %s", nodelink.EventNodeLinked, node.Name)
		}
	}

	// Another namespace may not use the locations and never sees their credentials.
	refused := newPool(other, "lab", 1, 1)
	refused.Spec.LocationName, refused.Spec.EphemeralStorage = lab.Name, resource.MustParse("20Gi")
	if err := env.Client.Create(ctx, refused); err == nil || !strings.Contains(err.Error(), "spec.locationName") {
		t.Errorf("a pool of %s on %s: %v, want refused at admission", other, lab.Name, err)
	}
	if leaked := credentialCopies(t, other); len(leaked) > 0 {
		t.Errorf("namespace %s holds credentials copies %v", other, leaked)
	}

	// The last pool of the WAN location goes: its satellite goes with everything of it.
	satWAN, satLab := names.SatelliteName(cluster, wan.Name), names.SatelliteName(cluster, lab.Name)
	if err := env.Client.Delete(ctx, pools[2]); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, long, "the WAN satellite removed", func(ctx context.Context) error {
		var left []string
		for _, obj := range satelliteObjects(satWAN) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj); err == nil {
				left = append(left, fmt.Sprintf("%T %s", obj, obj.GetName()))
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("still there: %v", left)
		}
		return nil
	})
	t.Logf("last pool of a location deleted -> its satellite and everything of it gone: %s", time.Since(deleted).Round(100*time.Millisecond))
	for _, obj := range satelliteObjects(satLab) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj); err != nil {
			t.Errorf("the lab satellite's %T %s: %v", obj, obj.GetName(), err)
		}
	}
	if _, _, err := poolRunning(ctx, pools[1], 1); err != nil {
		t.Errorf("the lab pool after the WAN satellite went: %v", err)
	}
}

// satelliteObjects are the objects of a satellite, empty but for their names.
func satelliteObjects(sat string) []client.Object {
	pc := &unstructured.Unstructured{}
	pc.SetGroupVersionKind(simulator.ProxmoxClusterGVK)
	pc.SetName(sat)
	return []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: sat}},
		&cpv1.SatelliteControlPlane{ObjectMeta: metav1.ObjectMeta{Name: sat}},
		pc,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sat + "-kubeconfig"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sat + "-credentials"}},
	}
}

// credentialCopies are the Secrets of ns that hold a Proxmox site's token.
func credentialCopies(t *testing.T, ns string) []string {
	t.Helper()
	var list corev1.SecretList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		if slices.ContainsFunc(framework.ProxmoxSites, func(site simulator.ProxmoxSite) bool { return string(s.Data["token"]) == site.Token }) {
			out = append(out, s.Name)
		}
	}
	return out
}
