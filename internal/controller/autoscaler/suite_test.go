package autoscaler_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	autoscalerctl "github.com/nodegroup-io/nodegroup-operator/internal/controller/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// The autoscaler controller runs as the operator runs it (cmd/nodegroup-operator): in
// one manager with the pool controller, whose MachineDeployments name the machine
// template kinds the autoscaler's Role must grant, and which reports the autoscaler's
// state on the pools (AutoscalerReady) through the shared tenant.Status, and with the
// control-plane DNS controller; with the operator's manager options and field indexes
// (internal/operator): its cache, and Secrets read uncached. No Cluster API, Kamaji or
// kube-controller-manager runs: nothing garbage-collects, and no Deployment controller
// reports availability.

var (
	env *testenv.Env
	// reconciler is the autoscaler controller under test, running in the manager.
	reconciler *autoscalerctl.Reconciler
	// status is what the autoscaler controller reports and the pool controller reads.
	status = tenant.NewStatus()
	// writes counts every write request the manager's client sends (both controllers;
	// dry runs excluded).
	writes testenv.WriteCounter
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		return e.RunOperator(writes.NewClient, func(mgr ctrl.Manager) error {
			pools := &nodegroup.Reconciler{
				Client:              mgr.GetClient(),
				APIReader:           mgr.GetAPIReader(),
				Catalog:             catalog.Default(),
				ManagementDNS:       types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"},
				ManagementDNSDomain: "cluster.local",
				Tenants:             status,
			}
			if err := pools.Register(mgr, 2); err != nil {
				return err
			}
			reconciler = &autoscalerctl.Reconciler{
				Client:    mgr.GetClient(),
				APIReader: mgr.GetAPIReader(),
				Settings:  autoscaler.DefaultSettings(),
				Catalog:   catalog.Default(),
				Status:    status,
			}
			if err := reconciler.Register(mgr); err != nil {
				return err
			}
			statusReader := &autoscalerctl.StatusReader{Client: mgr.GetClient(), Status: status, Poll: time.Second}
			if err := statusReader.Register(mgr); err != nil {
				return err
			}
			dns := &controlplanedns.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
			return dns.Register(mgr)
		})
	})
}
