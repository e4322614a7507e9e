package main

import (
	"strings"
	"testing"
	"time"
)

// TestReducedScale runs the whole benchmark at 200 pools (40 namespaces of 5) with a
// short steady state, so the harness cannot rot, and holds what must be true at any
// size: every pool rendered with its objects, as many and as large as the bare
// client's; no write in the steady state or after a restart, with every pool
// reconciled meanwhile; a change wave that writes only to the pools it changed and
// leaves each pool exactly its current templates; a churn of scales and Cluster API
// status that the operator follows with status writes only, at most one per change.
// The times are logged, not judged: they depend on the machine.
func TestReducedScale(t *testing.T) {
	const namespaces, perNamespace = 40, 5
	pools := namespaces * perNamespace
	res, err := Run(t.Context(), Config{
		Namespaces: namespaces, PoolsPerNamespace: perNamespace,
		Steady: 10 * time.Second, Resyncs: 2, WaveFraction: 0.1,
		Churn: 12 * time.Second, ChurnFraction: 0.1, ChurnInterval: 3 * time.Second,
		Quiet: 3 * time.Second, Timeout: 3 * time.Minute,
		Work: t.TempDir(), Log: testLog{t},
	})
	if res != nil {
		t.Log("\n" + res.Table())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems() {
		t.Error(p)
	}

	// Four objects per pool, and for each cluster (every namespace has Kairos and Talos
	// pools, and autoscaled ones) the worker password Secret, the Talos join identity and
	// its token in the tenant cluster, and its autoscaler's ServiceAccount, Role,
	// RoleBinding, kubeconfig Secret and Deployment.
	if want := pools*4 + 8*namespaces; res.Objects.Operator != want || res.Objects.Bare != want {
		t.Errorf("objects: operator %d, bare client %d, want %d each", res.Objects.Operator, res.Objects.Bare, want)
	}
	// The same bodies, but for the identities' machine CA certificates: each has a
	// random serial, whose DER length varies by a byte, up to 4 bytes once encoded. A
	// namespace's identity is in its <cluster>-talos and in each of its Talos pools'
	// bootstrap templates (measured: 4 bytes apart in each of 3 templates of one
	// namespace), so each namespace may differ by 4 bytes per copy, all the same way.
	talosPerNamespace := (perNamespace + 1) / 2
	slack := int64(4 * (1 + talosPerNamespace) * namespaces)
	if d := res.Objects.OperatorBytes - res.Objects.BareBytes; d < -slack || d > slack || res.Objects.Missing != 0 {
		t.Errorf("objects: operator %d bytes, bare client %d bytes, %d missing", res.Objects.OperatorBytes, res.Objects.BareBytes, res.Objects.Missing)
	}
	if res.Cold.Seconds <= 0 || res.Bare.Seconds <= 0 || res.Cold.Writes < res.Objects.Operator {
		t.Errorf("cold start %.1f s with %d writes, bare client %.1f s", res.Cold.Seconds, res.Cold.Writes, res.Bare.Seconds)
	}
	if res.Steady.Writes != 0 || res.Steady.Reconciles < pools {
		t.Errorf("steady state: %d writes over %d reconciles, want 0 writes over at least %d", res.Steady.Writes, res.Steady.Reconciles, pools)
	}
	if res.Restart.Writes != 0 || res.Restart.Reconciles < pools {
		t.Errorf("restart: %d writes over %d reconciles, want 0 writes over at least %d", res.Restart.Writes, res.Restart.Reconciles, pools)
	}
	if r := res.ChurnRestart; r.Writes != 0 || r.Reconciles < pools {
		t.Errorf("restart before the churn: %d writes over %d reconciles, want 0 writes over at least %d", r.Writes, r.Reconciles, pools)
	}
	// A changed pool gets two new templates, a MachineDeployment pointing at them and
	// a status, and loses its two old templates.
	if w := res.Wave; w.Pools != pools/10 || w.WritesUntouched != 0 || w.WritesOther != 0 || w.WritesChanged < 6*w.Pools || w.TemplatesWrong != 0 {
		t.Errorf("change wave: %d pools, writes %d to them, %d to others, %d to no pool; %d pools with wrong templates",
			w.Pools, w.WritesChanged, w.WritesUntouched, w.WritesOther, w.TemplatesWrong)
	}
	// Every pool is autoscaled: a tenth of them is scaled 4 times, and Cluster API
	// reports each scale at least once; the pools' status follows, with no event: the
	// machines' comings and goings have none.
	if c := res.Churn; c.Pools != pools/10 || c.Scales < 4*c.Pools || c.StatusUpdates < c.Scales || c.StatusWrites == 0 ||
		c.TemplateWrites+c.MachineDeploymentWrites+c.PoolWrites != 0 || c.PoolsOverBound != 0 || c.Queue.Adds == 0 || c.EventWrites != 0 {
		t.Errorf("churn: %d pools, %d scales, %d status updates; the operator's writes %v, %d pools over one status write per change, %d queue adds, %d events",
			c.Pools, c.Scales, c.StatusUpdates, c.OperatorWrites, c.PoolsOverBound, c.Queue.Adds, c.EventWrites)
	}
	if res.PeakRSSMiB <= 0 || res.ColdRun.CPUSeconds <= 0 {
		t.Errorf("operator usage not measured: %+v %+v", res.ColdRun, res.SteadyRun)
	}
}

// testLog writes the harness's progress to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
