package metrics

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// States of a pool, from its Ready condition.
const (
	StateReady    = "Ready"
	StateNotReady = "NotReady"
	StateUnknown  = "Unknown"
	StateDeleting = "Deleting"
)

// Causes of a pool that is not Ready: who must act on it (the pools gauge's cause
// label). The operator's code decides which reason is whose (Collector.Cause); the
// chart's alerts page the platform only for CausePlatform.
const (
	// CausePlatform: the platform must act (an apply or render that failed, a class's
	// pull secret or image missing, a control plane that does not come up, machines
	// that do not become ready).
	CausePlatform = "platform"
	// CauseTenant: the pool's spec asks for something the platform refuses or does not
	// have (a class or location that does not exist or is not allowed, a rule the pool
	// breaks); the tenant fixes it, and its status says how.
	CauseTenant = "tenant"
	// CauseProgressing: the machines are not all ready because a rollout or a scaling
	// is under way, and the pool is available meanwhile.
	CauseProgressing = "progressing"
)

// listTimeout bounds the list of a scrape: a cache not synced yet answers nothing
// rather than hold the scrape.
const listTimeout = 5 * time.Second

var (
	poolsDesc = prometheus.NewDesc(Prefix+"pools",
		"NodeGroups by class, location, OS, state (Ready, NotReady, Unknown, Deleting), the Ready condition's reason and, of a NotReady pool, who must act (cause: platform, tenant, progressing). Class and location are empty while the pool's does not resolve.",
		[]string{"class", "location", "os", "state", "reason", "cause"}, nil)
	tenantsDesc = prometheus.NewDesc(Prefix+"tenant_clusters",
		"Clusters with Talos pools by whether their tenant API server answered the last request (true, false, unknown: not tried since the operator started).",
		[]string{"reachable"}, nil)
)

// Tenants tells how many clusters' tenant API servers answered (internal/tenant.Status).
type Tenants interface {
	CountReachable() map[metav1.ConditionStatus]int
}

// Collector computes, at each scrape, the gauges of what the operator's cache holds:
// the pools by class, location, OS and state, and the tenant clusters by reachability.
// It reads the cache, not the API server, so a scrape costs a walk of the cached pools.
type Collector struct {
	// Pools lists NodeGroups: the manager's cache.
	Pools client.Reader
	// Tenants, when set, counts the clusters' tenant API servers by reachability.
	Tenants Tenants
	// Cause says who must act on a pool that is NotReady: CausePlatform, CauseTenant or
	// CauseProgressing, from its conditions and spec (the controller decides: its
	// package holds the reasons). Without it the cause label is empty.
	Cause func(*v1.NodeGroup) string
	// Elected, when set, is closed once this replica leads (a manager's Elected()):
	// only the leader reconciles and learns of tenants, so the others report nothing
	// rather than a second copy of the pools.
	Elected <-chan struct{}
}

// Describe sends the descriptions of the gauges.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolsDesc
	ch <- tenantsDesc
}

// Collect sends the gauges as the cache holds them now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.Elected != nil {
		select {
		case <-c.Elected:
		default:
			return
		}
	}
	c.collectPools(ch)
	if c.Tenants != nil {
		for status, n := range c.Tenants.CountReachable() {
			ch <- prometheus.MustNewConstMetric(tenantsDesc, prometheus.GaugeValue, float64(n), strings.ToLower(string(status)))
		}
	}
}

func (c *Collector) collectPools(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	var pools v1.NodeGroupList
	// The cache's own objects, read and not kept: no copy of every pool per scrape.
	if err := c.Pools.List(ctx, &pools, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).WithName("metrics").Error(err, "listing NodeGroups for the pools gauge")
		return
	}
	counts := map[poolLabels]int{}
	for i := range pools.Items {
		counts[c.labelsOf(&pools.Items[i])]++
	}
	for l, n := range counts {
		ch <- prometheus.MustNewConstMetric(poolsDesc, prometheus.GaugeValue, float64(n), l.class, l.location, l.os, l.state, l.reason, l.cause)
	}
}

type poolLabels struct{ class, location, os, state, reason, cause string }

// labelsOf is a pool's labels on the pools gauge. A class or location name is a label
// only once it resolved (the platform published it): a tenant's typo must not make a
// series. Only a NotReady pool has a cause.
func (c *Collector) labelsOf(ng *v1.NodeGroup) poolLabels {
	l := poolLabels{os: string(ng.Status.OS), state: StateUnknown}
	if meta.IsStatusConditionTrue(ng.Status.Conditions, v1.ConditionClassResolved) {
		l.class = ng.Spec.NodeGroupClassName
	}
	if meta.IsStatusConditionTrue(ng.Status.Conditions, v1.ConditionLocationResolved) {
		l.location = ng.Spec.LocationName
	}
	if r := meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionReady); r != nil {
		l.reason = r.Reason
		switch r.Status {
		case metav1.ConditionTrue:
			l.state = StateReady
		case metav1.ConditionFalse:
			l.state = StateNotReady
		}
	}
	switch {
	case !ng.DeletionTimestamp.IsZero():
		l.state = StateDeleting
	case l.state == StateNotReady && c.Cause != nil:
		l.cause = c.Cause(ng)
	}
	return l
}
