// Command envctl keeps the end-to-end environment (e2e/framework) running for the bats
// suite and for a person exploring it: it starts everything, writes <work>/env (shell
// variables: KUBECONFIG, the management cluster's admin kubeconfig; TENANT_KUBECONFIG,
// the default tenant cluster's, where the Nodes are; E2E_OPERATOR_LOG; and PATH with
// kubectl), and runs until SIGINT or SIGTERM.
//
// Usage: go run ./e2e/envctl -work DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
)

func main() {
	work := flag.String("work", "", "folder for the environment's logs and kubeconfig (created if missing)")
	flag.Parse()
	if *work == "" {
		fmt.Fprintln(os.Stderr, "envctl: -work is required")
		os.Exit(2)
	}
	if err := run(*work); err != nil {
		fmt.Fprintln(os.Stderr, "envctl:", err)
		os.Exit(1)
	}
}

func run(work string) error {
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	env, err := framework.Start(ctx, framework.Options{Work: work, Log: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}})
	if err != nil {
		return err
	}
	defer env.Stop()
	vars := fmt.Sprintf("export KUBECONFIG=%q\nexport TENANT_KUBECONFIG=%q\nexport PATH=%q:\"$PATH\"\nexport E2E_OPERATOR_LOG=%q\n",
		env.Kubeconfig, env.Tenant.KubeconfigPath, env.Bin, env.OperatorLog())
	// Written last and renamed into place: its presence means the environment is up.
	tmp := filepath.Join(work, "env.tmp")
	if err := os.WriteFile(tmp, []byte(vars), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(work, "env")); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "envctl: environment up in %s; source %s\n", time.Since(start).Round(time.Second), filepath.Join(work, "env"))
	<-ctx.Done()
	return nil
}
