// Command scale measures the operator against the API server's own limit, on a local
// control plane (etcd and kube-apiserver from hack/testbin.sh's cache, with an audit log).
//
// It creates N tenant namespaces, each with a Cluster, its KamajiControlPlane and P
// pools (Talos and Kairos), and then measures, in one run:
//
//   - the limit: a bare client creates exactly the objects the pools need (the same
//     bodies the operator sends, rendered by the operator's own packages) with the
//     operator's concurrency; the objects are deleted again afterwards;
//   - cold convergence: the operator binary, run as the chart's Deployment runs it (its
//     arguments and environment, the webhook on) as its ServiceAccount, from its
//     start until every pool is Rendered at its generation, its objects present;
//   - steady state: the operator's writes over a window of K full resyncs, counted by
//     the API server (its audit log), and the reconciles that ran (its metrics);
//   - a change wave: a field that changes both templates is bumped on a fraction of the
//     pools; the time until their new templates are in place, and the writes that
//     reached pools that were not bumped;
//   - churn: after the steady state, an autoscaler-like client sets the replicas of a
//     fraction of the autoscaled pools through their MachineDeployments' scale
//     subresource every few seconds, within each pool's range, while a Cluster API-like
//     writer reports their machines in the MachineDeployments' status; the operator's
//     writes by kind (no template or MachineDeployment write, at most one status write
//     per pool per change), its work queue's depth and latency (its metrics), and its
//     resident memory against the steady state's;
//   - the operator's peak RSS and CPU seconds, and its API requests by verb per phase.
//
// Absolute times on a shared machine are noisy; the ratio of cold convergence to the
// bare client's time, measured minutes apart on the same control plane, is the figure.
//
// Usage: go run ./hack/scale [-namespaces 1000] [-pools 5] [-steady 5m] [-resyncs 5]
// [-churn 5m] [-churn-fraction 0.1] [-churn-interval 3s] [-out results]
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
)

func main() {
	var cfg Config
	flag.IntVar(&cfg.Namespaces, "namespaces", 1000, "tenant namespaces, each with a Cluster and a KamajiControlPlane")
	flag.IntVar(&cfg.PoolsPerNamespace, "pools", 5, "pools per namespace (even ones Talos, odd ones Kairos)")
	flag.IntVar(&cfg.Concurrency, "concurrency", 0, "the operator's --concurrency, and the bare client's (0: the operator's default)")
	flag.BoolVar(&cfg.NoAPIPriority, "no-api-priority", false, "install the chart with apiPriority.enabled=false: no FlowSchemas, the operator's requests in workload-low")
	flag.DurationVar(&cfg.Steady, "steady", 5*time.Minute, "steady-state window")
	flag.IntVar(&cfg.Resyncs, "resyncs", 5, "full resyncs in the steady-state window (the operator's --sync-period is the window divided by this)")
	flag.Float64Var(&cfg.WaveFraction, "wave", 0.1, "fraction of the pools the change wave bumps")
	flag.DurationVar(&cfg.Churn, "churn", 5*time.Minute, "churn after the steady state: an autoscaler-like client scales pools while Cluster API-like status follows (0: no churn)")
	flag.Float64Var(&cfg.ChurnFraction, "churn-fraction", 0.1, "fraction of the autoscaled pools the churn scales")
	flag.DurationVar(&cfg.ChurnInterval, "churn-interval", 3*time.Second, "how often the churn scales each of its pools")
	flag.DurationVar(&cfg.Timeout, "timeout", time.Hour, "longest wait for a convergence")
	out := flag.String("out", "results", "folder of the results (text and JSON)")
	profile := flag.Bool("pprof", false, "save pprof profiles into the results folder: CPU profiles of the API server (bare, cold, restart, bare-again) and the operator (cold, restart), heap profiles of the operator (cold, steady, churn)")
	keepWork := flag.Bool("keep", false, "keep the work folder (operator binary, log, audit log)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stamp := time.Now().UTC().Format("20060102-150405")
	base := filepath.Join(*out, fmt.Sprintf("scale-%dx%d-%s", cfg.Namespaces, cfg.PoolsPerNamespace, stamp))
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	if *profile {
		cfg.Profiles = base + "-pprof"
		if err := os.MkdirAll(cfg.Profiles, 0o755); err != nil {
			fail(err)
		}
	}
	work, err := os.MkdirTemp("", "nodegroup-scale-")
	if err != nil {
		fail(err)
	}
	cfg.Work = work
	cfg.Log = os.Stderr

	res, runErr := Run(ctx, cfg)
	if !*keepWork && runErr == nil {
		_ = os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, "work folder kept:", work)
	}
	if res != nil {
		text := res.Table()
		fmt.Print(text)
		if err := res.Write(base); err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "results: %s.txt, %s.json\n", base, base)
	}
	if runErr != nil {
		fail(runErr)
	}
	if problems := res.Problems(); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "FAIL:", p)
		}
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scale:", err)
	os.Exit(1)
}
