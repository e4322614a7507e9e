// Package autoscaler runs cluster-autoscaler for every tenant cluster that has an
// autoscaled pool (minReplicas below maxReplicas): it applies, in the Cluster's
// namespace, the ServiceAccount, Role, RoleBinding and Deployment that
// internal/autoscaler renders, owned by the Cluster, and removes them when the
// cluster's last autoscaled pool goes, when its pools are all made fixed-size, or when
// the cluster turns the managed autoscaler off (AnnotationManaged). Objects of those
// names that the operator did not make are reported, never adopted or deleted.
//
// What it finds is reported on the cluster's autoscaled pools as AutoscalerReady, by
// the pool controller (one writer of a pool's status), through tenant.Status.
package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

// AnnotationManaged, set to "false" on a Cluster, turns the managed autoscaler off for
// it: the operator removes the one it made and makes none, for platforms that run their
// own cluster-autoscaler for that cluster.
const AnnotationManaged = "nodegroup.io/managed-autoscaler"

// Reasons of the pools' AutoscalerReady condition.
const (
	ReasonRunning            = "Running"
	ReasonStarting           = "Starting"
	ReasonManagedElsewhere   = "ManagedElsewhere"
	ReasonConflict           = "Conflict"
	ReasonUnsupportedVersion = "UnsupportedVersion"
	ReasonWaitingForVersion  = "WaitingForControlPlaneVersion"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonWaitingKubeconfig  = "WaitingForKubeconfig"
	ReasonInvalidKubeconfig  = "InvalidKubeconfig"
)

// versionPoll is how often a cluster whose Kubernetes version is not known yet is looked
// at again (a control plane's version is not an event this controller watches).
const versionPoll = 30 * time.Second

// conflictPoll is how often a cluster whose autoscaler is blocked by an object of the
// same name that the operator did not make is looked at again: that object is not
// cached (operator.CacheOptions holds only the operator's), so its deletion is no event.
const conflictPoll = time.Minute

// Reconciler keeps the autoscaler of each Cluster.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Applier   *apply.Applier
	Settings  autoscaler.Settings
	Catalog   *catalog.Catalog
	Status    *tenant.Status
	Recorder  events.EventRecorder

	resolver *resolve.Resolver
}

// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// The autoscaler's Role grants what follows; Kubernetes lets the operator grant only
// what it holds itself.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments;machinepools;machines;machinesets,verbs=list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments/scale,verbs=get;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachinetemplates;proxmoxmachinetemplates,verbs=get;list;watch

// Reconcile makes the Cluster's autoscaler what its pools need.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			// Its objects go with it: the Cluster owns them.
			r.Status.ForgetAutoscaler(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if paused.Cluster(c) {
		// Nothing is applied or removed, even when the Cluster's pools go: clusterctl
		// move deletes them here once it made them on the target. What the Cluster owns
		// here goes with it, by garbage collection.
		return ctrl.Result{}, nil
	}
	pools, err := r.autoscaledPools(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case len(pools) == 0 || !c.DeletionTimestamp.IsZero():
		r.Status.ForgetAutoscaler(req.NamespacedName)
		return ctrl.Result{}, r.remove(ctx, c)
	case !r.Settings.Enabled || c.Annotations[AnnotationManaged] == "false":
		why := fmt.Sprintf("the Cluster's annotation %s=false turns the operator's autoscaler off: the platform runs its own", AnnotationManaged)
		if !r.Settings.Enabled {
			why = "the platform turned the operator's autoscaler off (chart value autoscaler.enabled): it runs its own"
		}
		r.Status.SetAutoscaler(req.NamespacedName, tenant.Condition{Status: metav1.ConditionTrue, Reason: ReasonManagedElsewhere, Message: why})
		return ctrl.Result{}, r.remove(ctx, c)
	}
	return r.keep(ctx, c, pools)
}

