//go:build e2e

package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// Bounds the outages are held to.
const (
	// backWithin: the pools converge this soon after the API server answers again.
	backWithin = 30 * time.Second
	// maxOutageRate bounds the operator's mean requests per second while its API server
	// is away: retries with back-off, not a loop. (Its client would allow 20.)
	maxOutageRate = 5.0
	// outageWave is how many pools each outage's change wave changes.
	outageWave = 6
)

// outcome is one outage, for the report.
type outcome struct {
	name     string
	from     time.Time
	lasted   time.Duration
	peak     int
	mean     float64
	restarts int
	took     time.Duration
	breaks   []string
	// asked is what the operator sent while away, most first.
	asked []framework.KindCount
}

func (w *world) outages(ctx context.Context, d, converge time.Duration) ([]outcome, error) {
	var out []outcome
	// From here on the operator may exit on its own (a lost lease, a certificate it
	// cannot read): it is restarted as a Pod's container is, until the last outage ends.
	w.kubelet = w.superviseOperator(ctx)
	defer w.kubelet.stop()
	for _, o := range []struct {
		name string
		run  func(context.Context, time.Duration, time.Duration) (outcome, error)
	}{
		{"management kube-apiserver stopped", w.apiServerOutage},
		{"management answers 429 and 500", w.errorWindow},
		{"a tenant's kube-apiserver stopped", w.tenantOutage},
	} {
		restarts := w.kubelet.count()
		res, err := o.run(ctx, d, converge)
		res.restarts = w.kubelet.count() - restarts
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		res.name = o.name
		fmt.Printf("outage: %s at %s for %s: %d req/s peak, %.1f mean, %d operator restarts, converged %.1fs after, %d broken\n",
			res.name, res.from.Format(time.TimeOnly), res.lasted.Round(time.Second), res.peak, res.mean, res.restarts, res.took.Seconds(), len(res.breaks))
		for _, k := range res.asked[:min(8, len(res.asked))] {
			fmt.Printf("         %5d  %s\n", k.N, k.Kind)
		}
		for _, b := range res.breaks {
			fmt.Printf("         BROKEN: %s\n", b)
		}
		out = append(out, res)
	}
	return out, nil
}

// apiServerOutage stops the management kube-apiserver in the middle of a change wave,
// for d, with the operator restarted as a kubelet restarts a container whenever it
// exits.
func (w *world) apiServerOutage(ctx context.Context, d, converge time.Duration) (outcome, error) {
	return w.duringWave(ctx, d, converge, "6Gi", func() error { return w.env.StopAPIServer() },
		func() error { return w.env.StartAPIServer(ctx) })
}

// errorWindow has the proxy answer every request of the operator with 429 (Retry-After:
// 1) and 500 in turn, for d, in the middle of a change wave.
func (w *world) errorWindow(ctx context.Context, d, converge time.Duration) (outcome, error) {
	return w.duringWave(ctx, d, converge, "7Gi", func() error {
		w.env.Proxy.Refuse(d, http.StatusTooManyRequests, http.StatusInternalServerError)
		return nil
	}, func() error { return nil })
}

