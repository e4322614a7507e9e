package nodegroup_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var (
	env *testenv.Env
	// reconciler is the controller under test, running in a real manager.
	reconciler *nodegroup.Reconciler
	// writes counts every write request the controller sends (dry runs excluded).
	writes atomic.Int64
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		ctx, cancel := context.WithCancel(context.Background())
		e.BeforeStop(cancel)
		return startManager(ctx)
	})
}

func startManager(ctx context.Context) error {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   nodegroup.CacheOptions(),
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, countWrites()), nil
		},
	})
	if err != nil {
		return err
	}
	reconciler = &nodegroup.Reconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Catalog:             catalog.Default(),
		ManagementDNS:       types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"},
		ManagementDNSDomain: "cluster.local",
	}
	if err := reconciler.Register(mgr, 2); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cache did not sync")
	}
	return nil
}

// countWrites counts create, update, patch and delete requests, not dry runs.
func countWrites() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if !isDryRun(opts) {
				writes.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			writes.Add(1)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			o := &client.PatchOptions{}
			o.ApplyOptions(opts)
			if len(o.DryRun) == 0 {
				writes.Add(1)
			}
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes.Add(1)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes.Add(1)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}
}

func isDryRun(opts []client.CreateOption) bool {
	o := &client.CreateOptions{}
	o.ApplyOptions(opts)
	return len(o.DryRun) > 0
}
