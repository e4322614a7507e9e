// Package nodegroup is the NodeGroup controller: resolve, render, apply, observe.
//
// A value flows one way: the NodeGroup is resolved into a render.Input, rendered into
// the desired objects, applied by server-side apply (a resync that would change nothing
// writes nothing), and the MachineDeployment's state is written back as status.
package nodegroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/credentials"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

const (
	// Finalizer holds a deleted NodeGroup until its MachineDeployment is gone (Cluster
	// API drains the machines), and only then removes its templates.
	Finalizer = "nodegroup.io/cleanup"
	// waitDelay is how soon a pool waiting for something outside its watches (a Secret,
	// a Service) is looked at again.
	waitDelay = 30 * time.Second
	// deletionPoll is how soon a deleting pool checks its MachineDeployment again.
	deletionPoll = 5 * time.Second
	// conflictDelay is how soon a pool whose status write met a newer version of the
	// pool is reconciled again. Its watch lets through only changes of generation and
	// labels (Register), so the newer version does not always bring the pool back: a
	// status the operator wrote a moment before, that the cache did not hold yet, is the
	// common cause.
	conflictDelay = time.Second
)

// Reconciler reconciles NodeGroups.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	// Cache is the manager's informer cache; Register sets it when nil. Reads of
	// what the operator watches as metadata only (templates, Services, Secrets) go to it,
	// so a reconcile of an unchanged pool sends no request (see internal/apply).
	Cache    client.Reader
	Catalog  *catalog.Catalog
	Recorder events.EventRecorder

	ManagementDNS       types.NamespacedName
	ManagementDNSDomain string
	// Tenants, when set, is what the join-identity controller found of each cluster's
	// tenant side, reported on the cluster's Talos pools (TalosIdentityReady and
	// TenantClusterReachable); a change to it brings the pools back.
	Tenants *tenant.Status

	resolver *resolve.Resolver
	applier  *apply.Applier
	// templateKinds are the template kinds served here (servedTemplateKinds).
	templateKinds []schema.GroupVersionKind
	// readyTimer times each generation of a pool until it is Ready.
	readyTimer metrics.ReadyTimer
	// written holds the versions of the pools the operator wrote that the cache may
	// not hold yet.
	written ownWrites
}

// Name of the controller.
func (r *Reconciler) Name() string { return "nodegroup" }

// Applier exposes what the controller sent, for tests.
func (r *Reconciler) Applier() *apply.Applier { return r.applier }

// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroups,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroups/finalizers,verbs=update
// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroupclasses;locations,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments;machinehealthchecks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets;machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=talosconfigtemplates;kairosconfigtemplates,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates;proxmoxmachinetemplates,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kamajicontrolplanes,verbs=get;list;watch
// +kubebuilder:rbac:groups=instancetype.kubevirt.io,resources=virtualmachineclusterinstancetypes,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one pool's objects in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ng := &v1.NodeGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, ng); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wait, behind := r.written.behind(ng); behind {
		// The cache has not shown this reconcile the operator's own last write of the
		// pool: what it would compute from this copy would be refused (ownWrites).
		metrics.CacheLagWait()
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	pausedBy, clusterGone, err := r.pausedBy(ctx, ng)
	if err != nil {
		return ctrl.Result{}, err
	}
	if movedAway(ng, clusterGone) {
		r.waitForMove(ng)
		return ctrl.Result{}, nil
	}
	if pausedBy == "" {
		if !ng.DeletionTimestamp.IsZero() {
			return r.finalize(ctx, ng)
		}
		if !controllerutil.ContainsFinalizer(ng, Finalizer) {
			patch := client.MergeFrom(ng.DeepCopy())
			controllerutil.AddFinalizer(ng, Finalizer)
			if err := r.Client.Patch(ctx, ng, patch); err != nil {
				return ctrl.Result{}, err
			}
			r.written.wrote(ng)
		}
	}

	// The steps record what they find in s; the status step computes the status from it
	// and patches it against old, the pool as read.
	old := ng.DeepCopy()
	s := newScope()
	var result ctrl.Result
	var reconcileErr error
	if pausedBy != "" {
		// Nothing but the condition: no apply, no deletion (a deleting pool waits for
		// the resume), no finalizer, no requeue; the Cluster's watch and the pool's
		// annotation bring it back.
		s.pause(pausedBy)
	} else {
		r.readyTimer.Seen(ng)
		s.remove(paused.Condition)
		result, reconcileErr = r.reconcile(ctx, ng, s)
	}
	r.reportTenant(ctx, ng, s)
	r.reportAutoscaler(ng, s)
	if err := r.writeStatus(ctx, old, ng, s); err != nil {
		if apierrors.IsConflict(err) && reconcileErr == nil {
			// Not a failure: the reconcile runs again on the pool as it is now.
			metrics.StatusConflict()
			log.FromContext(ctx).V(1).Info("status not written: the pool changed since it was read", "retryAfter", conflictDelay)
			return ctrl.Result{RequeueAfter: conflictDelay}, nil
		}
		err = errors.Join(reconcileErr, err)
		r.recordMetrics(old, ng, err, false)
		return ctrl.Result{}, err
	}
	r.recordMetrics(old, ng, reconcileErr, true)
	return result, reconcileErr
}

