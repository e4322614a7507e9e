package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/rulecases"
)

// ruleCase is one object the API server must accept (wantErr empty) or refuse with a
// message containing wantErr.
type ruleCase struct {
	name    string
	obj     client.Object
	wantErr string
}

func runCreateCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			err := env.Client.Create(ctx, tc.obj)
			if err == nil {
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tc.obj) })
			}
			checkErr(t, err, tc.wantErr)
		})
	}
}

func checkErr(t *testing.T, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("refused, want accepted: %v", err)
	case wantErr != "" && err == nil:
		t.Fatalf("accepted, want refused with %q", wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("refused with %q, want a message containing %q", err.Error(), wantErr)
	}
}

func TestNodeGroupClassRules(t *testing.T) {
	runCreateCases(t, objectCases(rulecases.Classes()))
}

func objectCases(in []rulecases.ObjectCase) []ruleCase {
	var cases []ruleCase
	for _, c := range in {
		cases = append(cases, ruleCase{name: c.Name, obj: c.Obj, wantErr: c.WantErr})
	}
	return cases
}

func TestNodeGroupClassImmutable(t *testing.T) {
	ctx := context.Background()
	c := rulecases.Class("immutable-class", v1.NodeGroupClassSpec{OS: v1.OSTalos, Talos: &v1.TalosClassSpec{KernelArgs: []string{"quiet"}}})
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), c) })

	changed := c.DeepCopy()
	changed.Spec.Talos.KernelArgs = []string{"console=ttyS0"}
	checkErr(t, env.Client.Update(ctx, changed), "spec is immutable: publish a new class")

	relabelled := c.DeepCopy()
	relabelled.Labels = map[string]string{"team": "platform"}
	checkErr(t, env.Client.Update(ctx, relabelled), "")
}

func TestLocationRules(t *testing.T) {
	runCreateCases(t, objectCases(rulecases.Locations()))

	t.Run("defaults eviction strategy to External", func(t *testing.T) {
		got := &v1.Location{}
		loc := rulecases.KubeVirtLocation("defaults")
		if err := env.Client.Create(context.Background(), loc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), loc) })
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(loc), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Provider.KubeVirt.EvictionStrategy != "External" {
			t.Fatalf("evictionStrategy = %q, want External", got.Spec.Provider.KubeVirt.EvictionStrategy)
		}
	})
}

func TestLocationImmutable(t *testing.T) {
	ctx := context.Background()
	loc := rulecases.KubeVirtLocation("immutable-location")
	if err := env.Client.Create(ctx, loc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), loc) })
	const immutable = ": publish a new location and move pools to it"
	for name, mutate := range map[string]func(*v1.LocationSpec){
		"zone changed":          func(s *v1.LocationSpec) { s.Zone = "fsn1-b" },
		"region removed":        func(s *v1.LocationSpec) { s.Region = "" },
		"storage class changed": func(s *v1.LocationSpec) { s.Provider.KubeVirt.StorageClassName = "fast" },
		"provider block swapped": func(s *v1.LocationSpec) {
			s.Provider = v1.LocationProvider{Type: v1.ProviderStatic, Static: &v1.StaticProvider{}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			changed := loc.DeepCopy()
			mutate(&changed.Spec)
			checkErr(t, env.Client.Update(ctx, changed, client.DryRunAll), immutable)
		})
	}
	// Who may use a location is the platform's to change, on any location.
	t.Run("allowedNamespaces changes", func(t *testing.T) {
		for _, sel := range []*metav1.LabelSelector{{MatchLabels: map[string]string{"tenant": "gold"}}, {}, nil} {
			changed := loc.DeepCopy()
			changed.Spec.AllowedNamespaces = sel
			checkErr(t, env.Client.Update(ctx, changed), "")
			loc = changed
		}
	})
	noZone := rulecases.KubeVirtLocation("immutable-no-zone")
	noZone.Spec.Zone = ""
	if err := env.Client.Create(ctx, noZone); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), noZone) })
	t.Run("zone added", func(t *testing.T) {
		changed := noZone.DeepCopy()
		changed.Spec.Zone = "fsn1-a"
		checkErr(t, env.Client.Update(ctx, changed, client.DryRunAll), immutable)
	})
}

