package nodegroup

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
)

// Reasons of conditions the controller sets itself.
const (
	ReasonResolved         = "Resolved"
	ReasonApplied          = "Applied"
	ReasonRenderFailed     = "RenderFailed"
	ReasonApplyFailed      = "ApplyFailed"
	ReasonWaiting          = "WaitingForDependencies"
	ReasonMachinesReady    = "MachinesReady"
	ReasonMachinesNotReady = "MachinesNotReady"
	ReasonPolicyViolation  = "PolicyViolation"
	// ReasonLocationNotAllowed and ReasonVersionAhead name the policy rules that have a
	// reason of their own.
	ReasonLocationNotAllowed = "LocationNotAllowed"
	ReasonVersionAhead       = "VersionAheadOfControlPlane"
	ReasonCredentialsFailed  = "CredentialsFailed"
	// ReasonTemplateModified (TemplatesIntact False): someone else changed a current
	// template; ReasonTemplatesIntact (True): the current templates are as created.
	ReasonTemplateModified = "TemplateModified"
	ReasonTemplatesIntact  = "TemplatesIntact"
	// ReasonReplicasRestored is the event of replicas that someone else moved out of
	// the pool's range, brought back into it.
	ReasonReplicasRestored = "ReplicasRestored"
	// ReasonNotChecked is the reason of a condition that has never been evaluated: it
	// is Unknown until the step that decides it runs (an earlier step failed, or what it
	// reports is not known yet).
	ReasonNotChecked = "NotChecked"
)

// readyFrom are the conditions Ready is derived from, in the order a pool passes them.
// The Talos join and autoscaler conditions do not feed it: they report the tenant
// cluster's side, and a pool at its largest size (AbleToScaleUp=False) is ready.
var readyFrom = []string{v1.ConditionClassResolved, v1.ConditionLocationResolved, v1.ConditionClusterFound, v1.ConditionRendered}

// scope is what one reconcile learned of its pool, for the status step: a finding for
// each condition the reconcile is responsible for, the release the pool resolved to and
// the objects it applied when it got that far, and its machines when it looked at
// them. A condition it holds no finding for is left exactly as it is, and so is a field
// of what it did not learn; Ready is never found, but derived (ready).
type scope struct {
	findings []finding
	// paused: the reconcile did nothing but find the pool paused; the status says so
	// and not that the pool's generation was acted on.
	paused   bool
	release  *release
	objects  *objects
	machines *machines
}

// release is what the pool runs: its class's OS and its Kubernetes release.
type release struct {
	os                v1.OSFamily
	kubernetesVersion string
}

// objects are the names of the pool's MachineDeployment and of its current templates.
type objects struct{ machineDeployment, bootstrap, infrastructure string }

// finding is what a reconcile learned of one condition. Without a status the condition
// was not evaluated: it keeps what it said, with the generation it said it for, or is
// Unknown (NotChecked) when it never said anything. remove says the condition does not
// apply to the pool.
type finding struct {
	typ             string
	status          metav1.ConditionStatus
	reason, message string
	remove          bool
	// generation, when set, is the generation the finding holds for (Ready derived from
	// a condition evaluated for an earlier one); otherwise the pool's current one.
	generation int64
}

// machines are what the pool's MachineDeployment and Machines say: the machines it has,
// those ready, available and up to date, how many it wants, and every machine that is
// not running (sorted by name; the status lists the first MaxNotRunningMachines).
type machines struct {
	replicas, ready, desired, available, upToDate int32
	notRunning                                    []v1.MachineNotRunning
}

// newScope is the scope of a reconcile that has found nothing yet: the conditions of
// readyFrom are due on every pool.
func newScope() *scope {
	s := &scope{}
	for _, t := range readyFrom {
		s.set(t, "", "", "")
	}
	return s
}

// set records a condition's status, reason and message; an empty status records only
// that the condition applies to the pool, and leaves it as it is.
func (s *scope) set(typ string, status metav1.ConditionStatus, reason, message string) {
	s.put(finding{typ: typ, status: status, reason: reason, message: message})
}

