package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// Phase names, as windows of the audit log.
const (
	phaseBare      = "bare"
	phaseBareAgain = "bare-again"
	phaseCold      = "cold"
	phaseColdTail  = "cold-tail"
	phaseSteady    = "steady"
	phaseWave      = "wave"
	phaseWaveTail  = "wave-tail"
	phaseRestart   = "restart"
	// phaseChurnRestart is the restart before the churn, with the chart's sync period.
	phaseChurnRestart = "churn-restart"
)

// runCold starts the operator and times it until every pool is rendered at its
// generation; then it checks that every pool's objects are there, as many and as large
// as the bare client's, and waits until the operator is quiet.
func (h *harness) runCold(ctx context.Context) error {
	if err := localrun.Apply(ctx, h.admin, "helm", h.webhookConfigs); err != nil {
		return err
	}
	before := h.cpuNow()
	start := time.Now()
	if err := h.startOperator(ctx, 0); err != nil {
		return err
	}
	h.profile(ctx, phaseCold)
	at, err := h.until(ctx, h.pools, rendered)
	if err != nil {
		return err
	}
	h.mark(phaseCold, start, at)
	h.res.Cold.Seconds = at.Sub(start).Seconds()
	h.res.Cold.CPU = h.cpuNow().since(before)
	h.res.AtConvergence = h.op.usage()
	h.logf("    %d pools rendered in %.1f s (bare client: %.1f s)", len(h.pools), h.res.Cold.Seconds, h.res.Bare.Seconds)
	if h.cfg.Profiles != "" {
		h.heapProfile(ctx, "cold")
	}

	if err := h.quietTail(ctx, at, phaseColdTail, &h.res.ColdTail, "convergence"); err != nil {
		return err
	}
	// Counted once the operator is quiet: each cluster's autoscaler is made by a
	// controller of its own, which may finish after the last pool.
	return h.verifyObjects(ctx)
}

// quietTail waits from at until the operator is quiet, marks that window as the phase
// name and records its seconds and CPU into into; what names the moment at in the log.
func (h *harness) quietTail(ctx context.Context, at time.Time, name string, into *Phase, what string) error {
	before := h.cpuNow()
	last, quiet, err := h.waitQuiet(ctx, at)
	if err != nil {
		return err
	}
	h.mark(name, at, quiet)
	h.logf("    last write %.1f s after %s", last.Sub(at).Seconds(), what)
	into.Seconds = quiet.Sub(at).Seconds()
	into.CPU = h.cpuNow().since(before)
	return nil
}

func (h *harness) until(ctx context.Context, pools []*pool, pred func(*pool, *v1.NodeGroup) bool) (time.Time, error) {
	type result struct {
		at  time.Time
		err error
	}
	ch := make(chan result, 1)
	go func() {
		at, err := h.watch.until(ctx, pools, pred, h.cfg.Timeout)
		ch <- result{at, err}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case r := <-ch:
			return r.at, r.err
		case <-tick.C:
			if err := h.op.Alive(); err != nil {
				return time.Time{}, err
			}
		}
	}
}

// objectKey names an object by kind, namespace and name.
func objectKey(kind, ns, name string) string { return kind + " " + ns + "/" + name }

// verifyObjects lists what the operator created and checks every pool's objects: its
// MachineDeployment and health check, and the templates its status names. It records
// the count and the stored size of the objects, to compare with the bare client's.
func (h *harness) verifyObjects(ctx context.Context) error {
	present := map[string]bool{}
	var n int
	var bytes int64
	for _, gvk := range managedKinds {
		err := listAll(ctx, h.admin, gvk, client.MatchingLabels{names.LabelManagedBy: names.ManagedByValue}, func(u *unstructured.Unstructured) {
			if !poolObject(u) {
				return
			}
			present[objectKey(gvk.Kind, u.GetNamespace(), u.GetName())] = true
			n++
			bytes += storedSize(u)
		})
		if err != nil {
			return err
		}
	}
	h.res.Objects.Operator, h.res.Objects.OperatorBytes = n, bytes
	var missing []string
	for _, p := range h.pools {
		ng := h.watch.get(p)
		bootstrap := "TalosConfigTemplate"
		if p.os == v1.OSKairos {
			bootstrap = "KairosConfigTemplate"
		}
		md := names.MachineDeploymentName(ng.Spec.ClusterName, p.name)
		for _, key := range []string{
			objectKey("MachineDeployment", p.namespace, md),
			objectKey("MachineHealthCheck", p.namespace, md),
			objectKey(bootstrap, p.namespace, ng.Status.BootstrapTemplateName),
			objectKey("KubevirtMachineTemplate", p.namespace, ng.Status.InfrastructureTemplateName),
		} {
			if !present[key] {
				missing = append(missing, key)
			}
		}
	}
	h.res.Objects.Missing = len(missing)
	h.res.Objects.MissingSample = missing[:min(len(missing), 10)]
	h.logf("    %d objects (%.1f MiB; bare client: %d, %.1f MiB), %d missing", n, float64(bytes)/(1<<20),
		h.res.Objects.Bare, float64(h.res.Objects.BareBytes)/(1<<20), len(missing))
	return nil
}

