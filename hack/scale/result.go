package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// Targets of the benchmark on a 2-core machine.
const (
	targetRatio      = 1.2
	targetPeakRSSMiB = 150
)

// Result is one run's figures; it is written as JSON and as a table.
type Result struct {
	// Commit is the code that ran: the short commit, "+dirty" with uncommitted changes;
	// empty without git.
	Commit            string `json:"commit,omitempty"`
	Date              string `json:"date"`
	Cores             int    `json:"cores"`
	APIServer         string `json:"apiServer"`
	Namespaces        int    `json:"namespaces"`
	PoolsPerNamespace int    `json:"poolsPerNamespace"`
	Pools             int    `json:"pools"`
	TalosPools        int    `json:"talosPools"`
	KairosPools       int    `json:"kairosPools"`
	Concurrency       int    `json:"concurrency"`
	APIPriority       bool   `json:"apiPriority"`
	SyncPeriod        string `json:"syncPeriod"`

	Objects struct {
		Operator      int      `json:"operator"`
		OperatorBytes int64    `json:"operatorBytes"`
		Bare          int      `json:"bare"`
		BareBytes     int64    `json:"bareBytes"`
		Missing       int      `json:"missing"`
		MissingSample []string `json:"missingSample,omitempty"`
	} `json:"objects"`

	// Bare and BareAgain are the bare client creating the objects, before and after the
	// operator's phases; Cold the operator from its start until every pool is rendered,
	// ColdTail from then until it is quiet.
	Bare      Phase `json:"bare"`
	BareAgain Phase `json:"bareAgain"`
	Cold      Phase `json:"cold"`
	ColdTail  Phase `json:"coldTail"`
	// Ratio is Cold.Seconds over the mean of Bare.Seconds and BareAgain.Seconds.
	Ratio    float64 `json:"ratio"`
	Steady   Phase   `json:"steady"`
	Wave     Wave    `json:"wave"`
	WaveTail Phase   `json:"waveTail"`

	// Restart is the operator restarted with everything in place, until it has
	// reconciled every pool.
	Restart Phase `json:"restart"`
	// Churn follows the steady state, when asked for.
	Churn Churn `json:"churn"`

	// AtConvergence is the cold-start operator's memory when every pool is rendered.
	AtConvergence Usage `json:"atConvergence"`
	// ChurnRestart is the restart before the churn, with the chart's sync period.
	ChurnRestart Phase `json:"churnRestart"`

	// PeakRSSMiB is the largest of the operator processes' peaks: ColdRun (cold start
	// and change wave), SteadyRun (restart and steady state) and ChurnRun (the restart
	// before the churn, and the churn).
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	ColdRun    Usage   `json:"coldRun"`
	SteadyRun  Usage   `json:"steadyRun"`
	ChurnRun   Usage   `json:"churnRun"`
	Profiles   string  `json:"profiles,omitempty"`
	// Anomalies are things the run saw that make its figures doubtful.
	Anomalies []string `json:"anomalies,omitempty"`
	// EventWritesOutside are the operator's event writes outside every phase: client-go's
	// event broadcaster patches a repeated event's series on its own timer.
	EventWritesOutside int `json:"eventWritesOutside"`
}

// Phase is one window of the run.
type Phase struct {
	Seconds float64 `json:"seconds"`
	// IdleSeconds, of a restart: from its start until every controller of the operator
	// held no work (Seconds is until every pool was reconciled).
	IdleSeconds float64 `json:"idleSeconds,omitempty"`
	CPU         CPU     `json:"cpuSeconds"`
	// Requests are the operator's requests by verb (the bare client's in the bare
	// phase), as the API server's audit log records them; dry runs apart.
	Requests map[string]int `json:"requests"`
	// Writes are requests that changed stored state, leader election aside; EventWrites
	// of them are Events. LeaseWrites are the leader election's: lease renewals, and
	// the event announcing a new leader.
	Writes      int `json:"writes"`
	EventWrites int `json:"eventWrites"`
	LeaseWrites int `json:"leaseWrites"`
	// TenantRequests and TenantWrites are the operator's requests to the tenant API
	// server, which every cluster's <cluster>-kubeconfig names: here the same API
	// server, as its own user.
	TenantRequests int `json:"tenantRequests"`
	TenantWrites   int `json:"tenantWrites"`
	// Reconciles of the nodegroup controller in the window (the operator's metrics).
	Reconciles int `json:"reconciles,omitempty"`
	// RSSMiB is the operator's resident memory (VmRSS) sampled every second, in the
	// steady state and the churn.
	RSSMiB *Sampled `json:"rssMiB,omitempty"`
}

