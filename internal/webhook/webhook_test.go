package webhook_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/rulecases"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var tenantSeq atomic.Int32

func tenant(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := fmt.Sprintf("wh-tenant-%d", tenantSeq.Add(1))
	if err := testenv.CreateTenant(context.Background(), env.Client, ns, testenv.TenantOptions{Labels: labels, TalosSecret: true}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func pool(ns, name string, mutate func(*v1.NodeGroupSpec)) *v1.NodeGroup {
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
		ClusterName: testenv.TenantCluster, NodeGroupClassName: "talos", LocationName: v1.BuiltinLocation, MinReplicas: 1, MaxReplicas: 3,
		Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
	}}
	if mutate != nil {
		mutate(&ng.Spec)
	}
	return ng
}

func createOnce(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

func platform(t *testing.T) {
	t.Helper()
	createOnce(t, &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "kairos-own"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSKairos,
		Image: &v1.ClassImage{Reference: "registry.example.com/k@sha256:" + strings.Repeat("ab", 32), KubernetesVersion: "v1.35.4"}}})
	createOnce(t, &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "small-only"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos,
		PoolRules: []v1.PoolRule{{Rule: "object.spec.maxReplicas <= 5", Message: "pools on this class have at most 5 machines: lower spec.maxReplicas"}}}})
	createOnce(t, &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: "gold-only"}, Spec: v1.LocationSpec{
		Provider:          v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
		AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}},
	}})
}

// admissionCases are pools in a tenant namespace labelled tier=silver, on the platform
// of platform(t), that the webhook admits (wantErr empty) or denies with a message
// containing wantErr.
var admissionCases = []struct {
	name    string
	mutate  func(*v1.NodeGroupSpec)
	wantErr string
	// rule, when set, is the rule the admissions metric counts the denial under.
	rule string
}{
	{"plain pool", nil, "", ""},
	{"unknown class", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = "nope" }, `NodeGroupClass "nope" does not exist`, resolve.ReasonClassNotFound},
	{"unknown location", func(s *v1.NodeGroupSpec) { s.LocationName = "nowhere" }, `Location "nowhere" does not exist`, resolve.ReasonLocationNotFound},
	{"location not admitting the namespace", func(s *v1.NodeGroupSpec) { s.LocationName = "gold-only" }, "spec.locationName", policy.RuleLocationAccess},
	{"talos-only field on a custom kairos class", func(s *v1.NodeGroupSpec) {
		s.NodeGroupClassName, s.KernelModules = "kairos-own", []string{"nvidia"}
	}, "spec.kernelModules", ""},
	{"ahead of the control plane", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.36" }, "spec.kubernetesVersion", policy.RuleVersion},
	{"class image fixes the minor", func(s *v1.NodeGroupSpec) {
		s.NodeGroupClassName, s.KubernetesVersion = "kairos-own", "v1.34"
	}, "spec.kubernetesVersion", ""},
	{"class pool rule broken", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName, s.MaxReplicas = "small-only", 10 },
		"pools on this class have at most 5 machines: lower spec.maxReplicas", "poolRules[0]"},
	{"class pool rule kept", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName, s.MaxReplicas = "small-only", 5 }, "", ""},
}

func TestPoolsRefusedAtAdmission(t *testing.T) {
	ctx := context.Background()
	platform(t)
	ns := tenant(t, map[string]string{"tier": "silver"})
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	admissions := func(verdict, rule string) float64 {
		samples, err := metrics.Gather(reg, metrics.Prefix+"admissions_total")
		if err != nil {
			t.Fatal(err)
		}
		return metrics.Sum(samples, map[string]string{"resource": "nodegroup", "verdict": verdict, "rule": rule})
	}
	for i, tc := range admissionCases {
		t.Run(tc.name, func(t *testing.T) {
			verdict, rule := metrics.VerdictAllowed, ""
			if tc.wantErr != "" {
				verdict, rule = metrics.VerdictDenied, tc.rule
			}
			before := admissions(verdict, rule)
			err := env.Client.Create(ctx, pool(ns, fmt.Sprintf("p%d", i), tc.mutate))
			if (tc.wantErr == "" || tc.rule != "") && admissions(verdict, rule) <= before {
				t.Errorf("admissions{verdict=%q, rule=%q} did not count the request", verdict, rule)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("admitted, want refused with %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("refused with %q, want %q", err, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), "admission webhook"):
				t.Fatalf("refused by something other than the webhook: %v", err)
			}
		})
	}
}

func TestClassWithBrokenRuleRefused(t *testing.T) {
	for _, rule := range []string{"object.spec.maxReplicas <=", "object.spec.maxReplicas + 1"} {
		err := env.Client.Create(context.Background(), &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "broken-rule"},
			Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos, PoolRules: []v1.PoolRule{{Rule: rule, Message: "m"}}}})
		if err == nil || !strings.Contains(err.Error(), "admission webhook") {
			t.Errorf("class with rule %q: %v, want refused by the webhook", rule, err)
		}
	}
}

