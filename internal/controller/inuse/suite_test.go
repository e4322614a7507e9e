package inuse_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodegroup-io/nodegroup-operator/internal/controller/inuse"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var (
	env *testenv.Env
	// reconciler is the controller under test, running alone in a real manager.
	reconciler *inuse.Reconciler
	// writes counts the write requests the controller sends, by kind and name.
	writes = &writeLog{n: map[string]int{}}
)

func TestMain(m *testing.M) {
	testenv.Main(m, false, func(e *testenv.Env) error {
		env = e
		// The manager stops before the API server: a client still watching slows its
		// shutdown.
		ctx, cancel := context.WithCancel(context.Background())
		stopped, err := startManager(ctx)
		e.BeforeStop(func() {
			cancel()
			if stopped != nil {
				<-stopped
			}
		})
		return err
	})
}

// startManager starts the manager with the controller; the channel closes when it stops.
func startManager(ctx context.Context) (<-chan struct{}, error) {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, countWrites()), nil
		},
	})
	if err != nil {
		return nil, err
	}
	// As when the nodegroup controller registered the indexes first: Register must
	// accept them.
	if err := inuse.RegisterIndexes(mgr); err != nil {
		return nil, err
	}
	reconciler = &inuse.Reconciler{Client: mgr.GetClient()}
	if err := reconciler.Register(mgr); err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return stopped, fmt.Errorf("cache did not sync")
	}
	return stopped, nil
}

// writeLog counts writes by "Kind name" and "delete" for every Delete.
type writeLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *writeLog) add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n[key]++
}

func (w *writeLog) count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[key]
}

func writeKey(obj client.Object) string {
	return fmt.Sprintf("%T %s", obj, obj.GetName())
}

// countWrites counts create, update, patch and delete requests of the manager's client.
func countWrites() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes.add(writeKey(obj))
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			writes.add(writeKey(obj))
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			writes.add(writeKey(obj))
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes.add(writeKey(obj))
			writes.add("delete")
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			writes.add("delete")
			return c.DeleteAllOf(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes.add(writeKey(obj))
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes.add(writeKey(obj))
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}
}
