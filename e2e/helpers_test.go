//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// cluster is the tenant Cluster's name in every scenario's namespace.
const cluster = testenv.TenantCluster

// eventually polls check until it returns nil, failing the test with check's last error
// when timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v (operator log: %s)", what, timeout, err, env.OperatorLog())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// consistently holds check for the whole duration, failing at its first error.
func consistently(t *testing.T, d time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if err := check(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// newTenant creates a tenant namespace as the platform prepares one: the Cluster with its
// Kamaji control plane and its API server's Service, nothing else. The simulated Kamaji
// writes <cluster>-ca and <cluster>-kubeconfig for the namespace's tenant cluster
// (env.TenantFor) and the endpoint; the operator makes the Talos join identity.
func newTenant(t *testing.T, ns string) {
	t.Helper()
	if err := testenv.CreateTenant(context.Background(), env.Client, ns, testenv.TenantOptions{
		Labels: map[string]string{"tenant": "true"}, ProviderEndpoint: true,
	}); err != nil {
		t.Fatalf("creating tenant %s: %v", ns, err)
	}
}

// newOwnTenant prepares namespace ns as newTenant does, its Cluster on a tenant cluster
// of its own (a full one, named name) rather than the shared one.
func newOwnTenant(t *testing.T, ns, name string) *framework.Tenant {
	t.Helper()
	tenant, err := env.NewTenant(context.Background(), name, true)
	if err != nil {
		t.Fatal(err)
	}
	env.UseTenant(ns, tenant)
	newTenant(t, ns)
	return tenant
}

// scaleMachineDeployment sets a MachineDeployment's replicas as cluster-autoscaler's
// provider does: through the scale subresource, as its own field manager.
func scaleMachineDeployment(t *testing.T, md *clusterv1.MachineDeployment, replicas int32) {
	t.Helper()
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	if err := env.Client.SubResource("scale").Update(context.Background(), md, client.WithSubResourceBody(scale), client.FieldOwner("cluster-autoscaler")); err != nil {
		t.Fatalf("scaling %s to %d: %v", md.Name, replicas, err)
	}
}

// tenantClient is the admin client of the namespace's tenant cluster, where its Nodes are.
func tenantClient(ns string) client.Client { return env.TenantFor(ns).Client }

// newPool returns a Talos pool on the built-in class and location.
func newPool(ns, name string, minReplicas, maxReplicas int32) *v1.NodeGroup {
	return &v1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.NodeGroupSpec{
			ClusterName: cluster,
			MinReplicas: minReplicas, MaxReplicas: maxReplicas,
			Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
			Roles:     []string{"worker"},
		},
	}
}

// startPool creates the pool and waits until it runs want machines with Ready Nodes.
func startPool(t *testing.T, ng *v1.NodeGroup, want int) ([]clusterv1.Machine, []corev1.Node) {
	t.Helper()
	create(t, ng)
	return waitRunning(t, "pool "+ng.Name+" running", ng, want)
}

// waitRunning waits until the pool runs exactly want machines with Ready Nodes.
func waitRunning(t *testing.T, what string, ng *v1.NodeGroup, want int) ([]clusterv1.Machine, []corev1.Node) {
	t.Helper()
	var ms []clusterv1.Machine
	var nodes []corev1.Node
	eventually(t, long, what, func(ctx context.Context) (err error) {
		ms, nodes, err = poolRunning(ctx, ng, want)
		return err
	})
	return ms, nodes
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// update reads the pool, changes it and writes it back, retrying on conflicts.
func update(t *testing.T, ng *v1.NodeGroup, change func(*v1.NodeGroup)) error {
	t.Helper()
	ctx := context.Background()
	for {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), ng); err != nil {
			return err
		}
		change(ng)
		err := env.Client.Update(ctx, ng)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

func mdName(ng *v1.NodeGroup) string { return names.MachineDeploymentName(cluster, ng.Name) }

func machineDeployment(ctx context.Context, ng *v1.NodeGroup) (*clusterv1.MachineDeployment, error) {
	md := &clusterv1.MachineDeployment{}
	return md, env.Client.Get(ctx, client.ObjectKey{Namespace: ng.Namespace, Name: mdName(ng)}, md)
}

// machines lists the pool's Machines (those of its MachineDeployment).
func machines(ctx context.Context, ng *v1.NodeGroup) ([]clusterv1.Machine, error) {
	var list clusterv1.MachineList
	err := env.Client.List(ctx, &list, client.InNamespace(ng.Namespace),
		client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: mdName(ng)})
	return list.Items, err
}

// poolRunning checks that the pool has exactly want Machines, each Running with a Ready
// Node whose providerID is the Machine's, and returns them with their Nodes.
func poolRunning(ctx context.Context, ng *v1.NodeGroup, want int) ([]clusterv1.Machine, []corev1.Node, error) {
	ms, err := machines(ctx, ng)
	if err != nil {
		return nil, nil, err
	}
	if len(ms) != want {
		return nil, nil, fmt.Errorf("%d machines, want %d", len(ms), want)
	}
	var nodes []corev1.Node
	for _, m := range ms {
		if !m.DeletionTimestamp.IsZero() {
			return nil, nil, fmt.Errorf("machine %s is being deleted", m.Name)
		}
		if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || !m.Status.NodeRef.IsDefined() {
			return nil, nil, fmt.Errorf("machine %s is %q with node %q", m.Name, m.Status.Phase, m.Status.NodeRef.Name)
		}
		node := corev1.Node{}
		if err := tenantClient(ng.Namespace).Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &node); err != nil {
			return nil, nil, err
		}
		if node.Spec.ProviderID != m.Spec.ProviderID {
			return nil, nil, fmt.Errorf("node %s has providerID %q, machine %s %q", node.Name, node.Spec.ProviderID, m.Name, m.Spec.ProviderID)
		}
		if !nodeReady(&node) {
			return nil, nil, fmt.Errorf("node %s is not Ready", node.Name)
		}
		nodes = append(nodes, node)
	}
	return ms, nodes, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// poolCondition returns the pool's condition of type, checked against its generation.
func poolCondition(ctx context.Context, ng *v1.NodeGroup, typ string) (*metav1.Condition, error) {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), ng); err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(ng.Status.Conditions, typ)
	if c == nil {
		return nil, fmt.Errorf("pool %s has no %s condition", ng.Name, typ)
	}
	if c.ObservedGeneration != ng.Generation {
		return nil, fmt.Errorf("pool %s condition %s is for generation %d, pool is at %d", ng.Name, typ, c.ObservedGeneration, ng.Generation)
	}
	return c, nil
}

