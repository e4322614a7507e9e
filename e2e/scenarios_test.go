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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// A machine boots (in the simulator) within seconds; these bound each wait generously for
// a loaded 2-core machine.
const (
	short = time.Minute
	long  = 3 * time.Minute
)

// A Talos pool and a Kairos pool reach Ready: Machines Running, Nodes Ready with the role,
// pool and location labels and the pool's taints, and the pool's status counting them;
// the operator's metrics, scraped as Prometheus does, count them Ready and time it.
func TestPoolsReachReady(t *testing.T) {
	timed(t)
	ns := "e2e-ready"
	newTenant(t, ns)
	kairosClass := &v1.NodeGroupClass{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-kairos-v1-35"},
		Spec: v1.NodeGroupClassSpec{
			OS: v1.OSKairos,
			Image: &v1.ClassImage{
				Reference:         "registry.example.com/platform/kairos-worker@sha256:" + strings.Repeat("ab", 32),
				KubernetesVersion: "v1.35.4",
			},
		},
	}
	create(t, kairosClass)

	talos := newPool(ns, "talos", 2, 2)
	talos.Spec.Labels = map[string]v1.LabelValue{"workload": "web"}
	talos.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "web", Effect: v1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	kairos := newPool(ns, "kairos", 1, 1)
	kairos.Spec.NodeGroupClassName = kairosClass.Name
	kairos.Spec.Roles = []string{"worker", "storage"}
	kairos.Spec.Taints = []v1.Taint{{Key: "storage", Effect: v1.TaintEffect(corev1.TaintEffectNoExecute)}}
	create(t, talos)
	create(t, kairos)

	for _, c := range []struct {
		pool     *v1.NodeGroup
		replicas int
		roles    []string
		labels   map[string]string
		taint    corev1.Taint
	}{
		{talos, 2, []string{"worker"}, map[string]string{"workload": "web"}, corev1.Taint{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
		{kairos, 1, []string{"worker", "storage"}, nil, corev1.Taint{Key: "storage", Effect: corev1.TaintEffectNoExecute}},
	} {
		eventually(t, long, "pool "+c.pool.Name+" running", func(ctx context.Context) error {
			_, nodes, err := poolRunning(ctx, c.pool, c.replicas)
			if err != nil {
				return err
			}
			var errs []string
			for _, n := range nodes {
				want := map[string]string{
					names.NodeLabelPool:     c.pool.Name,
					names.NodeLabelLocation: v1.BuiltinLocation,
				}
				for _, r := range c.roles {
					want[names.NodeRolePrefix+r] = ""
				}
				for k, v := range c.labels {
					want[k] = v
				}
				for k, v := range want {
					if got, ok := n.Labels[k]; !ok || got != v {
						errs = append(errs, fmt.Sprintf("node %s label %s=%q, want %q", n.Name, k, got, v))
					}
				}
				if !hasTaint(&n, c.taint.Key, c.taint.Value, c.taint.Effect) {
					errs = append(errs, fmt.Sprintf("node %s lacks taint %s=%s:%s (has %v)", n.Name, c.taint.Key, c.taint.Value, c.taint.Effect, n.Spec.Taints))
				}
				if n.Status.NodeInfo.KubeletVersion != "v1.35.4" {
					errs = append(errs, fmt.Sprintf("node %s kubelet %s", n.Name, n.Status.NodeInfo.KubeletVersion))
				}
			}
			return joinErrs(errs)
		})
		eventually(t, short, "pool "+c.pool.Name+" status", func(ctx context.Context) error {
			if err := conditionTrue(ctx, c.pool, v1.ConditionReady); err != nil {
				return err
			}
			if c.pool.Status.Replicas != int32(c.replicas) || c.pool.Status.ReadyReplicas != int32(c.replicas) {
				return fmt.Errorf("status replicas %d ready %d, want %d", c.pool.Status.Replicas, c.pool.Status.ReadyReplicas, c.replicas)
			}
			return nil
		})
	}
	readyInMetrics(t, 2)
}

// A fixed pool ends at exactly its size; an autoscaled pool starts at its minimum, and
// a replica count set by another manager through the scale subresource (as
// cluster-autoscaler does) survives the operator's next reconcile.
func TestFixedAndAutoscaledSizes(t *testing.T) {
	timed(t)
	ns := "e2e-sizes"
	newTenant(t, ns)
	fixed := newPool(ns, "fixed", 3, 3)
	auto := newPool(ns, "auto", 1, 4)
	create(t, fixed)
	create(t, auto)

	waitRunning(t, "fixed pool at 3", fixed, 3)
	waitRunning(t, "autoscaled pool at its minimum", auto, 1)

	// The autoscaler scales through the MachineDeployment's scale subresource.
	ctx := context.Background()
	md, err := machineDeployment(ctx, auto)
	if err != nil {
		t.Fatal(err)
	}
	scaleMachineDeployment(t, md, 3)
	waitRunning(t, "autoscaled pool at 3", auto, 3)
	// A spec change makes the operator apply the MachineDeployment again; the replicas
	// the autoscaler set must stay.
	if err := update(t, auto, func(ng *v1.NodeGroup) { ng.Spec.MaxReplicas = 5 }); err != nil {
		t.Fatal(err)
	}
	eventually(t, short, "max-size annotation at 5", func(ctx context.Context) error {
		md, err := machineDeployment(ctx, auto)
		if err != nil {
			return err
		}
		if got := md.Annotations[names.AnnotationMaxSize]; got != "5" {
			return fmt.Errorf("max-size annotation %q", got)
		}
		if md.Spec.Replicas == nil || *md.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %v after the operator's apply, want the autoscaler's 3", md.Spec.Replicas)
		}
		return nil
	})
	consistently(t, 5*time.Second, "the autoscaler's replicas survive", func(ctx context.Context) error {
		_, _, err := poolRunning(ctx, auto, 3)
		return err
	})
	eventually(t, short, "fixed pool still exactly 3", func(ctx context.Context) error {
		md, err := machineDeployment(ctx, fixed)
		if err != nil {
			return err
		}
		if md.Spec.Replicas == nil || *md.Spec.Replicas != 3 {
			return fmt.Errorf("fixed pool replicas %v", md.Spec.Replicas)
		}
		_, _, err = poolRunning(ctx, fixed, 3)
		return err
	})
	// A fixed pool resized ends at its new size; a minimum raised above the autoscaler's
	// count lifts it.
	if err := update(t, fixed, func(ng *v1.NodeGroup) { ng.Spec.MinReplicas, ng.Spec.MaxReplicas = 2, 2 }); err != nil {
		t.Fatal(err)
	}
	if err := update(t, auto, func(ng *v1.NodeGroup) { ng.Spec.MinReplicas = 4 }); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, "fixed pool resized to exactly 2", fixed, 2)
	waitRunning(t, "autoscaled pool lifted to its new minimum 4", auto, 4)
}

