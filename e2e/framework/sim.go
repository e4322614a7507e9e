package framework

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// simulator runs the provider simulator in this process, as the control plane's admin,
// logging to <work>/simulator.log.
func (e *Env) simulator(context.Context) error {
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if err := simulator.Add(mgr, simulator.Options{Kubeconfig: e.cp.KubeConfig()}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.stopSim = func() {
		cancel()
		<-done
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the simulator's cache did not sync")
	}
	return nil
}