// pause records that the pool is left alone, and why (paused.Why).
func (s *scope) pause(why string) {
	s.paused = true
	s.set(paused.Condition, metav1.ConditionTrue, clusterv1.PausedReason, why)
}

// remove records that a condition does not apply to the pool.
func (s *scope) remove(typ string) { s.put(finding{typ: typ, remove: true}) }

func (s *scope) put(f finding) {
	if i := slices.IndexFunc(s.findings, func(g finding) bool { return g.typ == f.typ }); i >= 0 {
		s.findings[i] = f
		return
	}
	s.findings = append(s.findings, f)
}

// observed records what the MachineDeployment and the pool's machines say: the
// MachineDeployment wants desired machines, notRunning are those not running, and
// rolling names what a rollout rolls out. It finds the conditions of the pool's
// machines in Cluster API's v1beta2 style (machines.conditions).
func (s *scope) observed(md *clusterv1.MachineDeployment, desired int32, notRunning []v1.MachineNotRunning, rolling string) {
	m := &machines{replicas: deref(md.Status.Replicas), ready: deref(md.Status.ReadyReplicas), desired: desired,
		available: deref(md.Status.AvailableReplicas), upToDate: deref(md.Status.UpToDateReplicas), notRunning: notRunning}
	s.machines = m
	for _, c := range m.conditions(md.Status.Conditions, rolling) {
		s.put(c)
	}
}

// conditions are the findings of the pool's conditions of its machines: Available,
// RollingOut, ScalingUp, ScalingDown and UpToDate (mirror.finding).
func (m *machines) conditions(mdConds []metav1.Condition, rolling string) []finding {
	upToDate := fmt.Sprintf("%d of %d machines up to date", m.upToDate, m.replicas)
	scaling := fmt.Sprintf("from %d to %d machines", m.replicas, m.desired)
	count := fmt.Sprintf("%d of %d machines", m.replicas, m.desired)
	available := fmt.Sprintf("%d of %d machines available", m.available, m.desired)
	var out []finding
	for _, c := range []mirror{
		{v1.ConditionAvailable, clusterv1.AvailableCondition, m.available >= m.desired,
			clusterv1.AvailableReason, clusterv1.NotAvailableReason, metav1.ConditionFalse, available, available},
		{v1.ConditionRollingOut, clusterv1.RollingOutCondition, m.upToDate < m.replicas,
			clusterv1.RollingOutReason, clusterv1.NotRollingOutReason, metav1.ConditionTrue,
			upToDate + ", rolling out " + rolling, "not rolling out, " + upToDate},
		{v1.ConditionScalingUp, clusterv1.ScalingUpCondition, m.replicas < m.desired,
			clusterv1.ScalingUpReason, clusterv1.NotScalingUpReason, metav1.ConditionTrue, "scaling up " + scaling, "not scaling up, " + count},
		{v1.ConditionScalingDown, clusterv1.ScalingDownCondition, m.replicas > m.desired,
			clusterv1.ScalingDownReason, clusterv1.NotScalingDownReason, metav1.ConditionTrue, "scaling down " + scaling, "not scaling down, " + count},
		{v1.ConditionUpToDate, clusterv1.MachinesUpToDateCondition, m.upToDate >= m.replicas,
			clusterv1.UpToDateReason, clusterv1.NotUpToDateReason, metav1.ConditionFalse, upToDate, upToDate},
	} {
		out = append(out, c.finding(mdConds))
	}
	return out
}

// mirror is one of the pool's conditions of its machines, and the MachineDeployment's
// condition it mirrors.
type mirror struct {
	typ, from string
	// derived is the status from the counts (True with reason yes, False with no), for a
	// MachineDeployment without the condition.
	derived bool
	yes, no string
	// notable is the status in which Cluster API's message is worth repeating.
	notable metav1.ConditionStatus
	// whenTrue and whenFalse are the pool's message in either status.
	whenTrue, whenFalse string
}

