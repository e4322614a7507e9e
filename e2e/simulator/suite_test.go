package simulator_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

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
		return e.RunManager(ctrl.Options{NewClient: writes.NewClient}, func(mgr ctrl.Manager) error {
			return simulator.Add(mgr, simulator.Options{Kubeconfig: e.KubeConfig()})
		})
	})
}
