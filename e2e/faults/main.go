//go:build e2e

// Command faults kills the operator at seeded moments and takes its API servers away,
// and checks after each recovery that nothing was lost (make faults; e2e/README.md,
// Faults).
//
// It runs the e2e environment (e2e/framework) with the operator reaching the
// management API server through a proxy that counts its writes. The run is drawn from
// the seed (plan.go): a cold start of the pools, a change wave, a deletion, token
// rotations, and autoscaler-like scale-ups and scale-downs, cut into steps, one kill
// each. A step hands the operator its work, the operator is killed (SIGKILL) once it has
// sent the step's drawn number of writes, and is started again at once, as a Pod's
// container is; the harness then waits until every pool is where it was asked to be
// and checks the invariants (invariants.go) on the live objects. Then the outages
// (outage.go): the management API server stopped, then answering 429 and 500, then a
// tenant API server stopped, each during a change wave.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
)

func main() {
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the run: the same seed and sizes draw the same run")
	kills := flag.Int("kills", 50, "kills of the operator, spread over the phases")
	pools := flag.Int("pools", 200, "pools of the cold start")
	namespaces := flag.Int("namespaces", 20, "tenant namespaces (one Cluster each) the pools spread over")
	machinePools := flag.Int("machine-pools", 20, "pools fixed at one machine; the others are autoscaled 0..2 and start at zero")
	wavePercent := flag.Int("wave", 20, "percent of the pools the change wave changes")
	deleted := flag.Int("delete", 50, "pools deleted")
	outage := flag.Duration("outage", time.Minute, "how long each outage lasts; 0 skips them")
	converge := flag.Duration("converge", 5*time.Minute, "how long a recovery may take before what still moves is reported as broken")
	keep := flag.Bool("keep", false, "keep the processes' logs when nothing broke too")
	short := flag.Bool("short", false, "the CI run: 10 kills, 40 pools in 4 namespaces, 4 with machines, 10 deleted, 1-minute outages (flags given after it win)")
	flag.Parse()
	if *short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]string{"kills": "10", "pools": "40", "namespaces": "4", "machine-pools": "4", "delete": "10"} {
			if !set[name] {
				_ = flag.Set(name, v)
			}
		}
	}
	s := sizes{kills: *kills, pools: *pools, namespaces: *namespaces, machinePools: *machinePools, wavePercent: *wavePercent, deleted: *deleted}
	if err := run(*seed, s, *outage, *converge, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

// kill is one kill of the run, for the report.
type kill struct {
	step int
	kind kind
	// planned is the drawn count of writes; writes those sent when the kill came (a
	// step whose work needed fewer is killed once the operator goes quiet).
	planned, writes int64
	took            time.Duration
	breaks          []string
}

func run(seed uint64, s sizes, outage, converge time.Duration, keep bool) error {
	p, err := newPlan(seed, s)
	if err != nil {
		return err
	}
	ctx := context.Background()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	fmt.Printf("faults: seed %d; %d pools in %d namespaces (%d fixed at one machine, the rest autoscaled 0..2 at zero), %d kills\n",
		seed, s.pools, s.namespaces, s.machinePools, s.kills)
	start := time.Now()
	env, err := framework.Start(ctx, framework.Options{Log: logf, OperatorProxy: true})
	if err != nil {
		return err
	}
	failed := true
	defer func() {
		env.Stop()
		if failed || keep {
			logf("faults: the processes' logs are in %s", env.Work)
		} else {
			_ = os.RemoveAll(env.Work)
		}
	}()
	logf("faults: environment up in %s; logs in %s", time.Since(start).Round(time.Second), env.Work)
	// Interrupted: stop every process the environment started, keeping the logs.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupted
		logf("faults: interrupted; the processes' logs are in %s", env.Work)
		env.Stop()
		os.Exit(130)
	}()
	w := newWorld(env, p)
	if err := w.setUp(ctx, s.namespaces); err != nil {
		return err
	}
	var report []kill
	for i, st := range p.steps {
		k, err := w.killDuring(ctx, i, st, converge)
		if err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, st.kind, err)
		}
		fmt.Printf("kill %2d  %-14s  %2d pools  after %3d writes (drawn %3d)  converged in %5.1fs  %d broken\n",
			i+1, k.kind, len(st.pools), k.writes, k.planned, k.took.Seconds(), len(k.breaks))
		for _, b := range k.breaks {
			fmt.Printf("         BROKEN: %s\n", b)
		}
		report = append(report, k)
	}
	var outages []outcome
	if outage > 0 {
		if outages, err = w.outages(ctx, outage, converge); err != nil {
			return err
		}
	}
	broken := summarize(seed, report, outages)
	fmt.Printf("faults: done in %s\n", time.Since(start).Round(time.Second))
	if broken > 0 {
		return fmt.Errorf("%d invariants or outage checks broke (seed %d)", broken, seed)
	}
	failed = false
	return nil
}