// autoscaledPools are the Cluster's pools, not being deleted, whose range lets the
// autoscaler scale them.
func (r *Reconciler) autoscaledPools(ctx context.Context, c *clusterv1.Cluster) ([]v1.NodeGroup, error) {
	return autoscaledPools(ctx, r.Client, c)
}

func autoscaledPools(ctx context.Context, reader client.Reader, c *clusterv1.Cluster) ([]v1.NodeGroup, error) {
	var list v1.NodeGroupList
	if err := reader.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	var out []v1.NodeGroup
	for _, ng := range list.Items {
		if ng.Spec.ClusterName == c.Name && ng.DeletionTimestamp.IsZero() && ng.Spec.Autoscaled() {
			out = append(out, ng)
		}
	}
	return out, nil
}

func (r *Reconciler) keep(ctx context.Context, c *clusterv1.Cluster, pools []v1.NodeGroup) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(c)
	in, waiting, err := r.Input(ctx, c, pools)
	if err != nil {
		return ctrl.Result{}, err
	}
	if waiting != nil {
		r.Status.SetAutoscaler(key, *waiting)
		if waiting.Reason == ReasonWaitingForVersion {
			return ctrl.Result{RequeueAfter: versionPoll}, nil
		}
		return ctrl.Result{}, nil
	}
	image := in.Image
	owner := apply.Owner{Object: c, GVK: clusterv1.GroupVersion.WithKind("Cluster")}
	for _, obj := range autoscaler.Objects(in) {
		res, err := r.Applier.Apply(ctx, owner, obj)
		if errors.Is(err, apply.ErrNotManaged) || errors.Is(err, apply.ErrOtherController) {
			msg := fmt.Sprintf("%s %s/%s: %v: the operator does not adopt it; delete it, or set %s=false on the Cluster to run your own autoscaler",
				obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err, AnnotationManaged)
			r.Status.SetAutoscaler(key, tenant.Condition{Status: metav1.ConditionFalse, Reason: ReasonConflict, Message: msg})
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, ReasonConflict, "ApplyAutoscaler", "%s", msg)
			return ctrl.Result{RequeueAfter: conflictPoll}, nil // its deletion is not watched (it is not ours): look again
		}
		if err != nil {
			// A refusal is reported on the cluster's pools. An error without an answer
			// (operator.Unanswered) is only retried: it says nothing of whether the
			// autoscaler runs, which is what the pools report, and each of them would
			// write its status to the API server that does not answer.
			if _, unanswered := operator.Unanswered(err); !unanswered {
				r.Status.SetAutoscaler(key, tenant.Condition{Status: metav1.ConditionFalse, Reason: ReasonApplyFailed, Message: err.Error()})
			}
			return ctrl.Result{}, err
		}
		if res == apply.Created {
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "AutoscalerCreated", "ApplyAutoscaler", "%s %s created for the cluster's autoscaled pools",
				obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
		}
	}
	r.Status.SetAutoscaler(key, r.running(ctx, c, image))
	return ctrl.Result{}, nil
}

// AutoscaledPools are the Cluster's pools, not being deleted, whose range lets the
// autoscaler scale them.
func (r *Reconciler) AutoscaledPools(ctx context.Context, c *clusterv1.Cluster) ([]v1.NodeGroup, error) {
	return r.autoscaledPools(ctx, c)
}

