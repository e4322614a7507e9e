// Package webhook is the operator's validating admission webhook. CRD rules see one
// object; the rules that need two (a pool and its class, a pool and its location, a pool
// and its running machines) are evaluated here, with internal/policy, the same package
// the reconciler checks before it renders, so a tenant gets the error on `kubectl apply`
// and a rule is written once.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// Paths the webhook serves; the chart's webhook configuration names them.
const (
	PathNodeGroup      = "/validate-nodegroup"
	PathNodeGroupClass = "/validate-nodegroupclass"
)

// RegisterWith serves both validators on mgr's webhook server, reading through mgr's
// client and cache as the pool controller does: a KamajiControlPlane's version comes
// from the cache, so an admission (each of the operator's own finalizer patches is one)
// sends no request for it. On a replica that does not lead, the first admission starts
// the cache's informer of KamajiControlPlanes and waits for it to sync; a control plane
// upgraded a moment ago may still show its old version there, as it does to the pool
// controller. maxPools is the platform's limit of pools per namespace (0: none).
func RegisterWith(mgr ctrl.Manager, cat *catalog.Catalog, maxPools int) {
	resolver := &resolve.Resolver{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(),
		Catalog: cat, Cache: mgr.GetCache()}
	Register(mgr.GetWebhookServer(), mgr.GetClient(), resolver, admission.NewDecoder(mgr.GetScheme()), maxPools)
}

// Register serves both validators on the manager's webhook server. maxPools is the
// platform's limit of pools per namespace (0: none).
func Register(server ctrlwebhook.Server, reader client.Reader, resolver *resolve.Resolver, decoder admission.Decoder, maxPools int) {
	server.Register(PathNodeGroup, &ctrlwebhook.Admission{Handler: &NodeGroupValidator{Reader: reader, Resolver: resolver, Decoder: decoder, MaxPoolsPerNamespace: maxPools}})
	server.Register(PathNodeGroupClass, &ctrlwebhook.Admission{Handler: &ClassValidator{Decoder: decoder}})
}

// NodeGroupValidator admits a pool only when the cross-object rules hold.
type NodeGroupValidator struct {
	Reader   client.Reader
	Resolver *resolve.Resolver
	Decoder  admission.Decoder
	// MaxPoolsPerNamespace refuses the create of a pool in a namespace that already
	// holds this many (0: no limit). The count is the Reader's, the operator's cache:
	// creates admitted at the same moment may pass it by as many as are in flight.
	MaxPoolsPerNamespace int
}

// RulePoolLimit is the rule that refuses a pool over MaxPoolsPerNamespace, as the
// admission metrics name it.
const RulePoolLimit = "pool-limit"

// Handle evaluates the policy for a NodeGroup create or update.
func (v *NodeGroupValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp, rule := v.decide(ctx, req)
	return counted("nodegroup", resp, rule)
}

// decide is Handle's answer, with the rule that denied the request (the first broken).
func (v *NodeGroupValidator) decide(ctx context.Context, req admission.Request) (admission.Response, string) {
	ng := &v1.NodeGroup{}
	if err := v.Decoder.DecodeRaw(req.Object, ng); err != nil {
		return admission.Errored(http.StatusBadRequest, err), ""
	}
	var old *v1.NodeGroup
	if req.Operation == admissionv1.Update {
		old = &v1.NodeGroup{}
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err), ""
		}
	}
	denied, err := v.overLimit(ctx, ng, old)
	if err == nil && denied.message == "" {
		denied, err = v.check(ctx, ng, old)
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), ""
	}
	if denied.message != "" {
		return admission.Denied(denied.message), denied.rule
	}
	return admission.Allowed(""), ""
}

