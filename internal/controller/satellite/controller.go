// Package satellite keeps, for each tenant Cluster with pools on a location other than
// the management cluster, the satellite Cluster through which Cluster API runs the
// machines there (LOCATIONS.md in the docs): a Cluster API Cluster in the tenant's
// namespace whose InfraCluster is the location's (a ProxmoxCluster with the operator's
// copy of the location's credentials) and whose control plane is a
// SatelliteControlPlane mirroring the tenant's KamajiControlPlane, with its
// <satellite>-kubeconfig.
//
// A satellite is made only for a location that exists and admits the namespace: a
// tenant never gets the credentials of a location that does not admit it. Once made,
// it stays, untouched, while a pool of the cluster names its location, even if the
// location stops admitting the namespace: deleting it would delete the machines there
// (the pools report the refusal). It is deleted once no pool names the location any
// more; a pool is gone only after its machines are (its finalizer waits for its
// MachineDeployment), so the satellite outlives the drains. A tenant Cluster being
// deleted has its satellites deleted first, while its API server still answers.
//
// Ownership: the satellite Cluster is controlled by the tenant Cluster; its control
// plane and InfraCluster by the satellite Cluster (as Cluster API itself sets them); the
// kubeconfig by the control plane, as Cluster API's bootstrap providers expect. The
// InfraCluster must not name the tenant Cluster as an owner: infrastructure providers
// take the first owner of kind Cluster as theirs. The credentials copy has no owner of
// the operator's: capmox makes the ProxmoxCluster its owner and adds a finalizer that it
// removes only when no other owner is left, so the operator deletes the copy itself once
// the satellite Cluster is gone.
package satellite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
)

// errLocationTaken is why a tenant gets no satellite on a location another tenant
// cluster's satellite is on. It names no other tenant: the event is on this one's Cluster.
var errLocationTaken = errors.New("the location already serves another tenant cluster, whose machines take their addresses from the same range: give this cluster a Proxmox location of its own (the pools say so too)")

// Event reasons, on the tenant Cluster.
const (
	ReasonSatelliteCreated = "SatelliteCreated"
	ReasonSatelliteDeleted = "SatelliteDeleted"
	ReasonSatelliteFailed  = "SatelliteFailed"
	ReasonSatelliteWaiting = "SatelliteWaiting"
)

// Reconciler keeps the satellites of one tenant Cluster per reconcile.
type Reconciler struct {
	// Client reads from the manager's cache and writes.
	Client client.Client
	// APIReader reads what the cache does not hold: the data of the Secrets copied
	// (the cache holds Secrets as metadata) and the KamajiControlPlane's status (the
	// cache drops it).
	APIReader client.Reader
	// Cache is the manager's informer cache (Register sets it when nil): the applier
	// reads the satellite's objects from it, so a resync sends nothing.
	Cache client.Reader
	// Recorder emits the events on the tenant Cluster; Register sets it when nil.
	Recorder events.EventRecorder

	applier *apply.Applier
}