// Input is what the Cluster's autoscaler is made from, given its autoscaled pools; when
// it cannot be made yet, waiting says why instead.
func (r *Reconciler) Input(ctx context.Context, c *clusterv1.Cluster, pools []v1.NodeGroup) (in autoscaler.Input, waiting *tenant.Condition, err error) {
	version, err := r.version(ctx, c, pools)
	if err != nil {
		return in, nil, err
	}
	if version == "" {
		return in, &tenant.Condition{Status: metav1.ConditionFalse, Reason: ReasonWaitingForVersion,
			Message: "the cluster's Kubernetes version is not known yet (the control plane's spec.version), so neither is the autoscaler release that goes with it"}, nil
	}
	image, ok := r.Settings.ImageFor(r.Catalog, version)
	if !ok {
		return in, &tenant.Condition{Status: metav1.ConditionFalse, Reason: ReasonUnsupportedVersion,
			Message: fmt.Sprintf("no cluster-autoscaler release is known for Kubernetes %s: the catalog pairs one with %s; a platform may name a tag for this minor in the chart value autoscaler.image.tags",
				version, strings.Join(r.Catalog.Minors(), ", "))}, nil
	}
	kubeconfig, waiting, err := r.kubeconfig(ctx, c)
	if err != nil || waiting != nil {
		return in, waiting, err
	}
	templates, err := r.templateResources(ctx, c)
	if err != nil {
		return in, nil, err
	}
	var scaled []string
	for _, ng := range pools {
		scaled = append(scaled, names.MachineDeploymentName(c.Name, ng.Name))
	}
	return autoscaler.Input{Cluster: client.ObjectKeyFromObject(c), Image: image, TemplateResources: templates,
		MachineDeployments: scaled, Settings: r.Settings, Kubeconfig: kubeconfig}, nil, nil
}

// kubeconfig is the Cluster's <cluster>-kubeconfig reduced to what the operator accepts
// of it (tenant.CleanKubeconfig): the autoscaler gets that copy, never the Secret itself,
// so whoever writes the Secret cannot make the autoscaler run a command or send its
// ServiceAccount token elsewhere.
func (r *Reconciler) kubeconfig(ctx context.Context, c *clusterv1.Cluster) ([]byte, *tenant.Condition, error) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name + tenant.KubeconfigSuffix}
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &tenant.Condition{Status: metav1.ConditionFalse, Reason: ReasonWaitingKubeconfig,
				Message: fmt.Sprintf("the Secret %s with the tenant cluster's kubeconfig does not exist yet (the control-plane provider writes it)", key)}, nil
		}
		return nil, nil, err
	}
	clean, err := tenant.CleanKubeconfig(s.Data[tenant.KubeconfigKey])
	if err != nil {
		return nil, &tenant.Condition{Status: metav1.ConditionFalse, Reason: ReasonInvalidKubeconfig,
			Message: fmt.Sprintf("the kubeconfig in %s (key %q): %v", key, tenant.KubeconfigKey, err)}, nil
	}
	return clean, nil, nil
}

// running says whether the autoscaler's Deployment has an available replica.
func (r *Reconciler) running(ctx context.Context, c *clusterv1.Cluster, image string) tenant.Condition {
	dep := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: autoscaler.Name(c.Name)}, dep); err != nil {
		return tenant.Condition{Status: metav1.ConditionFalse, Reason: ReasonStarting, Message: fmt.Sprintf("the Deployment %s is not seen yet", autoscaler.Name(c.Name))}
	}
	// Running only once the Deployment's current template (this image) is what runs: an
	// old ReplicaSet's Pod may still serve during a rollout.
	if st := dep.Status; st.ObservedGeneration >= dep.Generation && st.UpdatedReplicas == replicasOf(dep) &&
		st.AvailableReplicas > 0 && st.Replicas == st.UpdatedReplicas {
		return tenant.Condition{Status: metav1.ConditionTrue, Reason: ReasonRunning,
			Message: fmt.Sprintf("cluster-autoscaler %s runs as the Deployment %s", image, dep.Name)}
	}
	msg := fmt.Sprintf("the Deployment %s (cluster-autoscaler %s) has no available replica of its current template yet", dep.Name, image)
	for _, c := range dep.Status.Conditions {
		// Why it does not start, where the Deployment says: a quota, a missing Secret.
		if (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) ||
			(c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse) {
			msg += ": " + c.Message
		}
	}
	return tenant.Condition{Status: metav1.ConditionFalse, Reason: ReasonStarting, Message: msg}
}