// finding is the condition: the status and reason of the MachineDeployment's (of
// mdConds) where it has one, else derived from the counts; the message says what goes
// on in the pool's words, followed by Cluster API's while its status is notable.
func (c mirror) finding(mdConds []metav1.Condition) finding {
	f := finding{typ: c.typ, status: metav1.ConditionFalse, reason: c.no}
	if c.derived {
		f.status, f.reason = metav1.ConditionTrue, c.yes
	}
	md := meta.FindStatusCondition(mdConds, c.from)
	if md != nil {
		f.status, f.reason = md.Status, md.Reason
	}
	f.message = c.whenFalse
	if f.status == metav1.ConditionTrue {
		f.message = c.whenTrue
	}
	if md != nil && md.Status == c.notable && md.Message != "" {
		f.message += ": " + oneLine(md.Message)
	}
	return f
}

// conditions computes every condition of the pool at generation gen from the scope and
// from the conditions as they were (old, left unchanged): each finding applied in turn,
// then Ready derived from the result.
func (s *scope) conditions(old []metav1.Condition, gen int64) []metav1.Condition {
	conds := slices.Clone(old)
	for _, f := range s.findings {
		f.apply(&conds, gen)
	}
	s.ready(conds, gen).apply(&conds, gen)
	return conds
}

func (f finding) apply(conds *[]metav1.Condition, gen int64) {
	switch {
	case f.remove:
		meta.RemoveStatusCondition(conds, f.typ)
	case f.status != "":
		meta.SetStatusCondition(conds, metav1.Condition{Type: f.typ, Status: f.status, Reason: f.reason, Message: f.message,
			ObservedGeneration: cmp.Or(f.generation, gen)})
	case meta.FindStatusCondition(*conds, f.typ) == nil:
		meta.SetStatusCondition(conds, metav1.Condition{Type: f.typ, Status: metav1.ConditionUnknown, Reason: ReasonNotChecked,
			Message: "not checked yet", ObservedGeneration: gen})
	}
}

// ready derives Ready from the conditions of readyFrom and the machines:
//   - the first of readyFrom that is not True decides: Ready takes its status (False,
//     or Unknown), reason, message and generation;
//   - when all are True, the machines decide: True (MachinesReady) when the
//     MachineDeployment has the machines it wants and all are ready, else False
//     (MachinesNotReady), for the oldest generation the four hold for;
//   - when all are True but the machines were not looked at in this reconcile (the
//     cache has not seen a MachineDeployment that another reconcile created), Ready
//     keeps what it said.
func (s *scope) ready(conds []metav1.Condition, gen int64) finding {
	f := finding{typ: v1.ConditionReady, generation: gen}
	for _, t := range readyFrom {
		c := meta.FindStatusCondition(conds, t)
		if c == nil {
			return finding{typ: v1.ConditionReady}
		}
		if c.Status != metav1.ConditionTrue {
			f.status, f.reason, f.message, f.generation = c.Status, c.Reason, c.Message, c.ObservedGeneration
			return f
		}
		f.generation = min(f.generation, c.ObservedGeneration)
	}
	m := s.machines
	if m == nil {
		return finding{typ: v1.ConditionReady}
	}
	f.status, f.reason = metav1.ConditionFalse, ReasonMachinesNotReady
	if m.ready >= m.desired && m.replicas == m.desired {
		f.status, f.reason = metav1.ConditionTrue, ReasonMachinesReady
	}
	f.message = fmt.Sprintf("%d of %d machines ready", m.ready, m.desired)
	return f
}

// The words of status.summary; a failed pool's is summaryFailed and a reason.
const (
	summaryReady      = "Ready"
	summaryRollingOut = "RollingOut"
	summaryScaling    = "Scaling"
	summaryNotReady   = "NotReady"
	summaryPending    = "Pending"
	summaryPaused     = "Paused"
	summaryFailed     = "Failed: "
)

