package satellite_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodegroup-io/nodegroup-operator/internal/controller/satellite"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var (
	env *testenv.Env
	// writes counts every write request the controller sends (dry runs excluded).
	writes testenv.WriteCounter
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		return e.RunOperator(writes.NewClient, func(mgr ctrl.Manager) error {
			r := &satellite.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
			return r.Register(mgr)
		})
	})
}