func pool(name string, mutate func(*v1.NodeGroupSpec)) *v1.NodeGroup {
	return rulecases.Pool(name, mutate)
}

func TestNodeGroupRules(t *testing.T) {
	var cases []ruleCase
	for _, c := range rulecases.NodeGroups() {
		cases = append(cases, ruleCase{name: c.Name, obj: c.Obj, wantErr: c.WantErr})
	}
	runCreateCases(t, cases)
}

func TestNodeGroupDefaults(t *testing.T) {
	ctx := context.Background()
	ng := pool("defaults", nil)
	ng.Spec.MinReplicas = 0 // let the API server default it
	raw := map[string]any{
		"apiVersion": "nodegroup.io/v1alpha1", "kind": "NodeGroup",
		"metadata": map[string]any{"name": "defaults", "namespace": "default"},
		"spec":     map[string]any{"clusterName": "tenant-a", "maxReplicas": int64(2), "resources": map[string]any{"cpu": int64(2), "memory": "4Gi"}},
	}
	if err := env.Client.Create(ctx, unstructuredFrom(raw)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ng) })
	got := &v1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeGroupClassName != "talos" || got.Spec.LocationName != "in-cluster" || got.Spec.MinReplicas != 1 ||
		got.Spec.EphemeralStorage.String() != "20Gi" {
		t.Fatalf("defaults: class=%q location=%q min=%d storage=%s, want talos, in-cluster, 1, 20Gi",
			got.Spec.NodeGroupClassName, got.Spec.LocationName, got.Spec.MinReplicas, got.Spec.EphemeralStorage.String())
	}
}

func TestNodeGroupUpdates(t *testing.T) {
	ctx := context.Background()
	ng := pool("updates", nil)
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ng) })

	moved := ng.DeepCopy()
	moved.Spec.ClusterName = "tenant-b"
	checkErr(t, env.Client.Update(ctx, moved), "spec.clusterName is immutable")

	grown := ng.DeepCopy()
	grown.Spec.MaxReplicas = 10
	checkErr(t, env.Client.Update(ctx, grown), "")

	shrunk := grown.DeepCopy()
	shrunk.Spec.MaxReplicas = 0
	checkErr(t, env.Client.Update(ctx, shrunk), "spec.maxReplicas in body should be greater than or equal to 1")
}

// TestNodeGroupServerSideApply checks the rules hold for server-side apply too, and that
// the list and map markers give field ownership per item.
func TestNodeGroupServerSideApply(t *testing.T) {
	ctx := context.Background()
	apply := func(manager string, spec map[string]any) error {
		obj := unstructuredFrom(map[string]any{
			"apiVersion": "nodegroup.io/v1alpha1", "kind": "NodeGroup",
			"metadata": map[string]any{"name": "applied", "namespace": "default"},
			"spec":     spec,
		})
		return env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(manager), client.ForceOwnership)
	}
	base := func() map[string]any {
		return map[string]any{"clusterName": "tenant-a", "minReplicas": int64(1), "maxReplicas": int64(3),
			"resources": map[string]any{"cpu": "2", "memory": "4Gi"}}
	}
	if err := apply("tenant", base()); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pool("applied", nil)) })

	if err := apply("tenant", base()); err != nil {
		t.Fatalf("second identical apply: %v", err)
	}

	moved := base()
	moved["clusterName"] = "tenant-b"
	checkErr(t, apply("tenant", moved), "spec.clusterName is immutable")

	inverted := base()
	inverted["minReplicas"] = int64(5)
	checkErr(t, apply("tenant", inverted), "spec.minReplicas must not exceed spec.maxReplicas")

	// A second manager that owns only labels coexists with the first.
	if err := apply("labeller", map[string]any{"clusterName": "tenant-a", "maxReplicas": int64(3), "labels": map[string]any{"tier": "web"}}); err != nil {
		t.Fatalf("apply by a second manager: %v", err)
	}
	got := &v1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "applied"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Labels["tier"] != "web" || got.Spec.Resources == nil {
		t.Fatalf("after two managers: labels=%v resources=%v", got.Spec.Labels, got.Spec.Resources)
	}
}