// Changing a pool's machine size rolls it through new templates; once no MachineSet uses
// the old templates, the operator removes them.
func TestResizeRollsThroughNewTemplates(t *testing.T) {
	timed(t)
	ns := "e2e-roll"
	newTenant(t, ns)
	ng := newPool(ns, "roll", 2, 2)
	before, _ := startPool(t, ng, 2)
	ctx := context.Background()
	oldInfra, err := templates(ctx, ns, ng.Name, infraAPIVersion, infraKind)
	if err != nil || len(oldInfra) != 1 {
		t.Fatalf("infrastructure templates before the change: %v %v", oldInfra, err)
	}

	// Built before the change, so that the rollout is not over when explain first runs.
	if _, err := plugin(); err != nil {
		t.Fatal(err)
	}
	if err := update(t, ng, func(ng *v1.NodeGroup) { ng.Spec.Resources.CPU = resource.MustParse("4") }); err != nil {
		t.Fatal(err)
	}
	// While it rolls, `kubectl nodegroup explain` says so from the pool's status: the
	// summary, and the RollingOut condition with what is being rolled out.
	var explained string
	eventually(t, short, "explain says the pool rolls out", func(ctx context.Context) error {
		// The exit code follows Ready, which a surge machine may turn False or not.
		out, code, err := explainPool(ctx, ng)
		if err != nil {
			return err
		}
		explained = out
		want := []string{"Machines (MachineDeployment " + mdName(ng) + "): RollingOut;", "-> RollingOut=True: ", "rolling out"}
		for _, w := range want {
			if !strings.Contains(out, w) {
				return fmt.Errorf("explain (exit %d) says no %q:\n%s", code, w, out)
			}
		}
		return nil
	})
	t.Logf("kubectl nodegroup explain %s -n %s, mid-rollout:\n%s", ng.Name, ns, explained)
	eventually(t, long, "rolled onto the new template", func(ctx context.Context) error {
		md, err := machineDeployment(ctx, ng)
		if err != nil {
			return err
		}
		newInfra := md.Spec.Template.Spec.InfrastructureRef.Name
		if newInfra == oldInfra[0] {
			return fmt.Errorf("MachineDeployment still names %s", newInfra)
		}
		ms, _, err := poolRunning(ctx, ng, 2)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if slices.Contains(uids(before), string(m.UID)) {
				return fmt.Errorf("machine %s from before the change still runs", m.Name)
			}
			if m.Spec.InfrastructureRef.Name == "" {
				return fmt.Errorf("machine %s has no infrastructure", m.Name)
			}
		}
		sets, err := machineSets(ctx, ng)
		if err != nil {
			return err
		}
		if len(sets) != 1 {
			return fmt.Errorf("%d MachineSets, want only the new one", len(sets))
		}
		infra, err := templates(ctx, ns, ng.Name, infraAPIVersion, infraKind)
		if err != nil {
			return err
		}
		if !slices.Equal(infra, []string{newInfra}) {
			return fmt.Errorf("infrastructure templates %v, want only %s", infra, newInfra)
		}
		return nil
	})
}

