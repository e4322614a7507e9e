package nodegroup

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// The benchmarks run the controller's own Reconcile on one pool, with no API server:
// every read (the pool, its class, location, Cluster, control plane, Services and
// Secrets, the live objects apply compares with) is answered by internal/offline's
// Store, the kubectl plugin's in-memory store, in place of the manager's cache and API
// reader; every write is recorded by recordingClient and sent nowhere. What they
// measure is the operator's work per reconcile: resolve, policy, render, the apply
// decision and status, not the API server's or the network's. The store decodes JSON
// on every read, where the cache copies a decoded object.
//
//	go test -run '^$' -bench Reconcile -benchmem ./internal/controller/nodegroup/

// BenchmarkReconcile: a pool's first reconcile (nothing of it exists: its objects are
// created, its status written) and a steady-state one (nothing changed since the last:
// nothing may be sent, not even a dry run), for a Talos and a Kairos pool.
func BenchmarkReconcile(b *testing.B) {
	for _, class := range benchClasses {
		b.Run(class+"/first", func(b *testing.B) {
			store, ng := benchStore(b, class)
			c := &recordingClient{store: store}
			firstReconcile(b, c, ng)
			want := sent{}
			b.ReportAllocs()
			for b.Loop() {
				// A Reconciler of its own each time: nothing remembered, as after a restart.
				r := benchReconciler(c)
				reconcileOnce(b, r, ng)
				n := c.take()
				if want == (sent{}) {
					want = n
				}
				if n.dryRuns > 0 || n.writes == 0 || n != want {
					b.Fatalf("first reconcile: %d writes, %d dry runs (%s); want the same writes every time, and no dry run", n.writes, n.dryRuns, c.sentList())
				}
			}
		})
		b.Run(class+"/steady", func(b *testing.B) {
			r, ng := steadyReconciler(b, class)
			c := r.Client.(*recordingClient)
			b.ReportAllocs()
			for b.Loop() {
				reconcileOnce(b, r, ng)
				if n := c.take(); n != (sent{}) {
					b.Fatalf("steady state: %d writes, %d dry runs (%s); want none", n.writes, n.dryRuns, c.sentList())
				}
			}
		})
	}
}

// BenchmarkReconcileSteps splits a steady-state reconcile into its steps, each run on
// the last one's result: resolve, policy, render, and apply (the decision for every
// rendered object, then the look for superseded templates), which must send nothing.
func BenchmarkReconcileSteps(b *testing.B) {
	for _, class := range benchClasses {
		r, ng := steadyReconciler(b, class)
		c := r.Client.(*recordingClient)
		ctx := context.Background()
		in, err := r.resolver.Resolve(ctx, ng)
		if err != nil {
			b.Fatal(err)
		}
		out, err := render.Render(in)
		if err != nil {
			b.Fatal(err)
		}
		steps := []struct {
			name string
			run  func() error
		}{
			{"resolve", func() error { _, err := r.resolver.Resolve(ctx, ng); return err }},
			{"policy", func() error {
				v, err := r.policyViolations(ctx, ng, in)
				if err == nil && len(v) > 0 {
					err = fmt.Errorf("policy violations: %v", v)
				}
				return err
			}},
			{"render", func() error { _, err := render.Render(in); return err }},
			{"apply", func() error {
				if _, err := r.applyObjects(ctx, ng, out, newScope()); err != nil {
					return err
				}
				if n := c.take(); n != (sent{}) {
					return fmt.Errorf("steady state: %d writes, %d dry runs (%s); want none", n.writes, n.dryRuns, c.sentList())
				}
				return nil
			}},
		}
		for _, step := range steps {
			b.Run(class+"/"+step.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := step.run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// reconcileOnce runs Reconcile on ng and fails unless the pool came out rendered.
func reconcileOnce(b *testing.B, r *Reconciler, ng *v1.NodeGroup) {
	b.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ng)})
	if err != nil || !res.IsZero() {
		b.Fatalf("reconcile: %v, %+v", err, res)
	}
}

// benchReconciler is a Reconciler wired as Register wires one, reading c's store as
// both its cache and its API reader and writing with c.
func benchReconciler(c *recordingClient) *Reconciler {
	r := &Reconciler{
		Client: c, APIReader: c.store, Cache: c.store, Catalog: catalog.Default(),
		ManagementDNS:       types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"},
		ManagementDNSDomain: "cluster.local",
		Tenants:             tenant.NewStatus(),
	}
	r.wire(offline.Mapper())
	return r
}

// steadyReconciler is a Reconciler that has reconciled the pool of the class once: the
// store holds what that reconcile sent, as the API server would hold it (with a UID, a
// resourceVersion and generation 1, the generation a first apply leaves), and the pool
// with its finalizer and status.
func steadyReconciler(b *testing.B, class string) (*Reconciler, *v1.NodeGroup) {
	b.Helper()
	store, ng := benchStore(b, class)
	c := &recordingClient{store: store}
	r := benchReconciler(c)
	for i, obj := range firstReconcile(b, c, ng) {
		if obj.GetUID() == "" {
			obj.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
		}
		obj.SetResourceVersion("1")
		obj.SetGeneration(1)
		if err := store.AddObject(obj); err != nil {
			b.Fatal(err)
		}
	}
	return r, ng
}

// firstReconcile reconciles the pool once with a Reconciler of its own, fails unless
// the pool came out rendered, and returns copies of what the reconcile wrote, in order.
func firstReconcile(b *testing.B, c *recordingClient, ng *v1.NodeGroup) []client.Object {
	b.Helper()
	c.keep = true
	defer func() { c.keep, c.kept = false, nil }()
	reconcileOnce(b, benchReconciler(c), ng)
	c.take()
	rendered := false
	for _, obj := range c.kept {
		if pool, ok := obj.(*v1.NodeGroup); ok {
			rendered = meta.IsStatusConditionTrue(pool.Status.Conditions, v1.ConditionRendered)
		}
	}
	if !rendered {
		b.Fatalf("the pool was not rendered: %s", c.sentList())
	}
	return c.kept
}

// benchClasses are the classes of the pools benchmarked: the built-in Talos class, and
// a Kairos class with its own disk image (the catalog publishes no Kairos disk yet).
var benchClasses = []string{v1.BuiltinTalosClass, "kairos-v1-35"}

// benchStore holds a tenant namespace as the platform prepares it (testenv's tenant,
// with the Talos join identity, and ClusterIPs for its Services, which the API server
// would give them), the Kairos class, and one pool of class, 2 CPUs and 4 GiB,
// autoscaled between 1 and 3 machines.
func benchStore(b *testing.B, class string) (*offline.Store, *v1.NodeGroup) {
	b.Helper()
	const ns = "tenant-a"
	store := offline.NewStore(benchScheme)
	once, objs, err := testenv.TenantObjects(ns, testenv.TenantOptions{TalosSecret: true})
	if err != nil {
		b.Fatal(err)
	}
	ng := &v1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers", UID: "pool-uid", Generation: 1, ResourceVersion: "1"},
		Spec: v1.NodeGroupSpec{
			ClusterName: testenv.TenantCluster, NodeGroupClassName: class, LocationName: v1.BuiltinLocation,
			MinReplicas: 1, MaxReplicas: 3,
			Resources:        &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
			EphemeralStorage: resource.MustParse("20Gi"),
		},
	}
	kairos := &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "kairos-v1-35"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSKairos,
		Image: &v1.ClassImage{Reference: "registry.example.com/platform/kairos@sha256:" + strings.Repeat("cd", 32), KubernetesVersion: "v1.35.2"},
	}}
	for i, obj := range append(append(once, objs...), ng, kairos) {
		if svc, ok := obj.(*corev1.Service); ok {
			svc.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", 10+i)
			svc.ResourceVersion = "1"
		}
		if err := store.AddObject(obj); err != nil {
			b.Fatal(err)
		}
	}
	return store, ng
}