// overLimit refuses the create of a pool in a namespace that holds
// MaxPoolsPerNamespace pools already, those being deleted included (their machines
// still run). An update is never refused by it: a namespace over a limit lowered since
// keeps its pools and may change them.
func (v *NodeGroupValidator) overLimit(ctx context.Context, ng, old *v1.NodeGroup) (denial, error) {
	if v.MaxPoolsPerNamespace <= 0 || old != nil {
		return denial{}, nil
	}
	// Counted, never changed: the cache's own objects, not copies.
	pools := &v1.NodeGroupList{}
	if err := v.Reader.List(ctx, pools, client.InNamespace(ng.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return denial{}, err
	}
	if n := len(pools.Items); n >= v.MaxPoolsPerNamespace {
		return denial{RulePoolLimit, fmt.Sprintf("namespace %q holds %d NodeGroups, the platform's limit is %d per namespace: delete a pool first, or ask the platform to raise tenantLimits.poolsPerNamespace",
			ng.Namespace, n, v.MaxPoolsPerNamespace)}, nil
	}
	return denial{}, nil
}

// Check is the verdict on a pool's create (old nil) or update: the message a denial
// carries, or "" when the pool is admitted. The kubectl plugin calls it offline, with a
// Reader and Resolver over files, so that it refuses with the webhook's words.
func (v *NodeGroupValidator) Check(ctx context.Context, ng, old *v1.NodeGroup) (string, error) {
	denied, err := v.check(ctx, ng, old)
	return denied.message, err
}

// check is Check's verdict with the rule that denied the pool (the first broken).
func (v *NodeGroupValidator) check(ctx context.Context, ng, old *v1.NodeGroup) (denial, error) {
	in, denied, err := v.input(ctx, ng, old)
	if err != nil || denied.message != "" {
		return denied, err
	}
	violations, err := policy.Evaluate(ctx, in)
	if err != nil || len(violations) == 0 {
		return denial{}, err
	}
	msgs := make([]string, len(violations))
	for i, vi := range violations {
		msgs[i] = vi.String()
	}
	return denial{rule: violations[0].Rule, message: strings.Join(msgs, "; ")}, nil
}

// denial is why a request is denied before the rules run: a class or location that
// does not exist (rule is the reason the reconciler would give).
type denial struct{ rule, message string }

// input gathers what the rules read (policy.Gather), once the class, the location and
// the control plane's version are resolved. A class or location that does not exist
// denies the request with the reason and message the reconciler would put in a
// condition.
func (v *NodeGroupValidator) input(ctx context.Context, ng, old *v1.NodeGroup) (policy.Input, denial, error) {
	class, err := v.Resolver.Class(ctx, ng.Spec.NodeGroupClassName)
	if denied, err := deniedBy(err); denied.message != "" || err != nil {
		return policy.Input{}, denied, err
	}
	loc := &v1.Location{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Name: ng.Spec.LocationName}, loc); err != nil {
		if apierrors.IsNotFound(err) {
			return policy.Input{}, denial{resolve.ReasonLocationNotFound,
				fmt.Sprintf("Location %q does not exist: set spec.locationName to a published location (kubectl get locations)", ng.Spec.LocationName)}, nil
		}
		return policy.Input{}, denial{}, err
	}
	var version string
	cluster := &clusterv1.Cluster{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Namespace: ng.Namespace, Name: ng.Spec.ClusterName}, cluster); err == nil {
		// A control plane not there yet is no reason to refuse: the reconciler waits.
		if cpVersion, err := v.Resolver.ControlPlaneVersion(ctx, cluster); err == nil {
			version = cpVersion
		}
	} else if !apierrors.IsNotFound(err) {
		return policy.Input{}, denial{}, err
	}

	in, err := policy.Gather(ctx, v.Reader, ng, &class, &loc.Spec, version)
	if err != nil {
		return in, denial{}, err
	}
	// An update is judged against the object it replaces, a create against nothing: the
	// old class is the old object's, whatever OS the MachineDeployment boots.
	in.OldObject, in.OldClass = old, v.oldClass(ctx, ng, old, &class)
	return in, denial{}, nil
}

// oldClass is the class of the object an update replaces: nil on a create, or when that
// class no longer resolves.
func (v *NodeGroupValidator) oldClass(ctx context.Context, ng, old *v1.NodeGroup, class *v1.NodeGroupClassSpec) *v1.NodeGroupClassSpec {
	switch {
	case old == nil:
		return nil
	case old.Spec.NodeGroupClassName == ng.Spec.NodeGroupClassName:
		return class
	}
	oldClass, err := v.Resolver.Class(ctx, old.Spec.NodeGroupClassName)
	if err != nil {
		return nil
	}
	return &oldClass
}

func deniedBy(err error) (denial, error) {
	var rerr *resolve.Error
	if errors.As(err, &rerr) {
		return denial{rerr.Reason, rerr.Message}, nil
	}
	return denial{}, err
}

// ClassValidator refuses a class whose poolRules do not compile or cost too much.
type ClassValidator struct {
	Decoder admission.Decoder
}

// Handle checks a NodeGroupClass create or update.
func (v *ClassValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	resp, rule := v.decide(req)
	return counted("nodegroupclass", resp, rule)
}

func (v *ClassValidator) decide(req admission.Request) (admission.Response, string) {
	class := &v1.NodeGroupClass{}
	if err := v.Decoder.DecodeRaw(req.Object, class); err != nil {
		return admission.Errored(http.StatusBadRequest, err), ""
	}
	if err := policy.CompileClassRules(class.Spec.PoolRules); err != nil {
		return admission.Denied(err.Error()), "poolRules"
	}
	return admission.Allowed(""), ""
}

// counted counts the answer to an admission request for resource, denied by rule, and
// returns it.
func counted(resource string, resp admission.Response, rule string) admission.Response {
	verdict := metrics.VerdictAllowed
	switch {
	case resp.Allowed:
		rule = ""
	case resp.Result != nil && resp.Result.Code == http.StatusForbidden:
		verdict = metrics.VerdictDenied
	default:
		verdict, rule = metrics.VerdictError, ""
	}
	metrics.Admitted(resource, verdict, rule)
	return resp
}