// summary is the pool's state in one word, from its conditions (status.summary, the
// STATUS column): Paused while the pool is left alone (its other conditions are as
// last evaluated); Failed with Ready's reason when a condition Ready is derived from is
// False; Pending while Ready is Unknown; else RollingOut, Scaling, Ready or NotReady.
func summary(conds []metav1.Condition) string {
	ready := meta.FindStatusCondition(conds, v1.ConditionReady)
	switch {
	case meta.IsStatusConditionTrue(conds, paused.Condition):
		return summaryPaused
	case ready == nil || ready.Status == metav1.ConditionUnknown:
		return summaryPending
	case ready.Status == metav1.ConditionFalse && ready.Reason != ReasonMachinesNotReady:
		return summaryFailed + ready.Reason
	case meta.IsStatusConditionTrue(conds, v1.ConditionRollingOut):
		return summaryRollingOut
	case meta.IsStatusConditionTrue(conds, v1.ConditionScalingUp), meta.IsStatusConditionTrue(conds, v1.ConditionScalingDown):
		return summaryScaling
	case ready.Status == metav1.ConditionTrue:
		return summaryReady
	}
	return summaryNotReady
}

// writeStatus is the status step: it computes the pool's status from what the
// reconcile found (s) and sends it, when it differs from the status read at the start
// (old.Status), as a merge patch of the status that carries the resourceVersion read.
// A pool changed since is refused with a conflict, rather than overwriting what
// changed; Reconcile then runs again shortly on the pool as it is now (conflictDelay),
// without counting a failure. A steady state sends nothing.
//
// An event marks each condition that changed status or reason. A new pool's first
// status gets at most one: its Rendered condition when it is not rendered, which names
// what the pool waits for. A pool that renders on its first try is announced by its
// status alone: thousands of pools created at once should not mean thousands of events.
func (r *Reconciler) writeStatus(ctx context.Context, old, ng *v1.NodeGroup, s *scope) error {
	if !s.paused {
		ng.Status.ObservedGeneration = ng.Generation
	}
	ng.Status.Conditions = s.conditions(old.Status.Conditions, ng.Generation)
	if r := s.release; r != nil {
		ng.Status.OS, ng.Status.KubernetesVersion = r.os, r.kubernetesVersion
	}
	if o := s.objects; o != nil {
		ng.Status.MachineDeploymentName, ng.Status.BootstrapTemplateName, ng.Status.InfrastructureTemplateName =
			o.machineDeployment, o.bootstrap, o.infrastructure
	}
	if m := s.machines; m != nil {
		ng.Status.Replicas, ng.Status.ReadyReplicas, ng.Status.DesiredReplicas = m.replicas, m.ready, &m.desired
		ng.Status.AvailableReplicas, ng.Status.UpToDateReplicas = m.available, m.upToDate
		ng.Status.Ready = fmt.Sprintf("%d/%d", m.ready, m.desired)
		ng.Status.NotRunningMachineCount = int32(len(m.notRunning))
		ng.Status.NotRunningMachines = nil
		if len(m.notRunning) > 0 {
			ng.Status.NotRunningMachines = m.notRunning[:min(len(m.notRunning), v1.MaxNotRunningMachines)]
		}
	}
	ng.Status.Summary = summary(ng.Status.Conditions)
	if statusEqual(&old.Status, &ng.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, ng, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("status of NodeGroup %s: %w", ng.Name, err)
	}
	r.written.wrote(ng)
	first := len(old.Status.Conditions) == 0
	for _, c := range ng.Status.Conditions {
		if first && (c.Type != v1.ConditionRendered || c.Status == metav1.ConditionTrue) {
			continue
		}
		was := meta.FindStatusCondition(old.Status.Conditions, c.Type)
		if was != nil && was.Status == c.Status && was.Reason == c.Reason {
			continue
		}
		kind, ok := eventKind(c, was)
		if ok {
			r.event(ng, kind, c.Reason, "UpdateStatus", "%s=%s: %s", c.Type, c.Status, c.Message)
		}
	}
	return nil
}

