package controlplanedns_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

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

// reconciles is how many reconciles the controller finished (any result), from
// controller-runtime's own counter.
func reconciles() float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		panic(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == reconciler.Name() {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