func conditionTrue(ctx context.Context, ng *v1.NodeGroup, typ string) error {
	c, err := poolCondition(ctx, ng, typ)
	if err != nil {
		return err
	}
	if c.Status != metav1.ConditionTrue {
		return fmt.Errorf("pool %s: %s=%s %s: %s", ng.Name, typ, c.Status, c.Reason, c.Message)
	}
	return nil
}

// templates lists the pool's templates of one kind by the pool label.
func templates(ctx context.Context, ns, pool, apiVersion, kind string) ([]string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(apiVersion)
	list.SetKind(kind + "List")
	if err := env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{names.LabelPool: names.LabelValue(pool)}); err != nil {
		return nil, err
	}
	var names []string
	for _, o := range list.Items {
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	return names, nil
}

const (
	infraAPIVersion = "infrastructure.cluster.x-k8s.io/v1alpha1"
	infraKind       = "KubevirtMachineTemplate"
	talosAPIVersion = "bootstrap.cluster.x-k8s.io/v1alpha3"
	talosKind       = "TalosConfigTemplate"
)

// machineSets lists the pool's MachineSets.
func machineSets(ctx context.Context, ng *v1.NodeGroup) ([]clusterv1.MachineSet, error) {
	var list clusterv1.MachineSetList
	err := env.Client.List(ctx, &list, client.InNamespace(ng.Namespace),
		client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: mdName(ng)})
	return list.Items, err
}

// uids returns the objects' UIDs, sorted.
func uids[T any, P interface {
	*T
	client.Object
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, string(P(&items[i]).GetUID()))
	}
	slices.Sort(out)
	return out
}

func hasTaint(n *corev1.Node, key, value string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == key && t.Value == value && t.Effect == effect
	})
}

// timed logs how long a scenario took, for the suite's report.
func timed(t *testing.T) {
	start := time.Now()
	t.Cleanup(func() { t.Logf("scenario %s took %s", t.Name(), time.Since(start).Round(100*time.Millisecond)) })
}

func joinErrs(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}