// Name of the controller.
func (r *Reconciler) Name() string { return "satellite" }

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=controlplane.nodegroup.io,resources=satellitecontrolplanes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=controlplane.nodegroup.io,resources=satellitecontrolplanes/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=proxmoxclusters,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kamajicontrolplanes,verbs=get;list;watch
// +kubebuilder:rbac:groups=nodegroup.io,resources=nodegroups;locations,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes the tenant Cluster's satellites what its pools call for.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			// Its satellites go with it (owner references); their copies of the
			// credentials once they are gone.
			return ctrl.Result{}, r.cleanCredentials(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !kamaji.IsControlPlaneOf(c) || paused.Cluster(c) {
		return ctrl.Result{}, nil
	}
	have, err := r.existing(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	if !c.DeletionTimestamp.IsZero() {
		for _, sat := range have {
			if err := r.remove(ctx, c, sat, "the tenant Cluster is being deleted"); err != nil {
				errs = append(errs, fmt.Errorf("removing satellite Cluster %s: %w", sat.Name, err))
			}
		}
		return r.done(c, append(errs, r.cleanCredentials(ctx, c.Namespace, c.Name)))
	}
	named, admitted, err := r.locations(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	var kcp *unstructured.Unstructured
	if len(admitted) > 0 {
		if kcp, err = r.controlPlane(ctx, c); err != nil {
			return ctrl.Result{}, err
		}
	}
	byName := map[string]*clusterv1.Cluster{}
	for _, sat := range have {
		byName[sat.Name] = sat
	}
	for _, loc := range slices.Sorted(maps.Keys(admitted)) {
		if err := r.keep(ctx, c, loc, admitted[loc], kcp, byName[names.SatelliteName(c.Name, loc)]); err != nil {
			errs = append(errs, fmt.Errorf("satellite on location %q: %w", loc, err))
		}
	}
	for _, sat := range have {
		if named[sat.Name] {
			continue
		}
		if err := r.remove(ctx, c, sat, "no pool of the cluster is on its location any more"); err != nil {
			errs = append(errs, fmt.Errorf("removing satellite Cluster %s: %w", sat.Name, err))
		}
	}
	return r.done(c, append(errs, r.cleanCredentials(ctx, c.Namespace, c.Name)))
}

// done ends a reconcile with errs: none, a conflict (a write raced the cache: retried,
// nothing to report), or the errors, with a Warning event.
func (r *Reconciler) done(c *clusterv1.Cluster, errs []error) (ctrl.Result, error) {
	err := errors.Join(errs...)
	switch {
	case err == nil:
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		return ctrl.Result{}, err // retried with backoff; nothing to report
	}
	r.event(c, corev1.EventTypeWarning, ReasonSatelliteFailed, "%v", err)
	return ctrl.Result{}, err
}

// locations reads what c's pools call for: named holds the satellite name of every
// location a pool of c names (one being deleted too: its machines may still drain), and
// admitted the locations among them that get a satellite kept: they exist, run on
// Proxmox and admit the namespace. A named location that is not admitted keeps the
// satellite it has, untouched; the pool's own conditions say why.
func (r *Reconciler) locations(ctx context.Context, c *clusterv1.Cluster) (map[string]bool, map[string]*v1.LocationSpec, error) {
	pools := &v1.NodeGroupList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(c.Namespace), client.MatchingFields{operator.PoolsByCluster: c.Name}); err != nil {
		return nil, nil, err
	}
	named := map[string]bool{}
	admitted := map[string]*v1.LocationSpec{}
	var nsLabels map[string]string
	for i := range pools.Items {
		name := pools.Items[i].Spec.LocationName
		if name == "" || named[names.SatelliteName(c.Name, name)] {
			continue
		}
		named[names.SatelliteName(c.Name, name)] = true
		loc := &v1.Location{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, loc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, err
		}
		if loc.Spec.Provider.Proxmox == nil {
			continue
		}
		if nsLabels == nil {
			ns := &metav1.PartialObjectMetadata{}
			ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
			if err := r.Client.Get(ctx, client.ObjectKey{Name: c.Namespace}, ns); err != nil {
				return nil, nil, err
			}
			nsLabels = ns.Labels
			if nsLabels == nil {
				nsLabels = map[string]string{}
			}
		}
		admits, err := policy.LocationAdmits(ctx, &loc.Spec, nsLabels)
		if err != nil {
			return nil, nil, fmt.Errorf("location %q: %w", name, err)
		}
		if admits {
			admitted[name] = &loc.Spec
		}
	}
	return named, admitted, nil
}

// existing are c's satellite Clusters, from the cache.
func (r *Reconciler) existing(ctx context.Context, c *clusterv1.Cluster) ([]*clusterv1.Cluster, error) {
	list := &clusterv1.ClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{
		names.LabelManagedBy: names.ManagedByValue, names.LabelTenantCluster: names.LabelValue(c.Name),
	}); err != nil {
		return nil, err
	}
	var out []*clusterv1.Cluster
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], c) { // not another Cluster's of the same shortened label
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// keep makes the satellite of c on location loc hold what it should; cur is the
// satellite Cluster the cache holds, if any. A satellite being deleted is left to its
// deletion, whose end brings the tenant back here.
func (r *Reconciler) keep(ctx context.Context, c *clusterv1.Cluster, loc string, spec *v1.LocationSpec, kcp *unstructured.Unstructured, cur *clusterv1.Cluster) error {
	if cur != nil && !cur.DeletionTimestamp.IsZero() {
		return nil
	}
	if cur == nil {
		// Read live: this controller reconciles one tenant at a time, so two tenants'
		// satellites are never both made on one location (policy.LocationTaken).
		taken, err := policy.LocationTaken(ctx, r.APIReader, loc, c.Namespace, c.Name)
		if err != nil {
			return err
		}
		if taken {
			return r.waiting(ctx, c, loc, errLocationTaken)
		}
	}
	in := &render.SatelliteInput{
		Namespace: c.Namespace, LocationName: loc, Location: *spec, ControlPlaneVersion: desiredVersion(kcp),
		Cluster: render.Cluster{
			Name: c.Name, ControlPlaneHost: c.Spec.ControlPlaneEndpoint.Host, ControlPlanePort: c.Spec.ControlPlaneEndpoint.Port,
			ServiceCIDRs: c.Spec.ClusterNetwork.Services.CIDRBlocks, PodCIDRs: c.Spec.ClusterNetwork.Pods.CIDRBlocks,
			DNSDomain: c.Spec.ClusterNetwork.ServiceDomain,
		},
	}
	satCluster, err := render.SatelliteCluster(in)
	if err != nil {
		return r.waiting(ctx, c, loc, err)
	}
	scp, err := render.SatelliteControlPlane(in)
	if err != nil {
		return r.waiting(ctx, c, loc, err)
	}
	infra, err := render.ProxmoxCluster(in)
	if err != nil {
		return r.waiting(ctx, c, loc, err)
	}

	into := &unstructured.Unstructured{}
	res, err := r.applier.Apply(ctx, apply.Owner{Object: c, GVK: clusterv1.GroupVersion.WithKind("Cluster")}, satCluster, apply.ServerCopy(into))
	if err != nil {
		return err
	}
	if res == apply.Created {
		log.FromContext(ctx).Info("created a satellite Cluster", "satellite", satCluster.Name, "location", loc)
		r.event(c, corev1.EventTypeNormal, ReasonSatelliteCreated, "created satellite Cluster %s for the pools on location %s", satCluster.Name, loc)
	}
	sat := &clusterv1.Cluster{}
	if _, err := r.current(ctx, into, sat, satCluster.Name, c.Namespace); err != nil {
		return err
	}
	owner := apply.Owner{Object: sat, GVK: clusterv1.GroupVersion.WithKind("Cluster")}

	if ok, err := r.credentials(ctx, c, loc, spec.Provider.Proxmox.CredentialsRef); err != nil || !ok {
		return err
	}
	if _, err := r.applier.Apply(ctx, owner, infra); err != nil {
		return err
	}
	intoCP := &unstructured.Unstructured{}
	if _, err := r.applier.Apply(ctx, owner, scp, apply.ServerCopy(intoCP)); err != nil {
		return err
	}
	live := &cpv1.SatelliteControlPlane{}
	if _, err := r.current(ctx, intoCP, live, scp.Name, c.Namespace); err != nil {
		return err
	}
	if err := r.status(ctx, live, kcp); err != nil {
		return err
	}
	return r.kubeconfig(ctx, c, live, scp.Spec.ControlPlaneEndpoint)
}

// current is the object apply just wrote (into, when it wrote), else the cached one,
// else the live one: the cache may not hold an object created moments ago.
func (r *Reconciler) current(ctx context.Context, into *unstructured.Unstructured, obj client.Object, name, namespace string) (client.Object, error) {
	if into.GetUID() != "" {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(into.Object, obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := r.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, obj)
	}
	return obj, err
}

// waiting reports a satellite that cannot be rendered yet (the tenant Cluster has no
// endpoint, say): an event, no error. What fixes it (the Cluster, the Location) is
// watched, so retrying would only repeat the event.
func (r *Reconciler) waiting(ctx context.Context, c *clusterv1.Cluster, loc string, err error) error {
	log.FromContext(ctx).Info("satellite waits", "location", loc, "reason", err.Error())
	r.event(c, corev1.EventTypeWarning, ReasonSatelliteWaiting, "satellite on location %s: %v", loc, err)
	return nil
}

// controlPlane reads the tenant's KamajiControlPlane live (the cache holds no status),
// once per reconcile of a Cluster with satellites: its desired version and the status
// the satellites mirror. Nil when there is none.
func (r *Reconciler) controlPlane(ctx context.Context, c *clusterv1.Cluster) (*unstructured.Unstructured, error) {
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}, kcp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return kcp, nil
}

// desiredVersion is the control plane's spec.version, with its v.
func desiredVersion(kcp *unstructured.Unstructured) string {
	if kcp == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	return normalizeVersion(v)
}

func normalizeVersion(v string) string {
	if v != "" && v[0] != 'v' {
		return "v" + v
	}
	return v
}

// remove deletes the satellite sat of c, for why. Cluster API deletes its machines,
// control plane and InfraCluster before the Cluster itself; the operator deletes the
// credentials copy after it.
func (r *Reconciler) remove(ctx context.Context, c *clusterv1.Cluster, sat *clusterv1.Cluster, why string) error {
	if !sat.DeletionTimestamp.IsZero() {
		return nil
	}
	uid := sat.UID
	err := r.Client.Delete(ctx, sat, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	loc := sat.Labels[names.LabelLocation]
	log.FromContext(ctx).Info("deleted a satellite Cluster", "satellite", sat.Name, "location", loc, "why", why)
	r.event(c, corev1.EventTypeNormal, ReasonSatelliteDeleted, "deleted satellite Cluster %s on location %s: %s", sat.Name, loc, why)
	return nil
}

func (r *Reconciler) event(c *clusterv1.Cluster, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, kind, reason, "KeepSatellites", format, args...)
	}
}
