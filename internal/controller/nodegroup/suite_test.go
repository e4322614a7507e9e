package nodegroup_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
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
	writes testenv.WriteCounter
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
		Scheme:    scheme.New(),
		Metrics:   metricsserver.Options{BindAddress: "0"},
		Cache:     nodegroup.CacheOptions(),
		NewClient: writes.NewClient,
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