// A Talos↔Kairos switch is refused at admission while the pool runs, and nothing that
// runs changes.
func TestOSSwitchRefusedWhileRunning(t *testing.T) {
	timed(t)
	ns := "e2e-switch"
	newTenant(t, ns)
	ng := newPool(ns, "switch", 1, 1)
	running, _ := startPool(t, ng, 1)
	ctx := context.Background()
	mdBefore, err := machineDeployment(ctx, ng)
	if err != nil {
		t.Fatal(err)
	}
	err = update(t, ng, func(ng *v1.NodeGroup) { ng.Spec.NodeGroupClassName = "kairos" })
	if err == nil {
		t.Fatal("switching a running Talos pool to Kairos was admitted")
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Fatalf("the switch failed for another reason: %v", err)
	}
	if !strings.Contains(err.Error(), "Kairos") && !strings.Contains(err.Error(), "os") {
		t.Errorf("the refusal does not say why: %v", err)
	}
	t.Logf("refused as expected: %v", err)
	consistently(t, 5*time.Second, "nothing running changes", func(ctx context.Context) error {
		md, err := machineDeployment(ctx, ng)
		if err != nil {
			return err
		}
		if md.Generation != mdBefore.Generation || md.Spec.Template.Spec.Bootstrap.ConfigRef != mdBefore.Spec.Template.Spec.Bootstrap.ConfigRef {
			return fmt.Errorf("the MachineDeployment changed: generation %d -> %d", mdBefore.Generation, md.Generation)
		}
		ms, _, err := poolRunning(ctx, ng, 1)
		if err != nil {
			return err
		}
		if ms[0].UID != running[0].UID {
			return fmt.Errorf("machine %s replaced by %s", running[0].Name, ms[0].Name)
		}
		return nil
	})
}

