package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
)

const (
	phaseChurn     = "churn"
	phaseChurnTail = "churn-tail"
)

// The churn's two clients, each a ServiceAccount of its own so the audit log tells
// their writes from the operator's and from each other's: cluster-autoscaler's
// clusterapi provider, which sets a MachineDeployment's replicas through its scale
// subresource, and Cluster API's MachineDeployment controller, which reports its
// machines in its status.
const (
	autoscalerServiceAccount = "scale-autoscaler"
	capiServiceAccount       = "scale-capi"
	autoscalerUser           = "system:serviceaccount:" + localrun.ReleaseNamespace + ":" + autoscalerServiceAccount
	capiUser                 = "system:serviceaccount:" + localrun.ReleaseNamespace + ":" + capiServiceAccount
)

// rssTolerance is how far the operator's resident memory during the churn may rise
// above the steady state's.
const rssTolerance = 0.1

// churnClients makes the churn's two clients, long before they write: a new binding
// takes a moment to reach the authorizer.
func (h *harness) churnClients(ctx context.Context) error {
	for _, c := range []struct {
		name string
		into *client.Client
	}{{autoscalerServiceAccount, &h.autoscaler}, {capiServiceAccount, &h.capi}} {
		cfg, err := localrun.ServiceAccountConfig(ctx, h.env.Config, localrun.ReleaseNamespace, c.name, "cluster-admin", 24*time.Hour)
		if err != nil {
			return err
		}
		cfg.QPS = -1
		if *c.into, err = client.New(cfg, client.Options{Scheme: h.admin.Scheme()}); err != nil {
			return err
		}
	}
	return nil
}

// churnPool is a pool the churn scales, and its MachineDeployment as last written.
type churnPool struct {
	*pool
	min, max int32
	md       *clusterv1.MachineDeployment
	rng      *rand.Rand
}

// churnPools are every n-th autoscaled pool, for the churn's fraction: the autoscaler
// only sizes pools whose range has room.
func (h *harness) churnPools(ctx context.Context) ([]*churnPool, error) {
	var autoscaled []*pool
	for _, p := range h.pools {
		if ng := h.watch.get(p); ng.Spec.Autoscaled() {
			autoscaled = append(autoscaled, p)
		}
	}
	step := max(1, int(1/h.cfg.ChurnFraction+0.5))
	var out []*churnPool
	for i := 0; i < len(autoscaled); i += step {
		p := autoscaled[i]
		ng := h.watch.get(p)
		md := &clusterv1.MachineDeployment{}
		if err := h.admin.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: ng.Status.MachineDeploymentName}, md); err != nil {
			return nil, fmt.Errorf("the MachineDeployment of %s: %w", p.key(), err)
		}
		out = append(out, &churnPool{pool: p, min: ng.Spec.MinReplicas, max: ng.Spec.MaxReplicas, md: md,
			rng: rand.New(rand.NewPCG(uint64(p.index), 19))})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none of the %d pools is autoscaled (minReplicas below maxReplicas): nothing to churn", len(h.pools))
	}
	return out, nil
}

