package controlplanedns_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var (
	env *testenv.Env
	// reconciler is the controller under test, running alone in a real manager.
	reconciler *controlplanedns.Reconciler
	// writes counts every write request the controller sends (dry runs excluded).
	writes testenv.WriteCounter
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		return e.RunOperator(writes.NewClient, func(mgr ctrl.Manager) error {
			reconciler = &controlplanedns.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
			return reconciler.Register(mgr)
		})
	})
}

// reconciles is how many reconciles the controller finished.
func reconciles() float64 { return testenv.Reconciles(reconciler.Name()) }
