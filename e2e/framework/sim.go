package framework

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
)

// simulator runs the provider simulator in this process, as the control plane's admin,
// until the control plane stops.
func (e *Env) simulator(context.Context) error {
	return e.cp.RunManager(ctrl.Options{HealthProbeBindAddress: "0"}, func(mgr ctrl.Manager) error {
		return simulator.Add(mgr, simulator.Options{Kubeconfig: e.cp.KubeConfig()})
	})
}