// runChurn scales a fraction of the autoscaled pools every interval for the churn's
// length, each within its range, while Cluster API's status follows on their
// MachineDeployments; then it waits until the operator is quiet. It samples the
// operator's resident memory and work queue depth throughout; the audit log counts the
// writes (analyse).
//
// It first restarts the operator with the chart's sync period: the steady state's
// short one compresses hours of resyncs into its window to show they write nothing,
// and during a churn it would queue every pool again each period, which a platform
// running the chart does not see.
func (h *harness) runChurn(ctx context.Context) error {
	pools, err := h.churnPools(ctx)
	if err != nil {
		return err
	}
	if err := h.op.Alive(); err != nil {
		return err
	}
	if h.cfg.Profiles != "" {
		h.heapProfile(ctx, "steady")
	}
	h.res.SteadyRun = h.op.usage()
	h.op.Stop(15 * time.Second)
	h.churnStarted = true
	if err := h.restart(ctx, phaseChurnRestart, &h.res.ChurnRestart, 0); err != nil {
		return err
	}
	c := &h.res.Churn
	c.Pools, c.IntervalSeconds = len(pools), h.cfg.ChurnInterval.Seconds()
	m0, err := h.op.metricsOf(ctx, "nodegroup")
	if err != nil {
		return err
	}
	rss := startSampler(ctx, time.Second, h.rssNow)
	depth := startSampler(ctx, time.Second, func(ctx context.Context) (float64, bool) {
		m, err := h.op.metricsOf(ctx, "nodegroup")
		return m.queued, err == nil
	})
	before := h.cpuNow()
	start := time.Now()
	end := start.Add(h.cfg.Churn)
	interval := h.cfg.ChurnInterval
	err = parallel(ctx, len(pools), len(pools), func(ctx context.Context, i int) error {
		first := start.Add(time.Duration(i) * interval / time.Duration(len(pools)))
		for t := first; t.Before(end); t = t.Add(interval) {
			if err := h.churnOnce(ctx, pools[i], t, interval); err != nil {
				return err
			}
		}
		return nil
	})
	stopped := time.Now()
	if err != nil {
		rss.stop()
		depth.stop()
		return err
	}
	h.mark(phaseChurn, start, stopped)
	for {
		m, err := h.op.metricsOf(ctx, "nodegroup")
		if err == nil && m.idle() {
			break
		}
		if err := h.op.Alive(); err != nil {
			return err
		}
		if time.Since(stopped) > h.cfg.Timeout {
			return fmt.Errorf("the operator's queue did not drain in %s after the churn", h.cfg.Timeout)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.DrainSeconds = time.Since(stopped).Seconds()
	last, quiet, err := h.waitQuiet(ctx, stopped)
	sampled := rss.stop()
	c.RSSMiB, c.Queue.Depth = &sampled, depth.stop()
	if err != nil {
		return err
	}
	h.mark(phaseChurnTail, stopped, quiet)
	c.Seconds = quiet.Sub(start).Seconds()
	c.CPU = h.cpuNow().since(before)
	m1, err := h.op.metricsOf(ctx, "nodegroup")
	if err != nil {
		return err
	}
	c.Reconciles = int(m1.reconciles - m0.reconciles)
	c.Queue.Adds, c.Queue.Retries, c.Queue.Errors = int(m1.adds-m0.adds), int(m1.retries-m0.retries), int(m1.errors-m0.errors)
	c.Queue.LatencyMeanSeconds, c.Queue.LatencyP99Seconds = latencyBetween(m0.latency, m1.latency)
	h.logf("    %d pools scaled every %s for %s; queue depth at most %.0f, drained %.1f s after the last change; last write %.1f s after it",
		len(pools), interval, h.cfg.Churn, c.Queue.Depth.Max, c.DrainSeconds, last.Sub(stopped).Seconds())
	return nil
}

// churnOnce is one round of a pool from t: the autoscaler sets a new size within the
// range at t; Cluster API reports the machines created or deleted (not all ready yet) at
// 0.3 of the interval, and all of them ready at 0.6.
func (h *harness) churnOnce(ctx context.Context, p *churnPool, t time.Time, interval time.Duration) error {
	if err := sleepUntil(ctx, t); err != nil {
		return err
	}
	current := deref(p.md.Spec.Replicas)
	target := p.min + p.rng.Int32N(p.max-p.min)
	if target >= current && current >= p.min && current <= p.max {
		target++ // a size of the range other than the current one
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: target}}
	if err := retryTimeouts(ctx, func() error {
		return h.autoscaler.SubResource("scale").Update(ctx, p.md, client.WithSubResourceBody(scale))
	}); err != nil {
		return fmt.Errorf("scaling %s to %d: %w", p.key(), target, err)
	}
	p.md.Spec.Replicas = &target
	p.md.Generation++ // a change of spec.replicas
	ready := min(deref(p.md.Status.ReadyReplicas), target)
	for _, step := range []struct {
		at    float64
		ready int32
	}{{0.3, ready}, {0.6, target}} {
		if err := sleepUntil(ctx, t.Add(time.Duration(step.at*float64(interval)))); err != nil {
			return err
		}
		before := p.md.DeepCopy()
		followStatus(p.md, target, step.ready)
		if equalStatus(before, p.md) {
			continue // Cluster API patches only what changed
		}
		if err := retryTimeouts(ctx, func() error {
			return h.capi.Status().Patch(ctx, p.md, client.MergeFrom(before))
		}); err != nil {
			return fmt.Errorf("status of the MachineDeployment of %s: %w", p.key(), err)
		}
	}
	return nil
}

// timeoutTries is how many times a churn client sends a write the API server keeps
// giving up on before the run fails.
const timeoutTries = 5

// retryTimeouts runs write until the API server does not give up on it: a churn
// client on a saturated API server gets server timeouts, and sends the same write
// again after a pause (1, 2, 4, 8 s), as the clients it stands in for requeue theirs.
// The same scale or status patch twice is the same change, so a timed-out write that
// the server did store costs nothing more. Like a throttled one, a late write makes the
// pool's next rounds late too: every round is sent (the churn's length is what it
// took to send them).
func retryTimeouts(ctx context.Context, write func() error) error {
	pause := time.Second
	for try := 1; ; try++ {
		err := write()
		if try == timeoutTries || !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
			return err
		}
		if err := sleepUntil(ctx, time.Now().Add(pause)); err != nil {
			return err
		}
		pause *= 2
	}
}

func equalStatus(a, b *clusterv1.MachineDeployment) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status)
}