// eventKind is the type of the event that marks a change of condition c (was, before),
// and whether it has one. An event marks a change of what was known: a condition found
// for the first time (absent before, or Unknown because never evaluated) has one only
// when it is False. Its status tells the rest, and a cluster's thousands of pools
// learning at once that its identity is made or its autoscaler deployed would
// otherwise mean an event each (the cluster's own controllers record those on the
// Cluster). A condition False is a Warning; RollingOut, which the pool's
// own changes start and end, is Normal both ways, and has no event when it first
// appears on a pool that had a status (an upgrade of the operator adds it to every pool
// at once). The machines' comings and goings have none: Available, ScalingUp,
// ScalingDown and UpToDate, and Ready moving between MachinesReady and
// MachinesNotReady. Every scale flips them (an autoscaled pool may scale every few
// seconds), Cluster API already records events for the machines (each one a MachineSet
// creates or deletes, on the MachineSet; each remediation, on the Machine), and the
// conditions, the summary and the metrics of pools not ready tell the state; an event
// per flip would only write to the API server as often as the pool scales.
func eventKind(c metav1.Condition, was *metav1.Condition) (string, bool) {
	if (was == nil || (was.Status == metav1.ConditionUnknown && was.Reason == ReasonNotChecked)) && c.Status != metav1.ConditionFalse {
		return "", false
	}
	switch c.Type {
	case v1.ConditionAvailable, v1.ConditionScalingUp, v1.ConditionScalingDown, v1.ConditionUpToDate:
		return "", false
	case v1.ConditionRollingOut:
		return corev1.EventTypeNormal, was != nil
	case v1.ConditionReady:
		if was != nil && machinesReason(was.Reason) && machinesReason(c.Reason) {
			return "", false
		}
	}
	if c.Status == metav1.ConditionFalse {
		return corev1.EventTypeWarning, true
	}
	return corev1.EventTypeNormal, true
}

// machinesReason: Ready says only how many machines are ready.
func machinesReason(reason string) bool {
	return reason == ReasonMachinesReady || reason == ReasonMachinesNotReady
}

// statusEqual compares statuses. Condition timestamps compare equal unless a condition
// changed status: SetStatusCondition moves them only then.
func statusEqual(a, b *v1.NodeGroupStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// templates records whether the pool's current templates are as the operator created
// them; modified names those someone else changed since ("TalosConfigTemplate
// web-3ad66954a4"). A pool that never had a changed template does not carry the
// condition at all, so it costs the others no status write.
func (s *scope) templates(ng *v1.NodeGroup, modified []string) {
	switch {
	case len(modified) > 0:
		it, its := "it", "its"
		if len(modified) > 1 {
			it, its = "them", "their"
		}
		s.set(v1.ConditionTemplatesIntact, metav1.ConditionFalse, ReasonTemplateModified, fmt.Sprintf(
			"someone else changed %[1]s after the operator created %[2]s; templates are immutable, so the operator "+
				"does not write %[2]s back: new machines of the pool are made from %[2]s as changed, until a change of "+
				"the pool renders a template of a new name in %[3]s place", strings.Join(modified, " and "), it, its))
	case meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionTemplatesIntact) != nil:
		s.set(v1.ConditionTemplatesIntact, metav1.ConditionTrue, ReasonTemplatesIntact,
			"the pool's templates are as the operator created them")
	}
}

// resolved records the conditions resolve passed as True, each naming what it found.
func (s *scope) resolved(in *render.Input, passed []string) {
	for _, t := range passed {
		var msg string
		switch t {
		case v1.ConditionClassResolved:
			msg = fmt.Sprintf("class %q: %s", in.ClassName, in.Class.OS)
		case v1.ConditionLocationResolved:
			msg = fmt.Sprintf("location %q", in.LocationName)
		case v1.ConditionClusterFound:
			msg = fmt.Sprintf("cluster %q", in.Cluster.Name)
		}
		s.set(t, metav1.ConditionTrue, ReasonResolved, msg)
	}
}
