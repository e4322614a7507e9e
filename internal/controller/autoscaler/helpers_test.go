package autoscaler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

const (
	timeout = testenv.Timeout
	cluster = testenv.TenantCluster
)

// name is the name of every autoscaler object of the tenants' Cluster.
var name = autoscaler.Name(cluster)

var seq atomic.Int32

// newTenant makes a namespace as the platform prepares a tenant (a Cluster "tenant" whose
// KamajiControlPlane runs v1.35.4, and the Talos secrets its pools need), with the
// tenant's <cluster>-kubeconfig as the control-plane provider writes it (validKubeconfig).
func newTenant(t *testing.T) string {
	t.Helper()
	ns := newTenantWithout(t)
	setKubeconfig(t, ns, validKubeconfig(ns))
	return ns
}

// newTenantWithout makes a tenant without its <cluster>-kubeconfig.
func newTenantWithout(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("as-%d", seq.Add(1))
	if err := testenv.CreateTenant(context.Background(), env.Client, ns, testenv.TenantOptions{TalosSecret: true}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// kubeconfigName is the tenant's kubeconfig Secret, as Cluster API names it.
const kubeconfigName = cluster + tenant.KubeconfigSuffix

// secretName is the autoscaler's copy of the tenant kubeconfig.
var secretName = autoscaler.KubeconfigSecretName(cluster)

// validKubeconfig is a kubeconfig for the tenant in ns that the operator accepts: its
// server, CA and token inline. extra is appended to its user (YAML flow-map entries,
// e.g. "tokenFile: /x").
func validKubeconfig(ns string, extra ...string) []byte {
	user := "token: tenant-admin-token"
	for _, e := range extra {
		user += ", " + e
	}
	return []byte(`apiVersion: v1
kind: Config
current-context: admin@tenant
clusters:
- name: tenant
  cluster: {server: "https://tenant.` + ns + `.svc:6443", certificate-authority-data: Y2E=}
contexts:
- name: admin@tenant
  context: {cluster: tenant, user: admin}
users:
- name: admin
  user: {` + user + `}
`)
}

// setKubeconfig creates or replaces the tenant's <cluster>-kubeconfig, as the Kamaji
// control-plane provider writes it.
func setKubeconfig(t *testing.T, ns string, data []byte) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubeconfigName}, s)
	switch {
	case apierrors.IsNotFound(err):
		env.MustCreate(t, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kubeconfigName, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
			Type:       clusterv1.ClusterSecretType,
			Data:       map[string][]byte{tenant.KubeconfigKey: data},
		})
	case err != nil:
		t.Fatal(err)
	default:
		s.Data = map[string][]byte{tenant.KubeconfigKey: data}
		if err := env.Client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

func key(ns string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: cluster} }

// newPool creates a Talos pool of the tenant's Cluster sized min..max.
func newPool(t *testing.T, ns, poolName string, minReplicas, maxReplicas int32) *v1.NodeGroup {
	t.Helper()
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: poolName}, Spec: v1.NodeGroupSpec{
		ClusterName: cluster, NodeGroupClassName: v1.BuiltinTalosClass, LocationName: v1.BuiltinLocation,
		MinReplicas: minReplicas, MaxReplicas: maxReplicas,
		Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
	}}
	env.MustCreate(t, ng)
	return ng
}

// resize sets a pool's range.
func resize(t *testing.T, ng *v1.NodeGroup, minReplicas, maxReplicas int32) {
	t.Helper()
	for range 10 {
		cur := &v1.NodeGroup{}
		mustGet(t, ng.Namespace, ng.Name, cur)
		cur.Spec.MinReplicas, cur.Spec.MaxReplicas = minReplicas, maxReplicas
		err := env.Client.Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("could not resize the pool: conflicts")
}

// deletePool deletes a pool and waits until it is gone (the pool controller's finalizer
// removes its objects first).
func deletePool(t *testing.T, ng *v1.NodeGroup) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), ng); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pool "+ng.Name+" gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ng), &v1.NodeGroup{}))
	})
}

// patchCluster changes the tenant's Cluster.
func patchCluster(t *testing.T, ns string, change func(*clusterv1.Cluster)) {
	t.Helper()
	c := &clusterv1.Cluster{}
	mustGet(t, ns, cluster, c)
	patch := client.MergeFrom(c.DeepCopy())
	change(c)
	if err := env.Client.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

func mustGet(t *testing.T, ns, n string, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, obj); err != nil {
		t.Fatalf("getting %T %s/%s: %v", obj, ns, n, err)
	}
}