// followStatus reports on md as Cluster API's MachineDeployment controller does
// (v1beta2 status) when it has machines machines of which ready are ready, available
// and all up to date: the counts, and the conditions that follow from them with the
// rendered strategy's maxUnavailable of 0.
func followStatus(md *clusterv1.MachineDeployment, machines, ready int32) {
	desired := deref(md.Spec.Replicas)
	s := &md.Status
	s.ObservedGeneration = md.Generation
	s.Replicas, s.ReadyReplicas, s.AvailableReplicas, s.UpToDateReplicas = &machines, &ready, &ready, &machines
	if sel, err := metav1.LabelSelectorAsSelector(&md.Spec.Selector); err == nil {
		s.Selector = sel.String()
	}
	s.Phase = string(clusterv1.MachineDeploymentPhaseRunning)
	switch {
	case machines < desired:
		s.Phase = string(clusterv1.MachineDeploymentPhaseScalingUp)
	case machines > desired:
		s.Phase = string(clusterv1.MachineDeploymentPhaseScalingDown)
	}
	set := func(typ string, ok bool, yes, no, msg string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: no, Message: msg, ObservedGeneration: md.Generation}
		if ok {
			c.Status, c.Reason = metav1.ConditionTrue, yes
		}
		meta.SetStatusCondition(&s.Conditions, c)
	}
	var available string
	if ready < desired {
		available = fmt.Sprintf("%d available replicas, at least %d required (spec.strategy.rollout.maxUnavailable is 0, spec.replicas is %d)", ready, desired, desired)
	}
	set(clusterv1.AvailableCondition, ready >= desired, clusterv1.AvailableReason, clusterv1.NotAvailableReason, available)
	var notReady string
	if ready < machines {
		notReady = fmt.Sprintf("%d Machines not ready", machines-ready)
	}
	set(clusterv1.MachinesReadyCondition, ready == machines, clusterv1.ReadyReason, clusterv1.NotReadyReason, notReady)
	set(clusterv1.MachinesUpToDateCondition, true, clusterv1.UpToDateReason, clusterv1.NotUpToDateReason, "")
	set(clusterv1.RollingOutCondition, false, clusterv1.RollingOutReason, clusterv1.NotRollingOutReason, "")
	var up, down string
	if machines < desired {
		up = fmt.Sprintf("Scaling up from %d to %d replicas", machines, desired)
	}
	if machines > desired {
		down = fmt.Sprintf("Scaling down from %d to %d replicas", machines, desired)
	}
	set(clusterv1.ScalingUpCondition, machines < desired, clusterv1.ScalingUpReason, clusterv1.NotScalingUpReason, up)
	set(clusterv1.ScalingDownCondition, machines > desired, clusterv1.ScalingDownReason, clusterv1.NotScalingDownReason, down)
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rssNow is the operator's resident memory now, in MiB.
func (h *harness) rssNow(context.Context) (float64, bool) {
	m := memory(h.op.Pid())
	return m.now, m.now > 0
}

// latencyBetween is the mean time items waited in the queue between two readings of
// its histogram, and the upper bound of the bucket that holds the 99th percentile (-1
// when it is above every bound).
func latencyBetween(a, b metrics.Sample) (mean, p99 float64) {
	count := b.Value - a.Value
	if count <= 0 {
		return 0, 0
	}
	mean = (b.Sum - a.Sum) / count
	for i, bucket := range b.Buckets {
		n := bucket.Count
		if i < len(a.Buckets) {
			n -= a.Buckets[i].Count
		}
		if n >= 0.99*count {
			if math.IsInf(bucket.UpperBound, 1) {
				break // the +Inf bucket: above every bound (and JSON has no infinity)
			}
			return mean, bucket.UpperBound
		}
	}
	return mean, -1
}

// sampler reads a gauge every period in the background, from its start until stop.
type sampler struct {
	cancel context.CancelFunc
	done   chan Sampled
}