// TestOSSwitchRefusedOnceMachinesExist: before the pool rendered it may change OS; once
// its MachineDeployment exists, neither direction is admitted.
func TestOSSwitchRefusedOnceMachinesExist(t *testing.T) {
	ctx := context.Background()
	platform(t)
	ns := tenant(t, nil)

	// Talos -> Kairos before anything rendered: the cluster has no pools yet, the pool
	// waits for a class that does not exist, then moves.
	early := pool(ns, "early", func(s *v1.NodeGroupSpec) { s.ClusterName = "not-yet" })
	if err := env.Client.Create(ctx, early); err != nil {
		t.Fatal(err)
	}
	if err := update(ctx, early, func(n *v1.NodeGroup) { n.Spec.NodeGroupClassName = "kairos-own" }); err != nil {
		t.Fatalf("switching a pool that has no machines: %v", err)
	}

	for _, tc := range []struct{ from, to string }{{"talos", "kairos-own"}, {"kairos-own", "talos"}} {
		ng := pool(ns, "run-"+strings.TrimSuffix(tc.from, "-own"), func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = tc.from })
		if err := env.Client.Create(ctx, ng); err != nil {
			t.Fatal(err)
		}
		waitRendered(t, ng)
		err := update(ctx, ng, func(n *v1.NodeGroup) { n.Spec.NodeGroupClassName = tc.to })
		if err == nil || !strings.Contains(err.Error(), "spec.nodeGroupClassName") {
			t.Errorf("%s -> %s on a running pool: %v, want refused naming spec.nodeGroupClassName", tc.from, tc.to, err)
		}
	}
}

// TestLocationMoveRefusedOnceMachinesExist: a running pool on a KubeVirt location may not
// move to a Proxmox location, whose machines run under the tenant's satellite there:
// Cluster API keeps a MachineDeployment's cluster.
func TestLocationMoveRefusedOnceMachinesExist(t *testing.T) {
	ctx := context.Background()
	platform(t)
	ns := tenant(t, nil)
	pve := rulecases.ProxmoxLocation("pve-move-"+ns, nil)
	pve.Spec.AllowedNamespaces = &metav1.LabelSelector{}
	if err := env.Client.Create(ctx, pve); err != nil {
		t.Fatal(err)
	}
	ng := pool(ns, "mover", nil)
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	waitRendered(t, ng)
	err := update(ctx, ng, func(n *v1.NodeGroup) {
		n.Spec.LocationName, n.Spec.EphemeralStorage = pve.Name, resource.MustParse("20Gi")
	})
	if err == nil || !strings.Contains(err.Error(), "spec.locationName") || !strings.Contains(err.Error(), "which a MachineDeployment cannot do") {
		t.Errorf("moving a running pool to a Proxmox location: %v, want refused naming spec.locationName", err)
	}
}

// update changes the pool as it is now, again when the controller wrote its status
// between the read and the write.
func update(ctx context.Context, ng *v1.NodeGroup, change func(*v1.NodeGroup)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1.NodeGroup{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), cur); err != nil {
			return err
		}
		change(cur)
		return env.Client.Update(ctx, cur)
	})
}

func waitRendered(t *testing.T, ng *v1.NodeGroup) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got := &v1.NodeGroup{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ng), got); err == nil {
			if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionRendered); c != nil && c.Status == metav1.ConditionTrue {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pool %s never rendered", ng.Name)
}

// TestAdmissionLatency sends 1,000 server-side dry-run creates through the webhook and
// reports the p99 latency. Every request must succeed. (Certificate renewals and a CA
// rotation under load are tested on the operator binary, in cmd/nodegroup-operator.)
func TestAdmissionLatency(t *testing.T) {
	ctx := context.Background()
	ns := tenant(t, nil)
	const n = 1000
	latencies := make([]time.Duration, 0, n)
	failed := 0
	for i := range n {
		start := time.Now()
		err := env.Client.Create(ctx, pool(ns, fmt.Sprintf("dry-%d", i), nil), client.DryRunAll)
		latencies = append(latencies, time.Since(start))
		if err != nil {
			failed++
			t.Errorf("request %d: %v", i, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d requests failed", failed, n)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	t.Logf("admission (dry-run create through the webhook) over %d requests: p50 %s, p99 %s, max %s",
		n, latencies[n/2], latencies[n*99/100], latencies[n-1])
}