// A Node NotReady beyond the health check's timeout is remediated in a one-machine pool:
// its Machine is replaced and the pool runs again.
func TestUnhealthyNodeRemediated(t *testing.T) {
	timed(t)
	ns := "e2e-heal"
	newTenant(t, ns)
	ng := newPool(ns, "heal", 1, 1)
	ng.Spec.HealthCheck = &v1.HealthCheck{
		UnhealthyNotReadyTimeout: &metav1.Duration{Duration: 10 * time.Second},
		UnhealthyUnknownTimeout:  &metav1.Duration{Duration: 10 * time.Second},
	}
	create(t, ng)
	var sick clusterv1.Machine
	var node corev1.Node
	eventually(t, long, "pool running", func(ctx context.Context) error {
		ms, nodes, err := poolRunning(ctx, ng, 1)
		if err == nil {
			sick, node = ms[0], nodes[0]
		}
		return err
	})

	// The node's runtime fails: its kubelet reports Ready=False. kwok is taken off the
	// Node first, so it does not report Ready again; it keeps renewing the Node's lease,
	// so the controller-manager would not mark the Node Unknown either. Both must happen
	// before this step is done.
	eventually(t, short, "the node marked NotReady", func(ctx context.Context) error {
		if err := tenantClient(ns).Get(ctx, client.ObjectKeyFromObject(&node), &node); err != nil {
			return err
		}
		if _, managed := node.Annotations[framework.KwokAnnotation]; managed {
			patch := client.MergeFrom(node.DeepCopy())
			delete(node.Annotations, framework.KwokAnnotation)
			if err := tenantClient(ns).Patch(ctx, &node, patch); err != nil {
				return err
			}
		}
		found := false
		for i := range node.Status.Conditions {
			if c := &node.Status.Conditions[i]; c.Type == corev1.NodeReady {
				c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "KubeletNotReady", metav1.Now()
				found = true
			}
		}
		if !found {
			return fmt.Errorf("node %s has no Ready condition to turn False", node.Name)
		}
		return tenantClient(ns).Status().Update(ctx, &node)
	})
	eventually(t, long, "the unhealthy machine replaced", func(ctx context.Context) error {
		ms, _, err := poolRunning(ctx, ng, 1)
		if err != nil {
			return err
		}
		if ms[0].UID == sick.UID {
			return fmt.Errorf("machine %s not remediated yet", sick.Name)
		}
		return nil
	})
	eventually(t, short, "the old node removed", func(ctx context.Context) error {
		err := tenantClient(ns).Get(ctx, client.ObjectKeyFromObject(&node), &corev1.Node{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node %s still exists (%v)", node.Name, err)
	})
}

// The KamajiControlPlane gets the tenant DNS address and nothing else changes on it.
func TestControlPlaneGetsTenantDNS(t *testing.T) {
	timed(t)
	ns := "e2e-dns"
	newTenant(t, ns)
	ctx := context.Background()
	kcp := &unstructured.Unstructured{}
	kcp.SetAPIVersion("controlplane.cluster.x-k8s.io/v1alpha2")
	kcp.SetKind("KamajiControlPlane")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, kcp); err != nil {
		t.Fatal(err)
	}
	specBefore, _, _ := unstructured.NestedMap(kcp.Object, "spec")
	ng := newPool(ns, "dns", 1, 1)
	create(t, ng)
	eventually(t, short, "dnsServiceIPs published", func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, kcp); err != nil {
			return err
		}
		ips, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "network", "dnsServiceIPs")
		if !slices.Equal(ips, []string{"10.95.0.10"}) {
			return fmt.Errorf("spec.network.dnsServiceIPs = %v, want [10.95.0.10] (the 10th address of 10.95.0.0/16)", ips)
		}
		return nil
	})
	// Compare everything but the address and the endpoint, which the control-plane
	// provider (here the simulator, playing Kamaji) fills in on its own.
	specAfter, _, _ := unstructured.NestedMap(kcp.Object, "spec")
	unstructured.RemoveNestedField(specAfter, "network", "dnsServiceIPs")
	unstructured.RemoveNestedField(specAfter, "controlPlaneEndpoint")
	unstructured.RemoveNestedField(specBefore, "controlPlaneEndpoint")
	if !equality.Semantic.DeepEqual(specAfter, specBefore) {
		t.Errorf("the spec changed beyond spec.network.dnsServiceIPs:\nbefore %v\nafter  %v", specBefore, specAfter)
	}
	// And the operator claims that one field only.
	owned := map[string]string{}
	for _, mf := range kcp.GetManagedFields() {
		if strings.HasPrefix(mf.Manager, "nodegroup") && mf.FieldsV1 != nil {
			owned[mf.Manager+"/"+mf.Subresource] = mf.FieldsV1.GetRawString()
		}
	}
	want := map[string]string{controlplanedns.FieldManager + "/": `{"f:spec":{"f:network":{"f:dnsServiceIPs":{}}}}`}
	if fmt.Sprint(owned) != fmt.Sprint(want) {
		t.Errorf("the operator's field managers own %v, want %v", owned, want)
	}
}