func startSampler(ctx context.Context, every time.Duration, read func(context.Context) (float64, bool)) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan Sampled, 1)}
	go func() {
		var out Sampled
		var sum float64
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if v, ok := read(ctx); ok && ctx.Err() == nil {
				out.Max = max(out.Max, v)
				sum += v
				out.Samples++
			}
			select {
			case <-ctx.Done():
				if out.Samples > 0 {
					out.Mean = sum / float64(out.Samples)
				}
				s.done <- out
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() Sampled {
	s.cancel()
	return <-s.done
}

// countChurnWrite counts a write the operator sent during the churn, by what it
// wrote, and a stored status of a pool against that pool.
func (h *harness) countChurnWrite(e *auditEvent) {
	c := &h.res.Churn
	if c.OperatorWrites == nil {
		c.OperatorWrites = map[string]int{}
	}
	what := e.Verb + " " + e.resource()
	if sub := e.ObjectRef.Subresource; sub != "" {
		what += "/" + sub
	}
	if code := e.code(); code >= 300 {
		what += fmt.Sprintf(" (%d)", code)
	}
	c.OperatorWrites[what]++
	switch e.resource() {
	case "talosconfigtemplates", "kairosconfigtemplates", "kubevirtmachinetemplates":
		c.TemplateWrites++
	case "machinedeployments":
		c.MachineDeploymentWrites++
	case "nodegroups":
		switch {
		case e.ObjectRef.Subresource != "status":
			c.PoolWrites++
		case e.code() == 409:
			c.StatusConflicts++
		case e.stored():
			c.StatusWrites++
			if p := h.poolOf(e); p != nil {
				h.churnCount(p).statusWrites++
			}
		}
	}
}

// countChurnChange counts a change of a churn client to a pool's MachineDeployment:
// one the operator observes.
func (h *harness) countChurnChange(e *auditEvent) {
	p := h.poolOf(e)
	if e.code() == 429 {
		// The API server's priority and fairness turned it away for now, and client-go
		// sends it again: the churn's clients outran the API server, which is counted,
		// not a client that misbehaved.
		h.res.Churn.Throttled++
		return
	}
	if e.timedOut() {
		// The API server gave up on it under the churn's load, and the client sends it
		// again (retryTimeouts): counted, as a 429 is.
		h.res.Churn.TimedOut++
		return
	}
	if p == nil || e.resource() != "machinedeployments" || !e.stored() {
		h.res.Anomalies = append(h.res.Anomalies, fmt.Sprintf("a churn client sent %s %s (%d)", e.Verb, e.RequestURI, e.code()))
		return
	}
	switch e.ObjectRef.Subresource {
	case "scale":
		h.res.Churn.Scales++
	case "status":
		h.res.Churn.StatusUpdates++
	}
	h.churnCount(p).changes++
}

type churnCount struct{ changes, statusWrites int }

func (h *harness) churnCount(p *pool) *churnCount {
	if h.churnCounts == nil {
		h.churnCounts = map[*pool]*churnCount{}
	}
	c := h.churnCounts[p]
	if c == nil {
		c = &churnCount{}
		h.churnCounts[p] = c
	}
	return c
}

// judgeChurn compares, pool by pool, the operator's status writes with the changes it
// observed: at most one each.
func (h *harness) judgeChurn() {
	c := &h.res.Churn
	for p, n := range h.churnCounts {
		if n.changes > 0 {
			c.MaxWritesPerChange = max(c.MaxWritesPerChange, float64(n.statusWrites)/float64(n.changes))
		}
		if n.statusWrites > n.changes {
			c.PoolsOverBound++
			if len(c.PoolsOverBoundSample) < 10 {
				c.PoolsOverBoundSample = append(c.PoolsOverBoundSample,
					fmt.Sprintf("%s: %d status writes for %d changes", p.key(), n.statusWrites, n.changes))
			}
		}
	}
	c.Changes = c.Scales + c.StatusUpdates
}

// churnProblems are the churn's failed invariants: the operator's writes, which hold
// on any machine. Its backlog and memory are targets (Table).
func (r *Result) churnProblems() []string {
	c := &r.Churn
	if c.Pools == 0 {
		return nil
	}
	var p []string
	if c.Scales == 0 {
		p = append(p, "the churn scaled no pool")
	}
	if c.TemplateWrites > 0 || c.MachineDeploymentWrites > 0 || c.PoolWrites > 0 {
		p = append(p, fmt.Sprintf("the operator sent %d template, %d MachineDeployment and %d NodeGroup spec writes during the churn (%v)",
			c.TemplateWrites, c.MachineDeploymentWrites, c.PoolWrites, c.OperatorWrites))
	}
	if c.PoolsOverBound > 0 {
		p = append(p, fmt.Sprintf("%d pools got more status writes than changes during the churn, e.g. %v", c.PoolsOverBound, c.PoolsOverBoundSample))
	}
	return p
}

// noBacklog: items waited less than one interval in the queue on average, and it was
// empty and idle one interval after the last change. Like the other targets of time
// and memory, it is reported, not enforced: on a machine whose API server answers
// slowly (a shared one) the queue backs up whatever the operator does.
func (c *Churn) noBacklog() bool {
	return c.Queue.LatencyMeanSeconds <= c.IntervalSeconds && c.Queue.LatencyP99Seconds >= 0 && c.DrainSeconds <= c.IntervalSeconds
}

// rssGrowth is how far the operator's resident memory during the churn rose above
// the steady state's, as a fraction of it (NaN without a steady state).
func (c *Churn) rssGrowth(steady *Sampled) float64 {
	if steady == nil || steady.Max == 0 {
		return math.NaN()
	}
	return c.RSSMiB.Max/steady.Max - 1
}
