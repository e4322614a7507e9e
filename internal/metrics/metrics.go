// Package metrics is the operator's own metrics, served with controller-runtime's on
// the manager's metrics endpoint. Register adds every one of them to a registry, once;
// the packages that count call the functions here and never define a metric.
//
// No label names a pool, a namespace or a cluster: thousands of tenants would make as
// many series. A label's values come from the operator's code (reasons, rules, kinds)
// or from what the platform publishes (classes, locations), never from a tenant's
// free text.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Prefix starts the name of every metric of the operator.
const Prefix = "nodegroup_operator_"

// Verdicts of an admission request.
const (
	VerdictAllowed = "allowed"
	VerdictDenied  = "denied"
	VerdictError   = "error"
)

// Triggers of the time a pool takes to become Ready.
const (
	// TriggerCreated: the pool was created (generation 1), timed from its creation.
	TriggerCreated = "created"
	// TriggerChanged: the pool's spec changed, timed from the first reconcile that saw
	// the new generation.
	TriggerChanged = "changed"
)

var (
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: Prefix + "reconcile_errors_total",
		Help: "Reconciles of a NodeGroup that ended with the pool failing, by the reason of the first failing condition Ready is derived from (Error: an API error, no condition).",
	}, []string{"reason"})

	statusConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: Prefix + "status_conflicts_total",
		Help: "Reconciles of a NodeGroup whose status write was refused because the pool changed since it was read (an optimistic-lock conflict); the pool is reconciled again, and the reconcile is not counted as failed.",
	})

	cacheLagWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: Prefix + "cache_lag_waits_total",
		Help: "Reconciles of a NodeGroup put off because the cache did not hold the operator's own last write of the pool yet; the pool is reconciled again a moment later, on the copy that holds it.",
	})

	readySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: Prefix + "pool_ready_seconds",
		Help: "Time a NodeGroup took to become Ready at a generation: from its creation (trigger=created) or from the first reconcile of a changed spec (trigger=changed). Observed once, when Ready turns True at that generation.",
		// From a pool whose machines exist already to a slow image pull and boot.
		Buckets: []float64{10, 30, 60, 120, 180, 300, 600, 900, 1800, 3600, 7200},
	}, []string{"trigger"})

	templates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: Prefix + "templates_total",
		Help: "Bootstrap and infrastructure templates written, by kind and action: created (a new content of a pool's template) or deleted (superseded, no MachineSet uses it).",
	}, []string{"kind", "action"})

	admissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: Prefix + "admissions_total",
		Help: "Admission requests the validating webhook answered, by resource, verdict (allowed, denied, error) and the rule that decided a denial (the first one broken).",
	}, []string{"resource", "verdict", "rule"})
)

// Register adds every metric of the operator to reg, with c computing the gauges of
// what the cache holds (nil: none). The operator registers into controller-runtime's
// registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry), once; a test into a
// registry of its own.
func Register(reg prometheus.Registerer, c *Collector) error {
	for _, m := range collectors(c) {
		if err := reg.Register(m); err != nil {
			return err
		}
	}
	return nil
}

// collectors are the operator's metrics, with c when not nil.
func collectors(c *Collector) []prometheus.Collector {
	cs := []prometheus.Collector{reconcileErrors, statusConflicts, cacheLagWaits, readySeconds, templates, admissions}
	if c != nil {
		cs = append(cs, c)
	}
	return cs
}

// ReconcileFailed counts a reconcile that ended with the pool failing for reason.
func ReconcileFailed(reason string) { reconcileErrors.WithLabelValues(reason).Inc() }

// StatusConflict counts a status write refused with a conflict.
func StatusConflict() { statusConflicts.Inc() }

// CacheLagWait counts a reconcile put off until the cache holds the operator's own
// last write of the pool.
func CacheLagWait() { cacheLagWaits.Inc() }

// TemplateCreated counts a template of kind created.
func TemplateCreated(kind string) { templates.WithLabelValues(kind, "created").Inc() }

// TemplateDeleted counts a superseded template of kind deleted.
func TemplateDeleted(kind string) { templates.WithLabelValues(kind, "deleted").Inc() }

// Admitted counts an admission request for resource answered with verdict; rule is
// the rule that denied it (empty when allowed).
func Admitted(resource, verdict, rule string) {
	admissions.WithLabelValues(resource, verdict, rule).Inc()
}
