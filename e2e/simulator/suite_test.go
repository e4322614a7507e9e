package simulator_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var (
	// env is the management cluster: Cluster API's objects and the providers' (envtest,
	// without Cluster API's manager: the tests play it by hand).
	env *testenv.Env
	// tenantCluster is the tenant cluster of every Cluster of the tests: its own etcd,
	// kube-apiserver (bootstrap tokens, Node authorization, NodeRestriction, an audit
	// log) and the controllers a join needs, where the simulated kubelets register.
	tenantCluster *framework.Tenant
	// writes counts every write the simulator sends to the management cluster.
	writes testenv.WriteCounter
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		assets, err := testenv.Assets()
		if err != nil {
			return err
		}
		machines, err := framework.ProxmoxMachineCRD()
		if err != nil {
			return err
		}
		if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{machines}}); err != nil {
			return err
		}
		work, err := os.MkdirTemp("", "simulator-test-")
		if err != nil {
			return err
		}
		tenantCluster, err = framework.StartTenant(context.Background(), framework.TenantOptions{
			Name: "tenant", Work: work, Assets: assets,
			Controllers: framework.JoinControllers, Audit: true,
		})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "tenant cluster:", tenantCluster.Server, "logs in", work)
		if err := e.RunManager(ctrl.Options{NewClient: writes.NewClient}, func(mgr ctrl.Manager) error {
			return simulator.Add(mgr, simulator.Options{Tenants: func(client.ObjectKey) (simulator.Tenant, error) {
				return tenantCluster.Simulated(), nil
			}})
		}); err != nil {
			tenantCluster.Stop()
			return err
		}
		// After the manager's own stop (registered by RunManager), before the management
		// API server's. The logs stay when a test failed.
		e.BeforeStop(func() {
			tenantCluster.Stop()
			if failed.Load() {
				fmt.Fprintln(os.Stderr, "a test failed; the tenant cluster's logs are in", work)
				return
			}
			_ = os.RemoveAll(work)
		})
		return nil
	})
}
