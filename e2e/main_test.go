//go:build e2e

// The end-to-end suite: the operator binary as the chart runs it (internal/localrun),
// the real Cluster API core manager with its webhooks, kube-controller-manager,
// kube-scheduler and kwok, and the provider simulator, all against one real
// kube-apiserver (see e2e/framework).
//
// Run with `make e2e`. Each scenario works in its own namespace and asserts on the live
// objects; on failure the environment's logs stay in the folder the suite prints.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	start := time.Now()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	var err error
	env, err = framework.Start(context.Background(), framework.Options{Log: logf})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: e2e environment:", err)
		os.Exit(1)
	}
	logf("e2e: environment up in %s; logs in %s", time.Since(start).Round(time.Second), env.Work)
	code := m.Run()
	env.Stop()
	if code == 0 {
		_ = os.RemoveAll(env.Work)
	} else {
		logf("e2e: failed; the processes' logs are in %s", env.Work)
	}
	os.Exit(code)
}