// Sampled is a gauge sampled over a window: its largest and mean value.
type Sampled struct {
	Max     float64 `json:"max"`
	Mean    float64 `json:"mean"`
	Samples int     `json:"samples"`
}

// Churn is the churn phase: an autoscaler-like client scales pools through their
// MachineDeployments' scale subresource while a Cluster API-like writer follows with
// their status; the phase lasts until the operator is quiet after the last change.
type Churn struct {
	Phase
	Pools           int     `json:"pools"`
	IntervalSeconds float64 `json:"intervalSeconds"`
	// Scales and StatusUpdates are the clients' stored writes to the pools'
	// MachineDeployments, as the audit log records them; Changes their sum, the changes
	// the operator observes.
	Scales        int `json:"scales"`
	StatusUpdates int `json:"statusUpdates"`
	Changes       int `json:"changes"`
	// OperatorWrites are the operator's writes by verb, resource and subresource (and
	// the response code when it was refused).
	OperatorWrites map[string]int `json:"operatorWrites,omitempty"`
	// TemplateWrites, MachineDeploymentWrites (its spec, metadata or scale) and
	// PoolWrites (a NodeGroup, not its status) must be 0.
	TemplateWrites          int `json:"templateWrites"`
	MachineDeploymentWrites int `json:"machineDeploymentWrites"`
	PoolWrites              int `json:"poolWrites"`
	// StatusWrites are the NodeGroup status writes stored; StatusConflicts those refused
	// for a stale resourceVersion.
	StatusWrites    int `json:"statusWrites"`
	StatusConflicts int `json:"statusConflicts"`
	// MaxWritesPerChange is the largest ratio of a pool's status writes to its changes;
	// PoolsOverBound the pools with more writes than changes.
	MaxWritesPerChange   float64  `json:"maxStatusWritesPerChange"`
	PoolsOverBound       int      `json:"poolsOverBound"`
	PoolsOverBoundSample []string `json:"poolsOverBoundSample,omitempty"`
	Queue                Queue    `json:"queue"`
	// DrainSeconds is how long after the last change the queue was empty and idle.
	DrainSeconds float64 `json:"drainSeconds"`
	// Throttled are the churn clients' requests the API server answered 429 (too many
	// requests, its priority and fairness): client-go sends them again.
	Throttled int `json:"throttled"`
	// TimedOut are the churn clients' writes the API server gave up on (a server
	// timeout, in its audit log): they send them again, as Cluster API's controller and
	// cluster-autoscaler try again.
	TimedOut int `json:"timedOut"`
}

// Queue is the nodegroup controller's work queue over the churn, from the operator's
// metrics (controller-runtime's workqueue_* series).
type Queue struct {
	// Depth is workqueue_depth, sampled every second.
	Depth   Sampled `json:"depth"`
	Adds    int     `json:"adds"`
	Retries int     `json:"retries"`
	Errors  int     `json:"reconcileErrors"`
	// LatencyMeanSeconds is how long items waited in the queue on average
	// (workqueue_queue_duration_seconds); LatencyP99Seconds the upper bound of the
	// histogram bucket that holds the 99th percentile (the buckets are powers of ten).
	LatencyMeanSeconds float64 `json:"latencyMeanSeconds"`
	LatencyP99Seconds  float64 `json:"latencyP99Seconds"`
}

// Usage is an operator process's peak resident memory (VmHWM) and CPU seconds, and
// its resident memory when it was read, anonymous (heap, stacks) and file-backed
// (the binary).
type Usage struct {
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	RSSAnonMiB float64 `json:"rssAnonMiB"`
	RSSFileMiB float64 `json:"rssFileMiB"`
	CPUSeconds float64 `json:"cpuSeconds"`
}