// duringWave changes outageWave idle pools to memory, takes the API server away (down)
// once the operator has begun on them, brings it back (up) after d, and waits for the
// pools to converge, holding the invariants, the request rate while away and the time
// to converge after.
func (w *world) duringWave(ctx context.Context, d, converge time.Duration, memory string, down, up func() error) (outcome, error) {
	var o outcome
	pools := w.idle(outageWave)
	base := w.env.Proxy.Writes()
	for _, i := range pools {
		w.changed[i] = true
		if err := w.updatePool(ctx, i, func(ng *v1.NodeGroup) { ng.Spec.Resources.Memory = resource.MustParse(memory) }); err != nil {
			return o, err
		}
	}
	for deadline := time.Now().Add(10 * time.Second); w.env.Proxy.Writes() < base+3 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if err := down(); err != nil {
		return o, err
	}
	from := time.Now()
	o.from = from
	time.Sleep(d)
	if err := up(); err != nil {
		return o, err
	}
	back := time.Now()
	o.lasted = back.Sub(from)
	o.peak, o.mean = w.env.Proxy.Rate(from, back)
	o.asked = w.env.Proxy.Kinds(from, back)
	took, breaks, err := w.waitConverged(ctx, back, converge, 3*time.Second)
	if err != nil {
		return o, err
	}
	o.took, o.breaks = took, breaks
	if took > backWithin {
		o.breaks = append(o.breaks, fmt.Sprintf("converged %.1fs after the API server's return, want within %s", took.Seconds(), backWithin))
	}
	if o.mean > maxOutageRate {
		o.breaks = append(o.breaks, fmt.Sprintf("%.1f requests/s while away, want at most %.0f", o.mean, maxOutageRate))
	}
	return o, nil
}

// idle picks n existing autoscaled pools at zero, the lowest indexes not picked before.
func (w *world) idle(n int) []int {
	var out []int
	for _, p := range w.plan.pools {
		if len(out) == n {
			break
		}
		if w.exists[p.index] && !p.machines && w.replicas[p.index] == 0 && !w.picked[p.index] {
			w.picked[p.index] = true
			out = append(out, p.index)
		}
	}
	return out
}

// supervisor restarts the operator whenever it has ended, as the kubelet restarts a
// container: after a back-off of 10 s, doubled for each restart, at most 5 minutes, and
// 10 s again once a run lasted 10 minutes.
type supervisor struct {
	quit     chan struct{}
	done     chan struct{}
	restarts atomic.Int64
}

// count is how often it has restarted the operator.
func (s *supervisor) count() int { return int(s.restarts.Load()) }

