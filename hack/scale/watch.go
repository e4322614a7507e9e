package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// poolWatch follows the pools through one watch (no polling lists, which would load the
// API server being measured) and tells the moment a condition first held for a set of
// pools.
type poolWatch struct {
	cancel context.CancelFunc
	pools  map[string]*pool

	mu     sync.Mutex
	latest map[string]*v1.NodeGroup
	wait   *waiter
}

type waiter struct {
	pending map[string]bool
	pred    func(*pool, *v1.NodeGroup) bool
	done    chan struct{}
	at      time.Time
}

func startPoolWatch(ctx context.Context, cfg *rest.Config, pools map[string]*pool) (*poolWatch, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	c, err := cache.New(cfg, cache.Options{Scheme: testenv.Scheme(), DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	// The watch lives until stop, not until the caller's context ends.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &poolWatch{cancel: cancel, pools: pools, latest: map[string]*v1.NodeGroup{}}
	inf, err := c.GetInformer(ctx, &v1.NodeGroup{})
	if err != nil {
		cancel()
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.seen,
		UpdateFunc: func(_, obj any) { w.seen(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("the pool watch did not sync")
	}
	return w, nil
}

func (w *poolWatch) stop() { w.cancel() }

func (w *poolWatch) seen(obj any) {
	ng, ok := obj.(*v1.NodeGroup)
	if !ok {
		return
	}
	key := ng.Namespace + "/" + ng.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	w.latest[key] = ng
	if wt := w.wait; wt != nil && wt.pending[key] && wt.pred(w.pools[key], ng) {
		delete(wt.pending, key)
		if len(wt.pending) == 0 {
			wt.at = time.Now()
			close(wt.done)
			w.wait = nil
		}
	}
}

// get returns the latest copy of a pool the watch saw (not to be modified).
func (w *poolWatch) get(p *pool) *v1.NodeGroup {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest[p.key()]
}

// until waits until pred holds for every pool of pools and returns the moment it first
// held for the last of them.
func (w *poolWatch) until(ctx context.Context, pools []*pool, pred func(*pool, *v1.NodeGroup) bool, timeout time.Duration) (time.Time, error) {
	w.mu.Lock()
	wt := &waiter{pending: map[string]bool{}, pred: pred, done: make(chan struct{})}
	for _, p := range pools {
		if ng := w.latest[p.key()]; ng == nil || !pred(p, ng) {
			wt.pending[p.key()] = true
		}
	}
	if len(wt.pending) == 0 {
		w.mu.Unlock()
		return time.Now(), nil
	}
	w.wait = wt
	w.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-wt.done:
		return wt.at, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-timer.C:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wait = nil
	var sample []string
	for key := range wt.pending {
		state := "not seen"
		if ng := w.latest[key]; ng != nil {
			state = describe(ng)
		}
		sample = append(sample, key+": "+state)
	}
	sort.Strings(sample)
	return time.Time{}, fmt.Errorf("%d of %d pools not there after %s, e.g. %s", len(wt.pending), len(pools), timeout,
		strings.Join(sample[:min(len(sample), 5)], "; "))
}

// rendered: the pool's status describes its current generation, Rendered is True and
// its templates are named.
func rendered(_ *pool, ng *v1.NodeGroup) bool {
	c := meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionRendered)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ng.Generation &&
		ng.Status.ObservedGeneration == ng.Generation &&
		ng.Status.MachineDeploymentName != "" && ng.Status.BootstrapTemplateName != "" && ng.Status.InfrastructureTemplateName != ""
}

func describe(ng *v1.NodeGroup) string {
	c := meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionRendered)
	if c == nil {
		return fmt.Sprintf("generation %d, observed %d, no Rendered condition", ng.Generation, ng.Status.ObservedGeneration)
	}
	return fmt.Sprintf("generation %d, observed %d, Rendered=%s %s: %s", ng.Generation, ng.Status.ObservedGeneration, c.Status, c.Reason, c.Message)
}
