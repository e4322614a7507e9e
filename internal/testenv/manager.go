package testenv

import (
	"context"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
)

// RunOperator runs a manager of the operator's controllers as cmd/nodegroup-operator
// makes it, with the operator's manager options and field indexes (internal/operator):
// setup registers the controllers under test, and newClient, when not nil, makes the
// manager's client (a write counter, an interceptor).
func (e *Env) RunOperator(newClient client.NewClientFunc, setup func(ctrl.Manager) error) error {
	opts := operator.ManagerOptions()
	opts.NewClient = newClient
	return e.RunManager(opts, func(mgr ctrl.Manager) error {
		if err := operator.RegisterIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return err
		}
		return setup(mgr)
	})
}

// RunManager runs a controller-runtime manager against the control plane until it stops:
// setup registers the controllers under test, and RunManager returns once the manager's
// cache has synced. opts default to this package's Scheme and no metrics server.
func (e *Env) RunManager(opts ctrl.Options, setup func(ctrl.Manager) error) error {
	if opts.Scheme == nil {
		opts.Scheme = Scheme()
	}
	if opts.Metrics.BindAddress == "" {
		opts.Metrics.BindAddress = "0"
	}
	mgr, err := ctrl.NewManager(e.Config, opts)
	if err != nil {
		return err
	}
	if err := setup(mgr); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	// A manager still watching slows the API server's shutdown: it stops first.
	e.BeforeStop(cancel)
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the manager's cache did not sync")
	}
	return nil
}
