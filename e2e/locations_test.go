//go:build e2e

package e2e

import (
	"bytes"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
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

// TestAutoscalerScalesAProxmoxPoolFromZero: the tenant's managed autoscaler finds the
// MachineDeployment of a pool under the satellite (by the tenant label), sizes it from
// zero from its capacity annotations, which name the location, and scales it for a pod
// pinned to that location, reading the pool's ProxmoxMachineTemplate through the Role
// the operator grants; once the pod goes, the pool returns to zero.
func TestAutoscalerScalesAProxmoxPoolFromZero(t *testing.T) {
	timed(t)
	requireAutoscaler(t)
	ctx := context.Background()
	ns := "e2e-pve-scale"
	tenant := newOwnTenant(t, ns, "pve-scale")
	loc := proxmoxLocation(t, "e2e-pve-scale", framework.ProxmoxSites[0], ns)

	taint := v1.Taint{Key: "example.com/dedicated", Value: "burst", Effect: v1.TaintEffect(corev1.TaintEffectNoSchedule)}
	burst := newPool(ns, "burst", 0, 2)
	burst.Spec.LocationName, burst.Spec.EphemeralStorage = loc.Name, resource.MustParse("20Gi")
	burst.Spec.Labels = map[string]v1.LabelValue{"workload": "burst"}
	burst.Spec.Taints = []v1.Taint{taint}
	create(t, burst)
	eventually(t, short, "the autoscaler of "+ns, func(ctx context.Context) error { return autoscalerObjects(ctx, ns, true) })
	startAutoscaler(t, ns)

	pod := tenantPod(ns, "burst-1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		map[string]string{"workload": "burst", names.NodeLabelLocation: loc.Name}, taint)
	start := time.Now()
	if err := tenant.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(t, ns, pod.Name)
	t.Logf("pending pod pinned to a Proxmox location -> Running on a node of its pool scaled from zero: %s", time.Since(start).Round(100*time.Millisecond))
	waitRunning(t, "the pool at one machine", burst, 1)

	if err := tenant.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	eventually(t, long, "the pool back to zero", func(ctx context.Context) error {
		if err := replicas(ctx, burst, 0); err != nil {
			return fmt.Errorf("%w; nodes: %s", err, nodeStates(ctx, tenant.Client))
		}
		ms, err := machines(ctx, burst)
		if err == nil && len(ms) != 0 {
			err = fmt.Errorf("%d machines left; nodes: %s", len(ms), nodeStates(ctx, tenant.Client))
		}
		return err
	})
	t.Logf("pod gone -> the Proxmox pool scaled down to zero and its machine deleted: %s", time.Since(start).Round(100*time.Millisecond))
}

// nodeStates says what a tenant's Nodes look like: Ready, providerID, Cluster API's
// annotations.
func nodeStates(ctx context.Context, c client.Client) string {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return err.Error()
	}
	var out []string
	for _, n := range nodes.Items {
		ready := "no Ready condition"
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				ready = fmt.Sprintf("Ready=%s %s (heartbeat %s)", cond.Status, cond.Reason, cond.LastHeartbeatTime.Format(time.TimeOnly))
			}
		}
		out = append(out, fmt.Sprintf("%s: %s, providerID %q, annotations %v, taints %v", n.Name, ready, n.Spec.ProviderID, n.Annotations, n.Spec.Taints))
	}
	return strings.Join(out, "; ")
}

