package simulator_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var (
	env *testenv.Env
	// writes counts every write the simulator sends.
	writes testenv.WriteCounter
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		ctx, cancel := context.WithCancel(context.Background())
		e.BeforeStop(cancel)
		return startSimulator(ctx)
	})
}

func startSimulator(ctx context.Context) error {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:    testenv.Scheme(),
		Metrics:   metricsserver.Options{BindAddress: "0"},
		NewClient: writes.NewClient,
	})
	if err != nil {
		return err
	}
	if err := simulator.Add(mgr, simulator.Options{Kubeconfig: env.KubeConfig()}); err != nil {
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
