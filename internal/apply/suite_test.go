package apply_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// env is the real kube-apiserver and etcd, with our CRDs and the upstream Cluster API,
// CAPK and Talos CRDs, that every test in this package talks to.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error { env = e; return nil })
}

// write is one write request that reached the API server.
type write struct {
	verb   string // create, patch, update, delete
	kind   string
	name   string
	dryRun bool
	// body is the request body of a create or patch, as JSON.
	body map[string]any
}

// recorder sees every write a client sends, on its way to the real server. It is how
// the tests know what apply sent, independently of apply's own Stats.
type recorder struct {
	mu     sync.Mutex
	writes []write
}

func (r *recorder) add(w write) {
	r.mu.Lock()
	r.writes = append(r.writes, w)
	r.mu.Unlock()
}

// take returns the writes recorded since the last take.
func (r *recorder) take() []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.writes
	r.writes = nil
	return out
}

func kindOf(obj client.Object) string { return obj.GetObjectKind().GroupVersionKind().Kind }

// newClients returns a plain client for test setup and inspection, and a recording one
// for the Applier under test; both talk to the same real server.
func newClients(t *testing.T) (client.Client, client.Client, *recorder) {
	t.Helper()
	plain, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	recording := interceptor.NewClient(plain, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			o := (&client.CreateOptions{}).ApplyOptions(opts)
			rec.add(write{verb: "create", kind: kindOf(obj), name: obj.GetName(), dryRun: len(o.DryRun) > 0, body: jsonOf(t, obj)})
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			o := (&client.PatchOptions{}).ApplyOptions(opts)
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			var body map[string]any
			if err := json.Unmarshal(data, &body); err != nil {
				t.Errorf("patch body is not JSON: %v", err)
			}
			rec.add(write{verb: "patch", kind: kindOf(obj), name: obj.GetName(), dryRun: len(o.DryRun) > 0, body: body})
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			rec.add(write{verb: "apply"})
			return c.Apply(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			rec.add(write{verb: "update", kind: kindOf(obj), name: obj.GetName()})
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			o := (&client.DeleteOptions{}).ApplyOptions(opts)
			rec.add(write{verb: "delete", kind: kindOf(obj), name: obj.GetName(), dryRun: len(o.DryRun) > 0})
			return c.Delete(ctx, obj, opts...)
		},
	})
	return plain, recording, rec
}

func jsonOf(t *testing.T, obj any) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// newNamespace gives each test its own namespace.
func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apply-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newNodeGroup creates the NodeGroup that owns a test's objects.
func newNodeGroup(t *testing.T, c client.Client, ns, name string) *v1alpha1.NodeGroup {
	t.Helper()
	ng := &v1alpha1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.NodeGroupSpec{
			ClusterName:  "tenant",
			MinReplicas:  1,
			MaxReplicas:  5,
			InstanceType: "u1.medium",
		},
	}
	if err := c.Create(t.Context(), ng); err != nil {
		t.Fatal(err)
	}
	return ng
}