// poolObject: an object of the operator's in a tenant namespace. The operator's own (its
// webhook certificate Secret, in the release namespace) are no pool's.
func poolObject(o metav1.Object) bool { return o.GetNamespace() != localrun.ReleaseNamespace }

// listAll lists every object of a kind in pages.
func listAll(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, sel client.MatchingLabels, f func(*unstructured.Unstructured)) error {
	cont := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, sel, client.Limit(500), client.Continue(cont)); err != nil {
			return fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			f(&list.Items[i])
		}
		if cont = list.GetContinue(); cont == "" {
			return nil
		}
	}
}

// runRestart stops the operator as a rolling update does (SIGTERM) and starts it again,
// now with the steady state's sync period, and times it until it has reconciled every
// pool and has nothing left to do: with everything in place it must write nothing.
func (h *harness) runRestart(ctx context.Context) error {
	if err := h.op.Alive(); err != nil {
		return err
	}
	h.res.ColdRun = h.op.usage()
	h.op.Stop(15 * time.Second)

	return h.restart(ctx, phaseRestart, &h.res.Restart, h.syncPeriod())
}

// restart starts the operator again, rendered for syncPeriod (0: the chart's default),
// and waits until it has reconciled every pool and is quiet; the window is phase's.
func (h *harness) restart(ctx context.Context, phase string, into *Phase, syncPeriod time.Duration) error {
	before := h.cpuNow()
	start := time.Now()
	if err := h.startOperator(ctx, syncPeriod); err != nil {
		return err
	}
	if phase == phaseRestart {
		h.profile(ctx, phaseRestart)
	}
	deadline := start.Add(h.cfg.Timeout)
	for {
		if err := h.op.Alive(); err != nil {
			return err
		}
		m, err := h.op.metricsOf(ctx, "nodegroup")
		if err == nil && m.reconciles >= float64(len(h.pools)) && m.idle() {
			into.Reconciles = int(m.reconciles)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the restarted operator did not reconcile every pool in %s (last: %+v, %v)", h.cfg.Timeout, m, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	end := time.Now()
	// The pools gauge counts, from the restarted operator's cache, every pool.
	if m, err := h.op.metricsOf(ctx, "nodegroup"); err != nil || int(m.pools) != len(h.pools) {
		return fmt.Errorf("the restarted operator's nodegroup_operator_pools sums to %v, want %d (%v)", m.pools, len(h.pools), err)
	}
	into.Seconds = end.Sub(start).Seconds()
	into.CPU = h.cpuNow().since(before)
	h.logf("    %d reconciles in %.1f s", into.Reconciles, into.Seconds)
	// The next phase starts once the restart's work is over, the pools' and every
	// other controller's (the autoscalers' first look at each cluster, say); its
	// requests count until then.
	if _, _, err := h.waitQuiet(ctx, end); err != nil {
		return err
	}
	// waitIdle begins after waitQuiet, so idle is not before quiet.
	idle, err := h.waitIdle(ctx)
	if err != nil {
		return err
	}
	into.IdleSeconds = idle.Sub(start).Seconds()
	h.logf("    every controller idle %.1f s after the start", into.IdleSeconds)
	h.mark(phase, start, idle)
	return nil
}

// idleFor is how long every controller of the operator must hold no work for it to
// count as idle: a requeue due in a moment is work left.
const idleFor = time.Second

// waitIdle waits until every controller of the operator has held no work for idleFor,
// and returns when that began.
func (h *harness) waitIdle(ctx context.Context) (time.Time, error) {
	deadline := time.Now().Add(h.cfg.Timeout)
	var since time.Time
	for {
		if err := h.op.Alive(); err != nil {
			return since, err
		}
		n, err := h.op.busy(ctx)
		now := time.Now()
		switch {
		case err != nil || n > 0:
			since = time.Time{}
		case since.IsZero():
			since = now
		case now.Sub(since) >= idleFor:
			return since, nil
		}
		if now.After(deadline) {
			return since, fmt.Errorf("the operator's controllers still held %v items after %s (%v)", n, h.cfg.Timeout, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return since, ctx.Err()
		}
	}
}

// runSteady counts, over the steady-state window, the reconciles the operator ran (its
// metrics) and, later from the audit log, the writes it sent; it samples the operator's
// resident memory, which the churn's is compared with.
func (h *harness) runSteady(ctx context.Context) error {
	r0, err := h.op.reconciles(ctx, "nodegroup")
	if err != nil {
		return err
	}
	before := h.cpuNow()
	start := time.Now()
	rss := startSampler(ctx, time.Second, h.rssNow)
	select {
	case <-time.After(h.cfg.Steady):
	case <-ctx.Done():
		rss.stop()
		return ctx.Err()
	}
	end := time.Now()
	sampled := rss.stop()
	h.res.Steady.RSSMiB = &sampled
	if err := h.op.Alive(); err != nil {
		return err
	}
	r1, err := h.op.reconciles(ctx, "nodegroup")
	if err != nil {
		return err
	}
	h.mark(phaseSteady, start, end)
	h.res.Steady.Seconds = end.Sub(start).Seconds()
	h.res.Steady.CPU = h.cpuNow().since(before)
	h.res.Steady.Reconciles = int(r1 - r0)
	h.res.SyncPeriod = h.syncPeriod().String()
	h.logf("    %d reconciles in %.0f s", h.res.Steady.Reconciles, h.res.Steady.Seconds)
	return nil
}

// runWave adds 1Gi of memory to every n-th pool, which changes both its templates (the
// machine size, and the kubelet reservations in the bootstrap config) and its
// MachineDeployment, and times it until every changed pool is rendered with new
// templates. Afterwards the superseded templates must be gone and the other pools'
// templates untouched.
func (h *harness) runWave(ctx context.Context) error {
	step := max(1, int(1/h.cfg.WaveFraction+0.5))
	type old struct {
		bootstrap, infra string
		generation       int64
	}
	olds := map[string]old{}
	var bumped []*pool
	for _, p := range h.pools {
		ng := h.watch.get(p)
		olds[p.key()] = old{bootstrap: ng.Status.BootstrapTemplateName, infra: ng.Status.InfrastructureTemplateName}
		if p.index%step == 0 {
			p.bumped = true
			bumped = append(bumped, p)
		}
	}
	h.res.Wave.Pools = len(bumped)
	before := h.cpuNow()
	r0, err := h.op.reconciles(ctx, "nodegroup")
	if err != nil {
		return err
	}
	start := time.Now()
	err = parallel(ctx, 16, len(bumped), func(ctx context.Context, i int) error {
		p := bumped[i]
		ng := h.watch.get(p).DeepCopy()
		patch := client.MergeFrom(ng.DeepCopy())
		mem := ng.Spec.Resources.Memory.DeepCopy()
		mem.Add(resource.MustParse("1Gi"))
		ng.Spec.Resources.Memory = mem
		if err := h.admin.Patch(ctx, ng, patch); err != nil {
			return fmt.Errorf("changing %s: %w", p.key(), err)
		}
		h.mu.Lock()
		o := olds[p.key()]
		o.generation = ng.Generation
		olds[p.key()] = o
		h.mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	h.res.Wave.PatchSeconds = time.Since(start).Seconds()
	at, err := h.until(ctx, bumped, func(p *pool, ng *v1.NodeGroup) bool {
		h.mu.Lock()
		o := olds[p.key()]
		h.mu.Unlock()
		return o.generation != 0 && ng.Generation >= o.generation && rendered(p, ng) &&
			ng.Status.InfrastructureTemplateName != o.infra && ng.Status.BootstrapTemplateName != o.bootstrap
	})
	if err != nil {
		return err
	}
	h.mark(phaseWave, start, at)
	h.res.Wave.Seconds = at.Sub(start).Seconds()
	h.res.Wave.CPU = h.cpuNow().since(before)
	h.logf("    %d pools have new templates %.1f s after the first change (changes sent in %.1f s)", len(bumped), h.res.Wave.Seconds, h.res.Wave.PatchSeconds)

	if err := h.quietTail(ctx, at, phaseWaveTail, &h.res.WaveTail, "the new templates"); err != nil {
		return err
	}
	r1, err := h.op.reconciles(ctx, "nodegroup")
	if err != nil {
		return err
	}
	h.res.Wave.Reconciles = int(r1 - r0)

	// Every pool has exactly the templates its status names: the changed pools' old
	// ones are deleted, the others' are the ones they had.
	templates := map[string][]string{}
	for _, gvk := range names.TemplateKinds {
		err := listAll(ctx, h.admin, gvk, client.MatchingLabels{names.LabelManagedBy: names.ManagedByValue}, func(u *unstructured.Unstructured) {
			key := u.GetNamespace() + "/" + u.GetLabels()[names.LabelPool]
			templates[key] = append(templates[key], u.GetName())
		})
		if err != nil {
			return err
		}
	}
	var wrong []string
	for _, p := range h.pools {
		ng := h.watch.get(p)
		o := olds[p.key()]
		want := []string{ng.Status.BootstrapTemplateName, ng.Status.InfrastructureTemplateName}
		if !p.bumped {
			want = []string{o.bootstrap, o.infra}
		}
		sort.Strings(want)
		got := templates[p.key()]
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			wrong = append(wrong, fmt.Sprintf("%s (bumped %t): templates %v, want %v", p.key(), p.bumped, got, want))
		}
	}
	h.res.Wave.TemplatesWrong = len(wrong)
	h.res.Wave.TemplatesWrongSample = wrong[:min(len(wrong), 10)]
	return nil
}

// heapProfile saves the operator's heap profile, and its Go memory statistics as text.
func (h *harness) heapProfile(ctx context.Context, phase string) {
	for path, file := range map[string]string{"heap": phase + "-heap.pprof", "heap?debug=1": phase + "-heap.txt"} {
		if err := h.op.profile(ctx, path, filepath.Join(h.cfg.Profiles, file)); err != nil {
			h.logf("    heap profile: %v", err)
		}
	}
}

// waitQuiet waits until the operator has sent no write (leader election aside) for
// Config.Quiet. It returns the time of its last write after since (since when there
// was none) and the moment the wait ended.
func (h *harness) waitQuiet(ctx context.Context, since time.Time) (last, quiet time.Time, err error) {
	last = since
	deadline := time.Now().Add(h.cfg.Timeout)
	for {
		t, err := h.tail.lastOperatorWrite()
		if err != nil {
			return last, quiet, err
		}
		if t.After(last) {
			last = t
		}
		if now := time.Now(); now.Sub(last) >= h.cfg.Quiet {
			return last, now, nil
		}
		if time.Now().After(deadline) {
			return last, quiet, fmt.Errorf("the operator kept writing for %s", h.cfg.Timeout)
		}
		if err := h.op.Alive(); err != nil {
			return last, quiet, err
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return last, quiet, ctx.Err()
		}
	}
}

// stopOperator reads the operator's peak memory and CPU, then stops it.
func (h *harness) stopOperator(ctx context.Context) error {
	if err := h.op.Alive(); err != nil {
		return err
	}
	h.profiles.Wait()
	// The process running now: the one restarted for the churn, once that began
	// (runChurn took the steady state's figures and heap profile before it).
	if h.churnStarted {
		if h.cfg.Profiles != "" {
			h.heapProfile(ctx, "churn")
		}
		h.res.ChurnRun = h.op.usage()
	} else {
		if h.cfg.Profiles != "" {
			h.heapProfile(ctx, "steady")
		}
		h.res.SteadyRun = h.op.usage()
	}
	h.res.PeakRSSMiB = max(h.res.ColdRun.PeakRSSMiB, h.res.SteadyRun.PeakRSSMiB, h.res.ChurnRun.PeakRSSMiB)
	h.op.Stop(15 * time.Second)
	if h.cfg.Profiles != "" {
		h.res.Profiles = h.cfg.Profiles
	}
	return nil
}