// CPU is CPU seconds (user and system) spent in a window.
type CPU struct {
	Operator  float64 `json:"operator"`
	APIServer float64 `json:"apiserver"`
	Etcd      float64 `json:"etcd"`
}

// Wave is the change wave.
type Wave struct {
	Phase
	Pools                 int      `json:"pools"`
	PatchSeconds          float64  `json:"patchSeconds"`
	WritesChanged         int      `json:"writesToChangedPools"`
	WritesUntouched       int      `json:"writesToUntouchedPools"`
	WritesUntouchedSample []string `json:"writesToUntouchedPoolsSample,omitempty"`
	WritesOther           int      `json:"writesToNoPool"`
	WritesOtherSample     []string `json:"writesToNoPoolSample,omitempty"`
	TemplatesWrong        int      `json:"poolsWithWrongTemplates"`
	TemplatesWrongSample  []string `json:"poolsWithWrongTemplatesSample,omitempty"`
}

// Problems are the run's failed invariants: what must hold at any size and on any
// machine. The time and memory targets are reported, not enforced: they depend on
// the machine.
func (r *Result) Problems() []string {
	var p []string
	if r.Objects.Missing > 0 {
		p = append(p, fmt.Sprintf("%d objects of rendered pools are missing, e.g. %v", r.Objects.Missing, r.Objects.MissingSample))
	}
	if r.Objects.Operator != r.Objects.Bare {
		p = append(p, fmt.Sprintf("the operator made %d objects, the bare client %d", r.Objects.Operator, r.Objects.Bare))
	}
	if r.Steady.Writes > 0 {
		p = append(p, fmt.Sprintf("the operator sent %d writes in the steady state (%v)", r.Steady.Writes, r.Steady.Requests))
	}
	if r.Steady.TenantWrites > 0 {
		p = append(p, fmt.Sprintf("the operator sent %d writes to the tenant clusters in the steady state", r.Steady.TenantWrites))
	}
	if r.ChurnRestart.Writes > 0 {
		p = append(p, fmt.Sprintf("the operator restarted before the churn sent %d writes (%v)", r.ChurnRestart.Writes, r.ChurnRestart.Requests))
	}
	if r.Restart.Writes > 0 {
		p = append(p, fmt.Sprintf("the restarted operator sent %d writes (%v)", r.Restart.Writes, r.Restart.Requests))
	}
	if r.Wave.WritesUntouched > 0 {
		p = append(p, fmt.Sprintf("the change wave wrote %d times to pools it did not change, e.g. %v", r.Wave.WritesUntouched, r.Wave.WritesUntouchedSample))
	}
	if r.Wave.WritesOther > 0 {
		p = append(p, fmt.Sprintf("the change wave wrote %d times to objects of no pool, e.g. %v", r.Wave.WritesOther, r.Wave.WritesOtherSample))
	}
	if r.Wave.TemplatesWrong > 0 {
		p = append(p, fmt.Sprintf("%d pools do not have exactly the templates their status names, e.g. %v", r.Wave.TemplatesWrong, r.Wave.TemplatesWrongSample))
	}
	p = append(p, r.churnProblems()...)
	return append(p, r.Anomalies...)
}