// killDuring hands the operator the step's work, kills it after the step's drawn count
// of writes (or once it is quiet for 5 s, if the work needed fewer), starts it again and
// waits for the pools to converge, checking the invariants.
func (w *world) killDuring(ctx context.Context, i int, st step, converge time.Duration) (kill, error) {
	k := kill{step: i + 1, kind: st.kind, planned: st.killAfter}
	proxy := w.env.Proxy
	base := proxy.Writes()
	done := make(chan int64, 1)
	var once sync.Once
	proxy.AfterWrite(func(n int64) {
		if n-base >= st.killAfter {
			once.Do(func() {
				w.env.KillOperator()
				done <- n - base
			})
		}
	})
	// The step's writes go on while the operator is down: a create or change waits for
	// its webhook, as any client retries it.
	started := make(chan error, 1)
	go func() { started <- w.start(ctx, st) }()
	last, lastChange := base, time.Now()
wait:
	for {
		select {
		case k.writes = <-done:
			break wait
		case <-time.After(200 * time.Millisecond):
			if n := proxy.Writes(); n != last {
				last, lastChange = n, time.Now()
			} else if time.Since(lastChange) > 5*time.Second {
				once.Do(func() {
					w.env.KillOperator()
					done <- proxy.Writes() - base
				})
			}
		}
	}
	proxy.AfterWrite(nil)
	killed := time.Now()
	if err := w.env.StartOperator(ctx); err != nil {
		return k, fmt.Errorf("starting the operator again: %w", err)
	}
	if err := <-started; err != nil {
		return k, err
	}
	var err error
	k.took, k.breaks, err = w.waitConverged(ctx, killed, converge, 3*time.Second)
	return k, err
}

// summarize prints the run's table and returns how many checks broke.
func summarize(seed uint64, kills []kill, outages []outcome) int {
	broken := 0
	fmt.Printf("\n| seed %d | kills | writes before the kill (min-max) | converged after (s, min/median/max) | invariants broken |\n|---|---|---|---|---|\n", seed)
	for _, k := range kinds {
		var ks []kill
		for _, x := range kills {
			if x.kind == k.kind {
				ks = append(ks, x)
			}
		}
		if len(ks) == 0 {
			continue
		}
		var writes []int64
		var took []time.Duration
		n := 0
		for _, x := range ks {
			writes = append(writes, x.writes)
			took = append(took, x.took)
			n += len(x.breaks)
		}
		broken += n
		slices.Sort(writes)
		slices.Sort(took)
		fmt.Printf("| %s | %d | %d-%d | %.1f / %.1f / %.1f | %d |\n", k.kind, len(ks), writes[0], writes[len(writes)-1],
			took[0].Seconds(), took[len(took)/2].Seconds(), took[len(took)-1].Seconds(), n)
	}
	if len(outages) > 0 {
		fmt.Printf("\n| outage | lasted | requests/s during (peak, mean) | operator restarts | converged after its end | broken |\n|---|---|---|---|---|---|\n")
		for _, o := range outages {
			fmt.Printf("| %s | %s | %d, %.1f | %d | %.1fs | %s |\n", o.name, o.lasted.Round(time.Second), o.peak, o.mean, o.restarts, o.took.Seconds(), strings.Join(o.breaks, "; "))
			broken += len(o.breaks)
		}
	}
	return broken
}
