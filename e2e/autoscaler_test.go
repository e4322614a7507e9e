//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// The autoscaler scenarios run the cluster-autoscaler the operator rendered, as its Pod
// would run it (framework.RunAutoscaler), against both API servers, while the tenant's
// kube-scheduler places the pods. Two tenant clusters, each with its own autoscaler:
//   - A (the shared tenant): a pool with labels and a taint in zone-a, scaled from zero
//     for a pending pod and back to zero once the pod goes; a pod pinned to zone-b
//     scales nothing; a fixed pool is never touched.
//   - B (a tenant cluster of its own): a GPU pool scaled from zero for a pod asking for
//     nvidia.com/gpu; a pool like A's that A's pod must not scale.
//
// Then B's autoscaled pools go, and with them B's autoscaler and its RBAC.
func TestManagedAutoscaler(t *testing.T) {
	timed(t)
	requireAutoscaler(t)
	ctx := context.Background()
	zone := &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: "e2e-zone-a"}, Spec: v1.LocationSpec{
		Region: "e2e", Zone: "zone-a", AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "true"}}, Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
	}}
	create(t, zone)

	nsA, nsB := "e2e-autoscale-a", "e2e-autoscale-b"
	newTenant(t, nsA)
	tenantB := newOwnTenant(t, nsB, "autoscale-b")

	batchTaint := v1.Taint{Key: "example.com/dedicated", Value: "batch", Effect: v1.TaintEffect(corev1.TaintEffectNoSchedule)}
	batch := func(ns, name string, maxReplicas int32) *v1.NodeGroup {
		ng := newPool(ns, name, 0, maxReplicas)
		ng.Spec.LocationName = zone.Name
		ng.Spec.Labels = map[string]v1.LabelValue{"workload": "batch"}
		ng.Spec.Taints = []v1.Taint{batchTaint}
		return ng
	}
	// A's batch pool may grow to one node: one pod takes it to its maximum.
	batchA, fixedA := batch(nsA, "batch", 1), newPool(nsA, "fixed", 1, 1)
	gpuB, batchB := newPool(nsB, "gpu", 0, 2), batch(nsB, "batch", 3)
	gpuB.Spec.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", Count: 1}}
	gpuB.Spec.Taints = []v1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: v1.TaintEffect(corev1.TaintEffectNoSchedule)}}
	for _, ng := range []*v1.NodeGroup{batchA, fixedA, gpuB, batchB} {
		create(t, ng)
	}
	fixedMachines, _ := waitRunning(t, "the fixed pool running", fixedA, 1)

	// One autoscaler per tenant cluster, in its namespace, owned by its Cluster.
	for _, ns := range []string{nsA, nsB} {
		eventually(t, short, "the autoscaler of "+ns, func(ctx context.Context) error { return autoscalerObjects(ctx, ns, true) })
	}
	startAutoscaler(t, nsA)
	startAutoscaler(t, nsB)

	// A pod for A's pool, and one pinned to a zone no pool of A is in.
	podA := tenantPod(nsA, "batch-1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		map[string]string{"workload": "batch", names.NodeLabelZone: "zone-a"}, batchTaint)
	elsewhere := tenantPod(nsA, "zone-b", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		map[string]string{"workload": "batch", names.NodeLabelZone: "zone-b"}, batchTaint)
	start := time.Now()
	for _, p := range []*corev1.Pod{podA, elsewhere} {
		if err := tenantClient(nsA).Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	waitPodRunning(t, nsA, podA.Name)
	t.Logf("A: pending pod -> Running on a node of the pool scaled from zero: %s", time.Since(start).Round(100*time.Millisecond))
	waitRunning(t, "A's pool at one machine", batchA, 1)
	eventually(t, short, "A's pool reports the replicas the autoscaler set", func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(batchA), batchA); err != nil {
			return err
		}
		if d := batchA.Status.DesiredReplicas; d == nil || *d != 1 {
			return fmt.Errorf("status.desiredReplicas %v, want 1", d)
		}
		return nil
	})

	// The autoscaler's own view, read from its status ConfigMap in the tenant: A's pool
	// is at its maximum; the zone-b pod cannot change that.
	eventually(t, short, "A's pool reports the autoscaler's MaxSizeReached", func(ctx context.Context) error {
		return scaleUpIs(ctx, batchA, metav1.ConditionFalse, autoscaler.ReasonMaxSizeReached)
	})

	// GPUs as the tenant sees them: the pool is scaled from zero for nvidia.com/gpu.
	podB := tenantPod(nsB, "gpu-1", corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, nil,
		v1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: v1.TaintEffect(corev1.TaintEffectNoSchedule)})
	start = time.Now()
	if err := tenantB.Client.Create(ctx, podB); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(t, nsB, podB.Name)
	t.Logf("B: pending GPU pod -> Running on a node of the GPU pool scaled from zero: %s", time.Since(start).Round(100*time.Millisecond))
	_, gpuNodes := waitRunning(t, "B's GPU pool at one machine", gpuB, 1)
	eventually(t, short, "B's GPU pool, one of two, reports that the autoscaler may add nodes", func(ctx context.Context) error {
		return scaleUpIs(ctx, gpuB, metav1.ConditionTrue, autoscaler.ReasonWithinLimits)
	})
	if v := gpuNodes[0].Labels[names.NodeLabelAccelerator]; v != "GA102GL_A10" {
		t.Errorf("the GPU node's %s label is %q, want GA102GL_A10", names.NodeLabelAccelerator, v)
	}

	// Nothing else moved: the zone-b pod is still pending, B's pool like A's, A's fixed
	// pool and A's pool beyond its one machine are as they were.
	consistently(t, 20*time.Second, "no other pool scaled", func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := tenantClient(nsA).Get(ctx, client.ObjectKeyFromObject(elsewhere), p); err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			return fmt.Errorf("the zone-b pod runs on %s", p.Spec.NodeName)
		}
		for ng, want := range map[*v1.NodeGroup]int32{batchA: 1, fixedA: 1, batchB: 0} {
			if err := replicas(ctx, ng, want); err != nil {
				return err
			}
		}
		return nil
	})
	ms, err := machines(ctx, fixedA)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].UID != fixedMachines[0].UID {
		t.Errorf("the fixed pool's machine was replaced: %v", uids(ms))
	}

	// The work goes; the pool returns to its minimum.
	for _, p := range []*corev1.Pod{podA, elsewhere} {
		if err := tenantClient(nsA).Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	eventually(t, long, "A's pool back to zero", func(ctx context.Context) error {
		if err := replicas(ctx, batchA, 0); err != nil {
			return err
		}
		ms, err := machines(ctx, batchA)
		if err == nil && len(ms) != 0 {
			err = fmt.Errorf("%d machines left", len(ms))
		}
		return err
	})
	t.Logf("A: pods gone -> pool scaled down to zero and its machine deleted: %s", time.Since(start).Round(100*time.Millisecond))
	if err := replicas(ctx, fixedA, 1); err != nil {
		t.Error(err)
	}

	// B's last autoscaled pools go, and so do its autoscaler and its RBAC; A's stays.
	for _, ng := range []*v1.NodeGroup{gpuB, batchB} {
		if err := env.Client.Delete(ctx, ng); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, long, "B's autoscaler removed", func(ctx context.Context) error { return autoscalerObjects(ctx, nsB, false) })
	if err := autoscalerObjects(ctx, nsA, true); err != nil {
		t.Error(err)
	}
}