// Table is the run as a text table.
func (r *Result) Table() string {
	var b strings.Builder
	commit := r.Commit
	if commit == "" {
		commit = "unknown commit"
	}
	fmt.Fprintf(&b, "nodegroup-operator scale benchmark, %s, %s, %d cores, kube-apiserver %s\n", commit, r.Date, r.Cores, r.APIServer)
	fmt.Fprintf(&b, "%d pools (%d Talos, %d Kairos) in %d namespaces; concurrency %d; sync period %s; the chart's FlowSchemas %s\n\n",
		r.Pools, r.TalosPools, r.KairosPools, r.Namespaces, r.Concurrency, r.SyncPeriod, onOff(r.APIPriority))

	w := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "measure\tresult\ttarget")
	fmt.Fprintf(w, "objects (operator / bare client)\t%d / %d, %.1f / %.1f MiB\tequal\n", r.Objects.Operator, r.Objects.Bare,
		mib(r.Objects.OperatorBytes), mib(r.Objects.BareBytes))
	fmt.Fprintf(w, "a. cold convergence, operator\t%.1f s\t\n", r.Cold.Seconds)
	fmt.Fprintf(w, "b. bare client, same objects: before / after / mean\t%.1f / %.1f / %.1f s\t\n", r.Bare.Seconds, r.BareAgain.Seconds, (r.Bare.Seconds+r.BareAgain.Seconds)/2)
	fmt.Fprintf(w, "   ratio a / b\t%.2f\t<= %.1f %s\n", r.Ratio, targetRatio, verdict(r.Ratio <= targetRatio, r.Ratio/targetRatio-1))
	fmt.Fprintf(w, "c. steady state: writes in %.0f s (%d reconciles)\t%d\t0 %s\n", r.Steady.Seconds, r.Steady.Reconciles, r.Steady.Writes, verdict(r.Steady.Writes == 0, 0))
	fmt.Fprintf(w, "   writes to the tenant clusters (%d requests)\t%d\t0 %s\n", r.Steady.TenantRequests, r.Steady.TenantWrites, verdict(r.Steady.TenantWrites == 0, 0))
	fmt.Fprintf(w, "   leader election (lease renewals)\t%d\t\n", r.Steady.LeaseWrites)
	if r.EventWritesOutside > 0 {
		fmt.Fprintf(w, "   event series patched between phases\t%d\t\n", r.EventWritesOutside)
	}
	fmt.Fprintf(w, "   restart: every pool reconciled; every controller idle\t%.1f s; %.1f s, %d writes\t0 writes %s\n", r.Restart.Seconds, r.Restart.IdleSeconds, r.Restart.Writes, verdict(r.Restart.Writes == 0, 0))
	fmt.Fprintf(w, "d. change wave: %d pools with new templates\t%.1f s\t\n", r.Wave.Pools, r.Wave.Seconds)
	fmt.Fprintf(w, "   writes to changed / untouched pools\t%d / %d\tuntouched 0 %s\n", r.Wave.WritesChanged, r.Wave.WritesUntouched, verdict(r.Wave.WritesUntouched == 0, 0))
	if c := &r.Churn; c.Pools > 0 {
		fmt.Fprintf(w, "churn: %d pools scaled every %.0f s, %.0f s until quiet\t%d scales, %d status updates, %d throttled (429), %d timed out\t\n", c.Pools, c.IntervalSeconds,
			c.Seconds, c.Scales, c.StatusUpdates, c.Throttled, c.TimedOut)
		fmt.Fprintf(w, "   template / MachineDeployment / NodeGroup spec writes\t%d / %d / %d\t0 %s\n", c.TemplateWrites, c.MachineDeploymentWrites, c.PoolWrites,
			verdict(c.TemplateWrites+c.MachineDeploymentWrites+c.PoolWrites == 0, 0))
		fmt.Fprintf(w, "   status writes / changes observed (conflicts)\t%d / %d (%d), at most %.2f per change of a pool\t<= 1 per change %s\n",
			c.StatusWrites, c.Changes, c.StatusConflicts, c.MaxWritesPerChange, verdict(c.PoolsOverBound == 0, 0))
		fmt.Fprintf(w, "   work queue: depth max / mean; adds, retries, errors\t%.0f / %.1f; %d, %d, %d\t\n", c.Queue.Depth.Max, c.Queue.Depth.Mean,
			c.Queue.Adds, c.Queue.Retries, c.Queue.Errors)
		p99 := fmt.Sprintf("<= %g", c.Queue.LatencyP99Seconds)
		if c.Queue.LatencyP99Seconds < 0 {
			p99 = "above every bucket,"
		}
		fmt.Fprintf(w, "   queue latency mean / p99 bucket; drained after\t%.4f / %s s; %.1f s\t<= %.0f s %s\n", c.Queue.LatencyMeanSeconds,
			p99, c.DrainSeconds, c.IntervalSeconds, verdict(c.noBacklog(), 0))
		if s := r.Steady.RSSMiB; s != nil && c.RSSMiB != nil {
			growth := c.rssGrowth(s)
			fmt.Fprintf(w, "   RSS peak: churn / steady state\t%.0f / %.0f MiB (%+.0f%%)\t<= +%.0f%% %s\n", c.RSSMiB.Max, s.Max, growth*100,
				rssTolerance*100, verdict(growth <= rssTolerance, (1+growth)/(1+rssTolerance)-1))
		}
	}
	fmt.Fprintf(w, "e. operator peak RSS\t%.0f MiB\t<= %d MiB %s\n", r.PeakRSSMiB, targetPeakRSSMiB, verdict(r.PeakRSSMiB <= targetPeakRSSMiB, r.PeakRSSMiB/targetPeakRSSMiB-1))
	fmt.Fprintf(w, "   peak RSS: cold start and wave / restart and steady\t%.0f / %.0f MiB\t\n", r.ColdRun.PeakRSSMiB, r.SteadyRun.PeakRSSMiB)
	if r.Churn.Pools > 0 {
		fmt.Fprintf(w, "   peak RSS, CPU: restart with the chart's sync period and churn\t%.0f MiB, %.1f s\t\n", r.ChurnRun.PeakRSSMiB, r.ChurnRun.CPUSeconds)
	}
	fmt.Fprintf(w, "   RSS at convergence: heap and stacks / binary\t%.0f / %.0f MiB\t\n", r.AtConvergence.RSSAnonMiB, r.AtConvergence.RSSFileMiB)
	fmt.Fprintf(w, "   operator CPU: cold start and wave / restart and steady\t%.1f / %.1f s\t\n", r.ColdRun.CPUSeconds, r.SteadyRun.CPUSeconds)
	_ = w.Flush()

	fmt.Fprintln(&b)
	w = tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "phase\tseconds\tCPU s: operator\tapiserver\tetcd\twrites\tevents\trequests/s by verb (count): the operator's, or the bare client's")
	for _, ph := range []struct {
		name string
		p    *Phase
	}{
		{"bare client", &r.Bare}, {"cold", &r.Cold}, {"cold, until quiet", &r.ColdTail},
		{"wave", &r.Wave.Phase}, {"wave, until quiet", &r.WaveTail},
		{"restart", &r.Restart}, {"steady", &r.Steady}, {"restart, chart's sync period", &r.ChurnRestart}, {"churn, until quiet", &r.Churn.Phase}, {"bare client again", &r.BareAgain},
	} {
		if (ph.p == &r.Churn.Phase || ph.p == &r.ChurnRestart) && r.Churn.Pools == 0 {
			continue
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%s\n", ph.name, ph.p.Seconds, ph.p.CPU.Operator, ph.p.CPU.APIServer, ph.p.CPU.Etcd,
			ph.p.Writes, ph.p.EventWrites, rates(ph.p))
	}
	_ = w.Flush()
	if r.Profiles != "" {
		fmt.Fprintf(&b, "\npprof profiles: %s\n", r.Profiles)
	}
	for _, p := range r.Problems() {
		fmt.Fprintf(&b, "\nFAIL: %s", p)
	}
	b.WriteString("\n")
	return b.String()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func verdict(ok bool, over float64) string {
	if ok {
		return "met"
	}
	if over > 0 {
		return fmt.Sprintf("MISSED by %.0f%%", over*100)
	}
	return "MISSED"
}

// rates is the phase's requests per second by verb, most frequent first.
func rates(p *Phase) string {
	if p.Seconds <= 0 || len(p.Requests) == 0 {
		return "-"
	}
	verbs := slices.SortedFunc(maps.Keys(p.Requests), func(a, b string) int {
		if p.Requests[a] != p.Requests[b] {
			return p.Requests[b] - p.Requests[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(verbs))
	for i, v := range verbs {
		parts[i] = fmt.Sprintf("%s %.1f (%d)", v, float64(p.Requests[v])/p.Seconds, p.Requests[v])
	}
	return strings.Join(parts, ", ")
}

// Write writes the result as base.txt and base.json.
func (r *Result) Write(base string) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(base+".txt", []byte(r.Table()), 0o644)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