// reconcile resolves, renders and applies the pool, and records what it found in s for
// the status step; it sets no condition itself.
func (r *Reconciler) reconcile(ctx context.Context, ng *v1.NodeGroup, s *scope) (ctrl.Result, error) {
	in, err := r.resolver.Resolve(ctx, ng)
	if err != nil {
		return resolveFailed(s, in, err)
	}
	s.resolved(in, resolve.Conditions())
	s.release = &release{os: in.Class.OS, kubernetesVersion: in.KubernetesVersion}

	violations, err := r.policyViolations(ctx, ng, in)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(violations) > 0 {
		refuse(s, ng, in, violations)
		return ctrl.Result{}, nil
	}

	out, err := render.Render(in)
	if err != nil {
		var missing *render.ImageNotAvailableError
		reason := ReasonRenderFailed
		if errors.As(err, &missing) {
			reason = resolve.ReasonImageNotAvailable
		}
		s.set(v1.ConditionRendered, metav1.ConditionFalse, reason, err.Error())
		return ctrl.Result{}, nil // a spec or platform change fixes this; both are watched
	}

	pullSecretClass, err := r.credentials(ctx, ng, in)
	if err != nil {
		s.set(v1.ConditionRendered, metav1.ConditionFalse, ReasonCredentialsFailed, err.Error())
		return ctrl.Result{RequeueAfter: waitDelay}, nil
	}

	written, err := r.applyObjects(ctx, ng, out, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	md := out.MachineDeployment
	s.objects = &objects{machineDeployment: md.Name, bootstrap: out.Bootstrap.GetName(), infrastructure: out.Infrastructure.GetName()}
	s.set(v1.ConditionRendered, metav1.ConditionTrue, ReasonApplied, "the pool's objects are applied and current")
	if err := r.releasePullSecrets(ctx, ng, pullSecretClass, s.objects); err != nil {
		return ctrl.Result{}, err
	}

	live, err := r.observe(ctx, ng.Namespace, md.Name, written)
	if err != nil || live == nil {
		return ctrl.Result{}, err
	}
	desired, err := r.clampReplicas(ctx, ng, live, len(written.Object) > 0)
	if err != nil {
		return ctrl.Result{}, err
	}
	notRunning, err := r.notRunning(ctx, ng)
	if err != nil {
		return ctrl.Result{}, err
	}
	rolling, err := r.rollingOut(ctx, ng, s.objects, in.KubernetesVersion)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.observed(live, desired, notRunning, rolling)
	return ctrl.Result{}, nil
}

// applyObjects applies the rendered objects and deletes the templates they supersede;
// an object it could not apply makes Rendered False. written is the MachineDeployment
// as the server returned it when this call wrote it (empty otherwise): the cache may
// not hold it yet, and the status is computed from it.
func (r *Reconciler) applyObjects(ctx context.Context, ng *v1.NodeGroup, out *render.Output, s *scope) (*unstructured.Unstructured, error) {
	owner := apply.NodeGroupOwner(ng)
	written := &unstructured.Unstructured{}
	var modified []string
	for _, obj := range out.Objects() {
		var opts []apply.Option
		if obj == client.Object(out.MachineDeployment) {
			opts = append(opts, apply.ServerCopy(written))
		}
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		result, err := r.applier.Apply(ctx, owner, obj, opts...)
		if err != nil {
			msg := fmt.Sprintf("applying %s %s: %v", kind, obj.GetName(), err)
			if why, unanswered := operator.Unanswered(err); unanswered {
				// In words that stay the same from try to try, so retries rewrite
				// nothing; the log has the error.
				msg = fmt.Sprintf("applying %s %s: the management API server did not answer (%s); retrying", kind, obj.GetName(), why)
			}
			s.set(v1.ConditionRendered, metav1.ConditionFalse, ReasonApplyFailed, msg)
			return nil, err
		}
		if result == apply.Modified {
			modified = append(modified, kind+" "+obj.GetName())
		}
	}
	s.templates(ng, modified)
	keep := map[schema.GroupKind]string{
		out.Bootstrap.GetObjectKind().GroupVersionKind().GroupKind():      out.Bootstrap.GetName(),
		out.Infrastructure.GetObjectKind().GroupVersionKind().GroupKind(): out.Infrastructure.GetName(),
	}
	if _, err := r.applier.DeleteSupersededTemplates(ctx, ng.Namespace, names.LabelValue(ng.Name), out.MachineDeployment.Name, keep, r.templateKinds...); err != nil {
		return nil, err
	}
	return written, nil
}

// policyViolations is the second line of defence behind admission: the same rules the
// webhook evaluates (internal/policy), checked before anything is rendered, so a pool
// admitted before a rule or a class changed is held, not re-rendered. The live
// MachineDeployment's bootstrap template kind tells the OS the running machines boot
// (policy.Gather).
func (r *Reconciler) policyViolations(ctx context.Context, ng *v1.NodeGroup, in *render.Input) ([]policy.Violation, error) {
	pin, err := policy.Gather(ctx, r.Client, ng, &in.Class, &in.Location, in.ControlPlaneVersion)
	if err != nil {
		return nil, err
	}
	return policy.Evaluate(ctx, pin)
}

// refuse records the rules a pool breaks; what runs stays as it is. The rules whose
// failure has a condition of its own set it (a location that does not admit the
// namespace is LocationResolved=False), and each message gets the facts the pool was
// checked with.
func refuse(s *scope, ng *v1.NodeGroup, in *render.Input, violations []policy.Violation) {
	reason := ReasonPolicyViolation
	msgs := make([]string, len(violations))
	for i, v := range violations {
		msgs[i] = v.String()
		switch v.Rule {
		case policy.RuleLocationAccess:
			msgs[i] += fmt.Sprintf(" (location %q, namespace %q)", in.LocationName, ng.Namespace)
			s.set(v1.ConditionLocationResolved, metav1.ConditionFalse, ReasonLocationNotAllowed, msgs[i])
		case policy.RuleVersion:
			msgs[i] += fmt.Sprintf(" (pool %s, control plane %s)", in.KubernetesVersion, in.ControlPlaneVersion)
		case policy.RuleClassVersion:
			msgs[i] += fmt.Sprintf(" (class %q is built for %s)", in.ClassName, in.KubernetesVersion)
		}
		if i == 0 {
			switch v.Rule {
			case policy.RuleLocationAccess:
				reason = ReasonLocationNotAllowed
			case policy.RuleVersion:
				reason = ReasonVersionAhead
			}
		}
	}
	s.set(v1.ConditionRendered, metav1.ConditionFalse, reason, strings.Join(msgs, "; "))
}

// credentials creates the Secrets a Kairos pool's machines read before its templates
// name them, and returns the class whose pull secret copy the templates name (empty
// when they name none).
func (r *Reconciler) credentials(ctx context.Context, ng *v1.NodeGroup, in *render.Input) (string, error) {
	if in.KairosUserSecret != "" && !credentials.HasWorkerPassword(ctx, r.Cache, ng.Namespace, in.Cluster.Name) {
		cluster := &clusterv1.Cluster{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ng.Namespace, Name: in.Cluster.Name}, cluster); err != nil {
			return "", err
		}
		if err := credentials.EnsureWorkerPassword(ctx, r.Client, r.APIReader, cluster); err != nil {
			return "", fmt.Errorf("the worker password Secret: %w", err)
		}
	}
	ref := in.Class.ImagePullSecretRef
	if ref == nil || in.Class.OS != v1.OSKairos {
		return "", nil
	}
	image := in.Release.Kairos.Disk
	if in.Class.Image != nil {
		image = in.Class.Image.Reference
	}
	if err := credentials.ProjectPullSecret(ctx, r.Client, r.APIReader, ng, in.ClassName, *ref, image); err != nil {
		return "", err
	}
	return in.ClassName, nil
}