// scaleUpIs checks the pool's AbleToScaleUp condition; on a mismatch it says what the
// autoscaler's status ConfigMap held.
func scaleUpIs(ctx context.Context, ng *v1.NodeGroup, want metav1.ConditionStatus, reason string) error {
	c, err := poolCondition(ctx, ng, v1.ConditionAbleToScaleUp)
	if err != nil {
		return err
	}
	if c.Status == want && c.Reason == reason {
		return nil
	}
	cm := &corev1.ConfigMap{}
	_ = tenantClient(ng.Namespace).Get(ctx, client.ObjectKey{Namespace: autoscaler.StatusNamespace, Name: autoscaler.StatusConfigMapName}, cm)
	return fmt.Errorf("pool %s: AbleToScaleUp=%s %s: %s, want %s %s; the autoscaler's status:\n%s", ng.Name, c.Status, c.Reason, c.Message, want, reason, cm.Data[autoscaler.StatusKey])
}

// requireAutoscaler skips the test without the autoscaler binary, loudly, unless the
// binary was named (CI names it) or CI is set: then its absence fails the test.
func requireAutoscaler(t *testing.T) {
	t.Helper()
	_, err := env.AutoscalerBinary()
	switch {
	case errors.Is(err, framework.ErrNoAutoscaler) && os.Getenv("CI") == "" && os.Getenv(framework.AutoscalerBinEnv) == "":
		t.Logf("SKIPPED, NOT RUN: %v", err)
		t.Skip("no cluster-autoscaler binary: the autoscaler scenarios did not run")
	case err != nil:
		t.Fatal(err)
	}
}

