package customresource_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/rulecases"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, false, func(e *testenv.Env) error { env = e; return nil })
}

// sameVerdict fails unless the offline error and the API server's are both nil, or both
// the same message containing want.
func sameVerdict(t *testing.T, offline, server error, want string) {
	t.Helper()
	msg := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	if msg(offline) != msg(server) {
		t.Fatalf("offline and the API server differ:\noffline: %s\nserver:  %s", msg(offline), msg(server))
	}
	if (want == "") != (server == nil) || !strings.Contains(msg(server), want) {
		t.Fatalf("verdict %q, want a refusal containing %q (empty: admitted)", msg(server), want)
	}
}

// TestCreateAsTheAPIServer sends every case of the CRD's rule tests to the API server
// (a dry run) and to the offline kind: same verdict, same message.
func TestCreateAsTheAPIServer(t *testing.T) {
	kind, err := customresource.NodeGroup()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range rulecases.NodeGroups() {
		t.Run(tc.Name, func(t *testing.T) {
			serverErr := env.Client.Create(context.Background(), rulecases.AsSent(t, tc.Obj), client.DryRunAll)
			sameVerdict(t, kind.Create(context.Background(), rulecases.AsSent(t, tc.Obj)), serverErr, tc.WantErr)
		})
	}
}

// TestClassesAndLocationsAsTheAPIServer sends every case of the NodeGroupClass and
// Location CRDs' rule tests to the API server (a dry run) and through the chart's kinds'
// Admitter, as the plugin reads a class or location file: same verdict, same message.
func TestClassesAndLocationsAsTheAPIServer(t *testing.T) {
	kinds, err := customresource.Chart()
	if err != nil {
		t.Fatal(err)
	}
	admit := customresource.Admitter(context.Background(), kinds)
	for _, tc := range append(rulecases.Classes(), rulecases.Locations()...) {
		t.Run(tc.Name, func(t *testing.T) {
			serverErr := env.Client.Create(context.Background(), rulecases.AsSent(t, tc.Obj), client.DryRunAll)
			sameVerdict(t, admit(rulecases.AsSent(t, tc.Obj)), serverErr, tc.WantErr)
		})
	}
}

// TestDefaultsAsTheAPIServer: what the API server stores for a pool that leaves every
// defaulted field out is what the offline kind makes of it.
func TestDefaultsAsTheAPIServer(t *testing.T) {
	kind, err := customresource.NodeGroup()
	if err != nil {
		t.Fatal(err)
	}
	sparse := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "nodegroup.io/v1alpha1", "kind": "NodeGroup",
			"metadata": map[string]any{"name": "sparse", "namespace": "default"},
			"spec": map[string]any{"clusterName": "tenant-a", "maxReplicas": int64(2),
				"resources": map[string]any{"cpu": int64(2), "memory": "4Gi"},
				"gpus":      []any{map[string]any{"deviceName": "nvidia.com/GA102GL_A10"}}},
		}}
	}
	stored := sparse()
	if err := env.Client.Create(context.Background(), stored, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	offline := sparse()
	if err := kind.Create(context.Background(), offline); err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedMap(offline.Object, "spec")
	want, _, _ := unstructured.NestedMap(stored.Object, "spec")
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("offline spec:\n%s\nthe API server's:\n%s", gotJSON, wantJSON)
	}
}

// TestUpdateAsTheAPIServer: the transition rules and the schema on an update, with the
// stored object as the old one.
func TestUpdateAsTheAPIServer(t *testing.T) {
	kind, err := customresource.NodeGroup()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stored := rulecases.AsSent(t, rulecases.Pool("updated", nil))
	if err := env.Client.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), stored) })
	for _, tc := range []struct {
		name   string
		change func(*v1.NodeGroupSpec)
		want   string
	}{
		{"grown", func(s *v1.NodeGroupSpec) { s.MaxReplicas = 10 }, ""},
		{"moved to another cluster", func(s *v1.NodeGroupSpec) { s.ClusterName = "tenant-b" }, "spec.clusterName is immutable"},
		{"shrunk to nothing", func(s *v1.NodeGroupSpec) { s.MaxReplicas = 0 }, "spec.maxReplicas in body should be greater than or equal to 1"},
		{"inverted", func(s *v1.NodeGroupSpec) { s.MinReplicas = 5 }, "spec.minReplicas must not exceed spec.maxReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := rulecases.Pool("updated", tc.change)
			toServer := rulecases.AsSent(t, changed)
			toServer.SetResourceVersion(stored.GetResourceVersion())
			serverErr := env.Client.Update(ctx, toServer, client.DryRunAll)
			toOffline := rulecases.AsSent(t, changed)
			toOffline.SetResourceVersion(stored.GetResourceVersion())
			sameVerdict(t, kind.Update(ctx, toOffline, stored.DeepCopy()), serverErr, tc.want)
		})
	}
}