// benchScheme is the operator's scheme, made once.
var benchScheme = scheme.New()

// recordingClient reads from an offline.Store and records the writes it is given
// without sending them, or changing the store: it is no API server, and a benchmark
// that needed one to answer a write (a dry run, say) fails on the dry run instead. A
// call it does not implement panics on the nil client.Client.
type recordingClient struct {
	client.Client
	store *offline.Store
	// keep: copies of the objects written are kept in kept, in order.
	keep bool
	kept []client.Object
	sent sent
	// last are the requests since the last take, taken those of the last take.
	last, taken []request
}

type request struct {
	verb string
	obj  client.Object
}

// sent counts requests: writes, and dry runs apart.
type sent struct{ writes, dryRuns int }

func (c *recordingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.store.Get(ctx, key, obj, opts...)
}

func (c *recordingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.store.List(ctx, list, opts...)
}

func (c *recordingClient) Scheme() *runtime.Scheme { return benchScheme }

func (c *recordingClient) Create(_ context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.record("create", obj, (&client.CreateOptions{}).ApplyOptions(opts).DryRun)
	return nil
}

func (c *recordingClient) Update(_ context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.record("update", obj, (&client.UpdateOptions{}).ApplyOptions(opts).DryRun)
	return nil
}

func (c *recordingClient) Patch(_ context.Context, obj client.Object, _ client.Patch, opts ...client.PatchOption) error {
	c.record("patch", obj, (&client.PatchOptions{}).ApplyOptions(opts).DryRun)
	return nil
}

func (c *recordingClient) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.record("delete", obj, (&client.DeleteOptions{}).ApplyOptions(opts).DryRun)
	return nil
}

func (c *recordingClient) Status() client.SubResourceWriter { return statusWriter{c: c} }

func (c *recordingClient) record(verb string, obj client.Object, dryRun []string) {
	if len(dryRun) > 0 {
		c.sent.dryRuns++
		verb += " (dry run)"
	} else {
		c.sent.writes++
	}
	c.last = append(c.last, request{verb, obj})
	if c.keep && len(dryRun) == 0 {
		c.kept = append(c.kept, obj.DeepCopyObject().(client.Object))
	}
}

// take returns the count of requests since the last take; sentList names them until
// the next take. (The two slices trade places, so recording allocates nothing once
// they have grown.)
func (c *recordingClient) take() sent {
	n := c.sent
	c.sent = sent{}
	c.taken, c.last = c.last, c.taken[:0]
	return n
}

// sentList names the requests of the last take.
func (c *recordingClient) sentList() string {
	names := make([]string, len(c.taken))
	for i, r := range c.taken {
		names[i] = fmt.Sprintf("%s %T %s", r.verb, r.obj, r.obj.GetName())
	}
	return strings.Join(names, ", ")
}

// statusWriter records status writes as writes of the object.
type statusWriter struct {
	client.SubResourceWriter
	c *recordingClient
}

func (w statusWriter) Update(_ context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	w.c.record("update status", obj, (&client.SubResourceUpdateOptions{}).ApplyOptions(opts).DryRun)
	return nil
}

func (w statusWriter) Patch(_ context.Context, obj client.Object, _ client.Patch, opts ...client.SubResourcePatchOption) error {
	w.c.record("patch status", obj, (&client.SubResourcePatchOptions{}).ApplyOptions(opts).DryRun)
	return nil
}