// startAutoscaler runs the namespace's cluster autoscaler until the test ends.
func startAutoscaler(t *testing.T, ns string) {
	t.Helper()
	p, err := env.RunAutoscaler(context.Background(), types.NamespacedName{Namespace: ns, Name: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	t.Logf("the autoscaler of %s runs; its log: %s", ns, p.Log)
}

// autoscalerObjects checks that the cluster's autoscaler objects exist, controlled by
// its Cluster (want), or that none is left (!want).
func autoscalerObjects(ctx context.Context, ns string, want bool) error {
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cluster}, c); err != nil {
		return err
	}
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &corev1.Secret{}, &appsv1.Deployment{}} {
		key := types.NamespacedName{Namespace: ns, Name: autoscaler.Name(cluster)}
		if _, ok := obj.(*corev1.Secret); ok {
			key.Name = autoscaler.KubeconfigSecretName(cluster)
		}
		err := env.Client.Get(ctx, key, obj)
		switch {
		case !want && apierrors.IsNotFound(err):
		case !want && err == nil:
			return fmt.Errorf("%T %s is still there", obj, key)
		case err != nil:
			return err
		case !metav1.IsControlledBy(obj, c):
			return fmt.Errorf("%T %s is not controlled by the Cluster", obj, key)
		}
	}
	return nil
}

// tenantPod is a pod of the tenant cluster asking for requests, on nodes with the
// labels, tolerating the taint.
func tenantPod(ns, name string, requests corev1.ResourceList, nodeSelector map[string]string, taint v1.Taint) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: ns + "-" + name},
		Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Tolerations:  []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: corev1.TaintEffect(taint.Effect)}},
			Containers: []corev1.Container{{
				Name: "work", Image: "registry.example.com/work:1",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: gpuLimits(requests)},
			}},
		},
	}
}

// gpuLimits are the limits an extended resource needs (its request must equal them).
func gpuLimits(requests corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range requests {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			out[name] = q
		}
	}
	return out
}

// waitPodRunning waits for the tenant pod to run.
func waitPodRunning(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, long, "pod "+name+" Running", func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := tenantClient(ns).Get(ctx, types.NamespacedName{Namespace: metav1.NamespaceDefault, Name: name}, p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod is %s on node %q", p.Status.Phase, p.Spec.NodeName)
		}
		return nil
	})
}

// replicas checks the replicas of the pool's MachineDeployment.
func replicas(ctx context.Context, ng *v1.NodeGroup, want int32) error {
	md, err := machineDeployment(ctx, ng)
	if err != nil {
		return err
	}
	if got := md.Spec.Replicas; got == nil || *got != want {
		return fmt.Errorf("pool %s/%s: MachineDeployment replicas %v, want %d", ng.Namespace, ng.Name, got, want)
	}
	return nil
}