// Deleting a pool removes its Machines, Nodes and templates, and nothing else: another
// pool of the same cluster keeps running untouched.
func TestDeletePoolRemovesOnlyItsObjects(t *testing.T) {
	timed(t)
	ns := "e2e-delete"
	newTenant(t, ns)
	doomed := newPool(ns, "doomed", 2, 2)
	kept := newPool(ns, "kept", 1, 1)
	create(t, doomed)
	create(t, kept)
	var doomedNodes []corev1.Node
	var keptMachines []clusterv1.Machine
	eventually(t, long, "both pools running", func(ctx context.Context) (err error) {
		if _, doomedNodes, err = poolRunning(ctx, doomed, 2); err != nil {
			return err
		}
		keptMachines, _, err = poolRunning(ctx, kept, 1)
		return err
	})
	ctx := context.Background()
	keptMD, err := machineDeployment(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	eventually(t, long, "the pool and everything it made gone", func(ctx context.Context) error {
		var errs []string
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(doomed), &v1.NodeGroup{}); !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("NodeGroup still there (%v)", err))
		}
		if _, err := machineDeployment(ctx, doomed); !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("MachineDeployment still there (%v)", err))
		}
		if ms, err := machines(ctx, doomed); err != nil || len(ms) > 0 {
			errs = append(errs, fmt.Sprintf("%d machines left (%v)", len(ms), err))
		}
		for _, n := range doomedNodes {
			if err := tenantClient(ns).Get(ctx, client.ObjectKeyFromObject(&n), &corev1.Node{}); !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Sprintf("node %s left (%v)", n.Name, err))
			}
		}
		for _, k := range [][2]string{{infraAPIVersion, infraKind}, {talosAPIVersion, talosKind}} {
			if names, err := templates(ctx, ns, doomed.Name, k[0], k[1]); err != nil || len(names) > 0 {
				errs = append(errs, fmt.Sprintf("%s left: %v (%v)", k[1], names, err))
			}
		}
		hc := &clusterv1.MachineHealthCheck{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mdName(doomed)}, hc); !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("MachineHealthCheck left (%v)", err))
		}
		return joinErrs(errs)
	})
	// Nothing else: the other pool, the Cluster and its control plane are untouched.
	md, err := machineDeployment(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	if md.UID != keptMD.UID || md.Generation != keptMD.Generation {
		t.Errorf("the kept pool's MachineDeployment changed (generation %d -> %d)", keptMD.Generation, md.Generation)
	}
	ms, _, err := poolRunning(ctx, kept, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].UID != keptMachines[0].UID {
		t.Errorf("the kept pool's machine was replaced")
	}
	for _, obj := range []client.Object{&clusterv1.Cluster{}, &corev1.Service{}} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, obj); err != nil {
			t.Errorf("%T %s/%s: %v", obj, ns, cluster, err)
		}
	}
}

// Restarting the operator in the middle of a rollout leaves no duplicate or orphaned
// object: one MachineDeployment, one current template of each kind, one MachineSet, the
// right number of Machines.
func TestOperatorRestartMidRollout(t *testing.T) {
	timed(t)
	ns := "e2e-restart"
	newTenant(t, ns)
	ng := newPool(ns, "restart", 2, 2)
	ng.Spec.Rollout = &v1.Rollout{MaxSurge: ptrTo(intstr.FromInt32(1)), MaxUnavailable: ptrTo(intstr.FromInt32(0))}
	startPool(t, ng, 2)
	ctx := context.Background()
	mdBefore, err := machineDeployment(ctx, ng)
	if err != nil {
		t.Fatal(err)
	}
	if err := update(t, ng, func(ng *v1.NodeGroup) { ng.Spec.Resources.Memory = resource.MustParse("8Gi") }); err != nil {
		t.Fatal(err)
	}
	// Stop the operator as soon as the rollout has begun: a new MachineSet exists.
	eventually(t, short, "the rollout begins", func(ctx context.Context) error {
		sets, err := machineSets(ctx, ng)
		if err != nil {
			return err
		}
		if len(sets) < 2 {
			return fmt.Errorf("%d MachineSets", len(sets))
		}
		return nil
	})
	env.StopOperator()
	if err := env.StartOperator(ctx); err != nil {
		t.Fatalf("restarting the operator: %v", err)
	}
	eventually(t, long, "the rollout completes with nothing duplicated or orphaned", func(ctx context.Context) error {
		md, err := machineDeployment(ctx, ng)
		if err != nil {
			return err
		}
		if md.UID != mdBefore.UID {
			return fmt.Errorf("the MachineDeployment was recreated")
		}
		if _, _, err := poolRunning(ctx, ng, 2); err != nil {
			return err
		}
		sets, err := machineSets(ctx, ng)
		if err != nil {
			return err
		}
		if len(sets) != 1 {
			return fmt.Errorf("%d MachineSets", len(sets))
		}
		infra, err := templates(ctx, ns, ng.Name, infraAPIVersion, infraKind)
		if err != nil {
			return err
		}
		boot, err := templates(ctx, ns, ng.Name, talosAPIVersion, talosKind)
		if err != nil {
			return err
		}
		want := md.Spec.Template.Spec
		if !slices.Equal(infra, []string{want.InfrastructureRef.Name}) || !slices.Equal(boot, []string{want.Bootstrap.ConfigRef.Name}) {
			return fmt.Errorf("templates infra %v boot %v, want only %s and %s", infra, boot, want.InfrastructureRef.Name, want.Bootstrap.ConfigRef.Name)
		}
		var mds clusterv1.MachineDeploymentList
		if err := env.Client.List(ctx, &mds, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(mds.Items) != 1 {
			return fmt.Errorf("%d MachineDeployments in the namespace", len(mds.Items))
		}
		return nil
	})
}

func ptrTo[T any](v T) *T { return &v }