func (w *world) superviseOperator(ctx context.Context) *supervisor {
	s := &supervisor{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		const first = 10 * time.Second
		backoff, started := first, time.Now()
		for {
			select {
			case <-s.quit:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if w.env.OperatorRunning() {
				continue
			}
			if time.Since(started) > 10*time.Minute {
				backoff = first // ran 10 minutes: the kubelet forgets the back-off
			}
			select {
			case <-s.quit:
				return
			case <-time.After(backoff):
			}
			backoff, started = min(2*backoff, 5*time.Minute), time.Now()
			s.restarts.Add(1)
			_ = w.env.StartOperator(ctx) // not ready in time: stopped, and retried
		}
	}()
	return s
}

// stop ends the supervision.
func (s *supervisor) stop() {
	close(s.quit)
	<-s.done
}

// tenantOutage stops the API server of one tenant cluster, a namespace of its own with
// two pools, for d, while a change wave runs on pools of the other tenant: that
// tenant's pools report it unreachable, the others converge meanwhile, and nothing is
// deleted in either tenant or in the management cluster.
func (w *world) tenantOutage(ctx context.Context, d, converge time.Duration) (outcome, error) {
	var o outcome
	ns := len(w.plan.namespaces())
	name := namespace(ns)
	t, err := w.env.NewTenant(ctx, name, false)
	if err != nil {
		return o, err
	}
	w.env.UseTenant(name, t)
	if err := testenv.CreateTenant(ctx, w.env.Client, name, testenv.TenantOptions{Labels: map[string]string{"tenant": "true"}, ProviderEndpoint: true}); err != nil {
		return o, err
	}
	var down []int
	for j := range 2 {
		i := len(w.plan.pools)
		w.plan.pools = append(w.plan.pools, pool{index: i, ns: ns, name: fmt.Sprintf("down%d", j)})
		if err := w.start(ctx, step{kind: cold, pools: []int{i}}); err != nil {
			return o, err
		}
		down = append(down, i)
	}
	if _, breaks, err := w.waitConverged(ctx, time.Now(), converge, 3*time.Second); err != nil || len(breaks) > 0 {
		return o, fmt.Errorf("the second tenant's pools did not converge: %v %v", breaks, err)
	}
	before, err := w.tenantUIDs(ctx, name)
	if err != nil {
		return o, err
	}

	t.StopAPIServer()
	from := time.Now()
	o.from = from
	w.away = name
	pools := w.idle(outageWave)
	for _, i := range pools {
		w.changed[i] = true
		if err := w.updatePool(ctx, i, func(ng *v1.NodeGroup) { ng.Spec.Resources.Memory = resource.MustParse("8Gi") }); err != nil {
			return o, err
		}
	}
	took, breaks, err := w.waitConverged(ctx, from, d, 3*time.Second)
	if err != nil {
		return o, err
	}
	for _, b := range breaks {
		o.breaks = append(o.breaks, "the other tenant's pools while one was away: "+b)
	}
	fmt.Printf("outage: with tenant %s away, the other tenant's change wave converged in %.1fs\n", name, took.Seconds())
	for _, i := range down {
		ng := &v1.NodeGroup{}
		if err := w.env.Client.Get(ctx, w.key(i), ng); err != nil {
			return o, err
		}
		if c := meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionTenantClusterReachable); c == nil || c.Status != metav1.ConditionFalse || c.Reason != joinidentity.ReasonUnreachable {
			o.breaks = append(o.breaks, fmt.Sprintf("pool %s does not report its tenant unreachable: %+v", w.key(i), c))
		}
	}
	if rest := d - time.Since(from); rest > 0 {
		time.Sleep(rest)
	}
	if err := t.StartAPIServer(ctx); err != nil {
		return o, err
	}
	back := time.Now()
	o.lasted = back.Sub(from)
	o.peak, o.mean = w.env.Proxy.Rate(from, back)
	o.asked = w.env.Proxy.Kinds(from, back)
	w.away = ""
	took, breaks, err = w.waitConverged(ctx, back, converge, 3*time.Second)
	if err != nil {
		return o, err
	}
	// Converged includes the away tenant's pools Ready again; they say it reachable too.
	reachable := back
	for _, i := range down {
		for ng := (&v1.NodeGroup{}); ; time.Sleep(time.Second) {
			if err := w.env.Client.Get(ctx, w.key(i), ng); err != nil {
				return o, err
			}
			if c := meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionTenantClusterReachable); c != nil && c.Status == metav1.ConditionTrue {
				reachable = latest(reachable, c.LastTransitionTime.Time)
				break
			}
			if time.Since(back) > converge {
				breaks = append(breaks, fmt.Sprintf("pool %s does not report its tenant reachable again", w.key(i)))
				break
			}
		}
	}
	took = max(took, reachable.Sub(back))
	o.took, o.breaks = took, append(o.breaks, breaks...)
	if took > backWithin {
		o.breaks = append(o.breaks, fmt.Sprintf("converged %.1fs after the tenant's return, want within %s", took.Seconds(), backWithin))
	}
	after, err := w.tenantUIDs(ctx, name)
	if err != nil {
		return o, err
	}
	for _, uid := range before {
		if !slices.Contains(after, uid) {
			o.breaks = append(o.breaks, "deleted in a tenant cluster during the outage: "+string(uid))
		}
	}
	return o, nil
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// tenantUIDs are the UIDs of the bootstrap token Secrets and Nodes of the shared tenant
// and of the namespace's own.
func (w *world) tenantUIDs(ctx context.Context, ns string) ([]types.UID, error) {
	var out []types.UID
	for _, c := range []client.Client{w.env.Tenant.Client, w.env.TenantFor(ns).Client} {
		var secrets corev1.SecretList
		if err := c.List(ctx, &secrets, client.InNamespace(metav1.NamespaceSystem)); err != nil {
			return nil, err
		}
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return nil, err
		}
		for _, s := range secrets.Items {
			if s.Type == corev1.SecretTypeBootstrapToken {
				out = append(out, s.UID)
			}
		}
		for _, n := range nodes.Items {
			out = append(out, n.UID)
		}
	}
	return out, nil
}