// TestSatelliteFollowsTheTenantControlPlane: a satellite's control plane mirrors the
// tenant's. While the tenant's control plane is upgrading (spec.version ahead of the
// version it reports), Cluster API's preflight checks hold the scale-up of a pool under
// the satellite, exactly as on the tenant's own Cluster; once the tenant reports the new
// version, the scale-up goes ahead. When Kamaji rotates the tenant's admin kubeconfig,
// the satellite's kubeconfig follows, and Cluster API still reaches the tenant through
// it.
func TestSatelliteFollowsTheTenantControlPlane(t *testing.T) {
	timed(t)
	ctx := context.Background()
	ns := "e2e-pve-cp"
	tenant := newOwnTenant(t, ns, "pve-cp")
	loc := proxmoxLocation(t, "e2e-pve-cp", framework.ProxmoxSites[0], ns)
	pool := newPool(ns, "pinned", 1, 3)
	pool.Spec.LocationName, pool.Spec.EphemeralStorage = loc.Name, resource.MustParse("20Gi")
	startPool(t, pool, 1)
	sat := names.SatelliteName(cluster, loc.Name)

	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(simulator.KamajiControlPlaneGVK)
	kcpKey := client.ObjectKey{Namespace: ns, Name: cluster}
	patchKCP := func(patch string) {
		t.Helper()
		kcp.SetName(cluster)
		kcp.SetNamespace(ns)
		if err := env.Client.Patch(ctx, kcp, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Get(ctx, kcpKey, kcp); err != nil {
		t.Fatal(err)
	}
	from, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	to := "v1.35.5"

	// The tenant upgrades; Kamaji has not finished.
	patchKCP(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}},"spec":{"version":%q}}`, simulator.AnnotationUpgradeInProgress, to))
	eventually(t, short, "the satellite's control plane upgrading like the tenant's", func(ctx context.Context) error {
		scp := &cpv1.SatelliteControlPlane{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sat}, scp); err != nil {
			return err
		}
		if scp.Spec.Version != to || scp.Status.Version != from {
			return fmt.Errorf("spec.version %q, status.version %q; want %s and %s", scp.Spec.Version, scp.Status.Version, to, from)
		}
		return nil
	})
	md, err := machineDeployment(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	scaleMachineDeployment(t, md, 2) // the autoscaler's way of asking for a machine more
	held := time.Now()
	eventually(t, short, "the satellite's MachineSet holding its scale-up", func(ctx context.Context) error {
		var sets clusterv1.MachineSetList
		if err := env.Client.List(ctx, &sets, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
			return err
		}
		for _, ms := range sets.Items {
			if ptr.Deref(ms.Spec.Replicas, 0) != 2 {
				continue
			}
			for _, c := range ms.Status.Conditions {
				if c.Type == clusterv1.MachineSetScalingUpCondition && strings.Contains(c.Message, "is upgrading") {
					return nil
				}
			}
			return fmt.Errorf("MachineSet %s conditions %v", ms.Name, ms.Status.Conditions)
		}
		return fmt.Errorf("no MachineSet of %s asks for 2 machines yet", md.Name)
	})
	consistently(t, 10*time.Second, "no machine made while the tenant upgrades", func(ctx context.Context) error {
		ms, err := machines(ctx, pool)
		if err == nil && len(ms) != 1 {
			err = fmt.Errorf("%d machines", len(ms))
		}
		return err
	})

	// Kamaji finishes: the satellite reports the new version and the scale-up goes on.
	patchKCP(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, simulator.AnnotationUpgradeInProgress))
	waitRunning(t, "the pool at 2 once the upgrade is done", pool, 2)
	t.Logf("scale-up held while the tenant upgraded, made once it reported %s: %s", to, time.Since(held).Round(100*time.Millisecond))

	// Kamaji rotates the tenant's admin kubeconfig.
	rotated, err := tenant.RotateAdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	wantCert := adminCertificate(t, rotated)
	patchKCP(`{"metadata":{"annotations":{"e2e.nodegroup.io/wake":"kubeconfig rotated"}}}`) // the simulated Kamaji writes it at its next reconcile
	start := time.Now()
	eventually(t, short, "the satellite's kubeconfig carrying the rotated credentials", func(ctx context.Context) error {
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sat + "-kubeconfig"}, secret); err != nil {
			return err
		}
		if got := adminCertificate(t, secret.Data["value"]); !bytes.Equal(got, wantCert) {
			return fmt.Errorf("%s-kubeconfig still has the old client certificate", sat)
		}
		return nil
	})
	t.Logf("Kamaji rotated the admin kubeconfig -> the satellite's kubeconfig followed: %s", time.Since(start).Round(100*time.Millisecond))
	if err := update(t, pool, func(ng *v1.NodeGroup) { ng.Spec.MinReplicas = 3 }); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, "the pool at 3 after the rotation, its Nodes linked through the new kubeconfig", pool, 3)
}

// adminCertificate is the client certificate of a kubeconfig's current context.
func adminCertificate(t *testing.T, kubeconfig []byte) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.AuthInfos[ctx.AuthInfo] == nil {
		t.Fatalf("kubeconfig without a user for its current context %q", cfg.CurrentContext)
	}
	return cfg.AuthInfos[ctx.AuthInfo].ClientCertificateData
}