// reconcile runs the controller's Reconcile for the tenant's Cluster directly, so a test
// knows a reconcile ran and finished.
func reconcile(t *testing.T, ns string) {
	t.Helper()
	if _, err := reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: key(ns)}); err != nil {
		t.Fatalf("reconcile %s: %v", key(ns), err)
	}
}

// autoscalerObjects are the five objects of a cluster's autoscaler, empty, in the order
// they are applied in.
func autoscalerObjects() []client.Object {
	return []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &corev1.Secret{}, &appsv1.Deployment{}}
}

// objectName is the name of the autoscaler's object of obj's kind: <cluster>-autoscaler,
// but <cluster>-autoscaler-kubeconfig for the Secret.
func objectName(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return secretName
	}
	return name
}

// liveObjects reads, live from the API server, the tenant's autoscaler objects of each
// kind (objectName); missing ones are left out.
func liveObjects(t *testing.T, ns string) []client.Object {
	t.Helper()
	var out []client.Object
	for _, obj := range autoscalerObjects() {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: objectName(obj)}, obj)
		switch {
		case err == nil:
			out = append(out, obj)
		case !apierrors.IsNotFound(err):
			t.Fatal(err)
		}
	}
	return out
}

func kinds(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%T", o))
	}
	return out
}

// waitAll waits until all five objects exist.
func waitAll(t *testing.T, ns string) []client.Object {
	t.Helper()
	var objs []client.Object
	testenv.Eventually(t, "the five autoscaler objects in "+ns, func() bool {
		objs = liveObjects(t, ns)
		return len(objs) == 5
	})
	return objs
}

// waitNone waits until none of the five objects exists.
func waitNone(t *testing.T, ns string) {
	t.Helper()
	var objs []client.Object
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if objs = liveObjects(t, ns); len(objs) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("autoscaler objects in %s still there: %v", ns, kinds(objs))
}

// waitState waits until the controller reports the state for the tenant's Cluster.
func waitState(t *testing.T, ns string, s metav1.ConditionStatus, reason string) tenant.Condition {
	t.Helper()
	var last tenant.Condition
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, ok := status.Autoscaler(key(ns))
		if ok && c.Status == s && c.Reason == reason {
			return c
		}
		last = c
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("autoscaler state of %s never became %s/%s (last: %+v)", key(ns), s, reason, last)
	return tenant.Condition{}
}

// waitNoState waits until the controller has nothing to report for the Cluster.
func waitNoState(t *testing.T, ns string) {
	t.Helper()
	testenv.Eventually(t, "no autoscaler state for "+ns, func() bool {
		_, ok := status.Autoscaler(key(ns))
		return !ok
	})
}

// waitPoolCondition waits until the live pool carries AutoscalerReady with the status
// and reason, at its current generation.
func waitPoolCondition(t *testing.T, ng *v1.NodeGroup, s metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	return waitPoolConditionOf(t, ng, v1.ConditionAutoscalerReady, s, reason)
}

// waitPoolConditionOf waits until the pool's condition typ has this status and reason,
// for its current generation.
func waitPoolConditionOf(t *testing.T, ng *v1.NodeGroup, typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var last string
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		got := &v1.NodeGroup{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ng), got); err == nil {
			if c := meta.FindStatusCondition(got.Status.Conditions, typ); c != nil {
				last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
				if c.Status == s && c.Reason == reason && c.ObservedGeneration == got.Generation {
					return *c
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pool %s: %s never became %s/%s (last: %s)", ng.Name, typ, s, reason, last)
	return metav1.Condition{}
}

// waitRendered waits until the pool controller applied the pool's objects.
func waitRendered(t *testing.T, ng *v1.NodeGroup) *v1.NodeGroup {
	t.Helper()
	got := &v1.NodeGroup{}
	testenv.Eventually(t, "pool "+ng.Name+" rendered", func() bool {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ng), got); err != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionRendered)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == got.Generation
	})
	return got
}

// waitQuiet waits until the manager's client has sent no write for a second: the
// reconciles that the watch events of earlier changes trigger are done.
func waitQuiet(t *testing.T) {
	t.Helper()
	testenv.WaitQuiet(t, "the controllers' writes", writes.Load)
}

// identity is what proves an object was neither replaced nor modified.
type identity struct {
	UID             types.UID
	ResourceVersion string
}

func identityOf(obj client.Object) identity {
	return identity{obj.GetUID(), obj.GetResourceVersion()}
}