// releasePullSecrets releases the pull secret copies the pool holds for classes other
// than keep, the class its applied templates name (empty: none). It runs only once the
// templates of the pool's current class are applied: a class change that fails (a
// class that does not resolve, a rule that refuses it, a pull secret missing, an
// apply refused) keeps the copies the templates in use name, and the first reconcile
// that applies the new class releases them, whatever generation the status last
// described. Whether there is anything to release is read from the cache, so a pool
// that holds no other copy sends no request.
//
// Nor while a MachineSet of the pool still makes machines from other templates (a
// rollout under way): a machine it makes, a health check's replacement say, boots
// from the templates that name the old copy. The MachineSet's deletion brings the pool
// back, and the copy goes then.
func (r *Reconciler) releasePullSecrets(ctx context.Context, ng *v1.NodeGroup, keep string, current *objects) error {
	if !credentials.MayRelease(ctx, r.Cache, ng, keep) {
		return nil
	}
	if old, err := r.oldMachineSets(ctx, ng, current); err != nil || old {
		return err
	}
	return credentials.ReleasePullSecrets(ctx, r.Client, r.APIReader, ng, keep)
}

// oldMachineSets says whether a MachineSet of the pool (in the cache) uses templates
// other than its current ones.
func (r *Reconciler) oldMachineSets(ctx context.Context, ng *v1.NodeGroup, current *objects) (bool, error) {
	var sets clusterv1.MachineSetList
	if err := r.Client.List(ctx, &sets, client.InNamespace(ng.Namespace),
		client.MatchingLabels{names.LabelPool: names.LabelValue(ng.Name)}, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	for _, ms := range sets.Items {
		spec := ms.Spec.Template.Spec
		if spec.Bootstrap.ConfigRef.Name != current.bootstrap || spec.InfrastructureRef.Name != current.infrastructure {
			return true, nil
		}
	}
	return false, nil
}

// observe reads the pool's MachineDeployment: written, when this reconcile wrote it,
// else the cache's copy; nil when the cache has not seen it yet (its event brings the
// pool back). It writes nothing.
func (r *Reconciler) observe(ctx context.Context, ns, name string, written *unstructured.Unstructured) (*clusterv1.MachineDeployment, error) {
	md := &clusterv1.MachineDeployment{}
	if len(written.Object) > 0 {
		return md, runtime.DefaultUnstructuredConverter.FromUnstructured(written.Object, md)
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return md, nil
}

// resolveFailed records a resolve failure: the conditions resolve passed before it are
// True, the one it failed False; what runs is left exactly as it is.
func resolveFailed(s *scope, in *render.Input, err error) (ctrl.Result, error) {
	var rerr *resolve.Error
	if !errors.As(err, &rerr) {
		return ctrl.Result{}, err // an API error: retried with backoff
	}
	s.resolved(in, rerr.Passed())
	s.set(rerr.Condition, metav1.ConditionFalse, rerr.Reason, rerr.Message)
	if rerr.Condition != v1.ConditionRendered {
		s.set(v1.ConditionRendered, metav1.ConditionFalse, ReasonWaiting, "not rendered: "+rerr.Message)
	}
	if rerr.Wait {
		return ctrl.Result{RequeueAfter: waitDelay}, nil
	}
	return ctrl.Result{}, nil
}

// reportTenant records, on a Talos pool, what is known of its cluster's tenant side;
// other pools carry neither condition (the Kairos provider makes its own join token).
// While nothing is known (the join identity controller has not looked since a restart)
// the conditions stay as last written (Unknown on a pool that never had them), so a
// restart writes nothing.
func (r *Reconciler) reportTenant(ctx context.Context, ng *v1.NodeGroup, s *scope) {
	if r.Tenants == nil {
		return
	}
	class, err := r.resolver.Class(ctx, ng.Spec.NodeGroupClassName)
	switch {
	case err != nil:
		return // whether they apply is not known: they stay as they are
	case class.OS != v1.OSTalos:
		s.remove(v1.ConditionTalosIdentityReady)
		s.remove(v1.ConditionTenantClusterReachable)
		return
	}
	st, _ := r.Tenants.Get(types.NamespacedName{Namespace: ng.Namespace, Name: ng.Spec.ClusterName})
	s.set(v1.ConditionTalosIdentityReady, st.Identity, st.IdentityReason, st.IdentityMessage)
	s.set(v1.ConditionTenantClusterReachable, st.Reachable, st.ReachableReason, st.ReachableMessage)
}

// reportAutoscaler records, on an autoscaled pool, what is known of its cluster's
// autoscaler; a fixed-size pool carries no such condition. While nothing is known (the
// autoscaler controllers have not looked since a restart) the conditions stay as last
// written (Unknown on a pool that never had them), so a restart writes nothing.
func (r *Reconciler) reportAutoscaler(ng *v1.NodeGroup, s *scope) {
	if r.Tenants == nil {
		return
	}
	if !ng.Spec.Autoscaled() {
		s.remove(v1.ConditionAutoscalerReady)
		s.remove(v1.ConditionAbleToScaleUp)
		return
	}
	st, _ := r.Tenants.Autoscaler(types.NamespacedName{Namespace: ng.Namespace, Name: ng.Spec.ClusterName})
	up, _ := r.Tenants.ScaleUp(client.ObjectKeyFromObject(ng))
	s.set(v1.ConditionAutoscalerReady, st.Status, st.Reason, st.Message)
	s.set(v1.ConditionAbleToScaleUp, up.Status, up.Reason, up.Message)
}

func (r *Reconciler) event(ng *v1.NodeGroup, kind, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ng, nil, kind, reason, action, format, args...)
	}
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
