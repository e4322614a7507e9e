package nodegroup_test

import (
	"flag"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
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
	// The benchmarks (bench_test.go) read from an in-memory store: run on their own
	// (-run '^$' -bench ...) they start no API server.
	flag.Parse()
	if flag.Lookup("test.run").Value.String() == "^$" && flag.Lookup("test.bench").Value.String() != "" {
		os.Exit(m.Run())
	}
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		return e.RunOperator(writes.NewClient, func(mgr ctrl.Manager) error {
			reconciler = &nodegroup.Reconciler{
				Client:              mgr.GetClient(),
				APIReader:           mgr.GetAPIReader(),
				Catalog:             catalog.Default(),
				ManagementDNS:       types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"},
				ManagementDNSDomain: "cluster.local",
			}
			return reconciler.Register(mgr, 2)
		})
	})
}