// replicasOf is the Deployment's spec.replicas, 1 when unset (the API's default).
func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// version is the Kubernetes version of the cluster's control plane, as the pools
// resolve it (resolve.ControlPlaneVersion: the KamajiControlPlane's spec.version from
// the cache, or the topology's), or, while that is not known, the newest version the
// cluster's pools run (never ahead of the control plane).
func (r *Reconciler) version(ctx context.Context, c *clusterv1.Cluster, pools []v1.NodeGroup) (string, error) {
	res := r.resolver
	if res == nil { // not registered with a manager: read through the client
		res = &resolve.Resolver{Client: r.Client, APIReader: r.Client, Mapper: r.Client.RESTMapper(), Catalog: r.Catalog}
	}
	v, err := res.ControlPlaneVersion(ctx, c)
	var pending *resolve.Error
	switch {
	case errors.As(err, &pending):
		// Not there yet: the pools' versions, if any.
	case err != nil:
		return "", err
	case v != "":
		return v, nil
	}
	var newest string
	for _, ng := range pools {
		if v := ng.Status.KubernetesVersion; v != "" && (newest == "" || newer(v, newest)) {
			newest = v
		}
	}
	return newest, nil
}

// templateResources are the machine template resources the cluster's MachineDeployments
// (its own and its satellites') name: the autoscaler reads them to scale a pool from
// zero.
func (r *Reconciler) templateResources(ctx context.Context, c *clusterv1.Cluster) ([]schema.GroupResource, error) {
	var mds clusterv1.MachineDeploymentList
	if err := r.Client.List(ctx, &mds, client.InNamespace(c.Namespace),
		client.MatchingLabels{names.LabelTenantCluster: names.LabelValue(c.Name), names.LabelManagedBy: names.ManagedByValue}); err != nil {
		return nil, err
	}
	var out []schema.GroupResource
	for _, md := range mds.Items {
		ref := md.Spec.Template.Spec.InfrastructureRef
		mapping, err := r.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
		if err != nil {
			return nil, fmt.Errorf("the machine template kind %s of %s: %w", ref.Kind, md.Name, err)
		}
		if gr := mapping.Resource.GroupResource(); !slices.Contains(out, gr) {
			out = append(out, gr)
		}
	}
	return out, nil
}

// remove deletes the Cluster's autoscaler objects that the operator made, and leaves
// any other object of those names alone. Each is read in the form the cache holds it
// (Register: the Deployment typed, the RBAC objects as metadata), so no second informer
// of a kind starts; the Secret, which is not cached, is read live.
func (r *Reconciler) remove(ctx context.Context, c *clusterv1.Cluster) error {
	name := types.NamespacedName{Namespace: c.Namespace, Name: autoscaler.Name(c.Name)}
	metadata := func(gvk schema.GroupVersionKind) client.Object {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m
	}
	var errs []error
	for _, obj := range []client.Object{
		&appsv1.Deployment{}, metadata(corev1.SchemeGroupVersion.WithKind("Secret")),
		metadata(rbacv1.SchemeGroupVersion.WithKind("RoleBinding")), metadata(rbacv1.SchemeGroupVersion.WithKind("Role")),
		metadata(corev1.SchemeGroupVersion.WithKind("ServiceAccount")),
	} {
		gvk, err := apiutil.GVKForObject(obj, r.Client.Scheme())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		key, reader := name, client.Reader(r.Client)
		if gvk.Kind == "Secret" {
			key.Name, reader = autoscaler.KubeconfigSecretName(c.Name), r.APIReader
		}
		if err := reader.Get(ctx, key, obj); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		if obj.GetLabels()[names.LabelManagedBy] != names.ManagedByValue || !metav1.IsControlledBy(obj, c) {
			continue
		}
		if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "AutoscalerRemoved", "DeleteAutoscaler", "%s %s removed: the cluster has no autoscaled pool, or its autoscaler is managed elsewhere", gvk.Kind, obj.GetName())
	}
	return errors.Join(errs...)
}

// newer says whether version a is after b; an unreadable version is never newer.
func newer(a, b string) bool {
	va, err := version.ParseGeneric(a)
	if err != nil {
		return false
	}
	vb, err := version.ParseGeneric(b)
	return err != nil || va.GreaterThan(vb)
}
