package inuse_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodegroup-io/nodegroup-operator/internal/controller/inuse"
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
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		return e.RunOperator(countingClient, func(mgr ctrl.Manager) error {
			reconciler = &inuse.Reconciler{Client: mgr.GetClient()}
			return reconciler.Register(mgr)
		})
	})
}

// countingClient is the manager's client, its writes counted (countWrites).
func countingClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.NewWithWatch(cfg, opts)
	if err != nil {
		return nil, err
	}
	return interceptor.NewClient(c, countWrites()), nil
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
