// Package satellite keeps, for each tenant Cluster with pools on a location other than
// the management cluster, the satellite Cluster through which Cluster API runs the
// machines there (LOCATIONS.md in the docs): a Cluster API Cluster in the tenant's
// namespace whose InfraCluster is the location's (a ProxmoxCluster with the operator's
// copy of the location's credentials) and whose control plane is a
// SatelliteControlPlane mirroring the tenant's KamajiControlPlane, with its
// <satellite>-kubeconfig. A satellite is made for a location only while a pool of the
// cluster names it, and only when the location admits the namespace: a tenant never
// gets the credentials of a location that does not admit it. It is deleted once no
// pool of the cluster names the location any more; a pool is gone only after its
// machines are (its finalizer waits for its MachineDeployment), so the satellite
// outlives the drains.
//
// Ownership: the satellite Cluster is controlled by the tenant Cluster, so it goes
// with it; its control plane, InfraCluster and the credentials copy are controlled by
// the satellite Cluster (as Cluster API itself sets them), the kubeconfig by the control
// plane, as Cluster API's bootstrap providers expect. The InfraCluster must not name the
// tenant Cluster as an owner: infrastructure providers take the first owner of kind
// Cluster as theirs.
package satellite

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// Event reasons, on the tenant Cluster.
const (
	ReasonSatelliteCreated = "SatelliteCreated"
	ReasonSatelliteDeleted = "SatelliteDeleted"
	ReasonSatelliteFailed  = "SatelliteFailed"
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
		return ctrl.Result{}, client.IgnoreNotFound(err) // its satellites go with it (owner references)
	}
	if !c.DeletionTimestamp.IsZero() || !kamaji.IsControlPlaneOf(c) || paused.Cluster(c) {
		return ctrl.Result{}, nil
	}
	want, err := r.wanted(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	have, err := r.existing(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for _, loc := range sortedKeys(want) {
		if err := r.keep(ctx, c, loc, want[loc]); err != nil {
			errs = append(errs, fmt.Errorf("satellite on location %q: %w", loc, err))
		}
	}
	keepNames := map[string]bool{}
	for loc := range want {
		keepNames[names.SatelliteName(c.Name, loc)] = true
	}
	for _, sat := range have {
		if keepNames[sat.Name] {
			continue
		}
		if err := r.remove(ctx, c, sat); err != nil {
			errs = append(errs, fmt.Errorf("removing satellite Cluster %s: %w", sat.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.event(c, corev1.EventTypeWarning, ReasonSatelliteFailed, "%v", err)
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// wanted are the locations that need a satellite of c: each location other than the
// management cluster that a pool of c names (one being deleted too: its machines may
// still drain), that exists, runs on Proxmox and admits the namespace. A location that
// fails any of that gets no satellite; the pool's own conditions say why.
func (r *Reconciler) wanted(ctx context.Context, c *clusterv1.Cluster) (map[string]*v1.LocationSpec, error) {
	pools := &v1.NodeGroupList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(c.Namespace), client.MatchingFields{operator.PoolsByCluster: c.Name}); err != nil {
		return nil, err
	}
	want := map[string]*v1.LocationSpec{}
	var nsLabels map[string]string
	for i := range pools.Items {
		name := pools.Items[i].Spec.LocationName
		if name == "" {
			continue
		}
		if _, seen := want[name]; seen {
			continue
		}
		loc := &v1.Location{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, loc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if loc.Spec.Provider.Proxmox == nil {
			continue
		}
		if nsLabels == nil {
			ns := &metav1.PartialObjectMetadata{}
			ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
			if err := r.Client.Get(ctx, client.ObjectKey{Name: c.Namespace}, ns); err != nil {
				return nil, err
			}
			nsLabels = ns.Labels
			if nsLabels == nil {
				nsLabels = map[string]string{}
			}
		}
		admits, err := policy.LocationAdmits(ctx, &loc.Spec, nsLabels)
		if err != nil || !admits {
			continue
		}
		want[name] = &loc.Spec
	}
	return want, nil
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

// keep makes the satellite of c on location loc hold what it should.
func (r *Reconciler) keep(ctx context.Context, c *clusterv1.Cluster, loc string, spec *v1.LocationSpec) error {
	version, kcp, err := r.controlPlane(ctx, c)
	if err != nil {
		return err
	}
	in := &render.SatelliteInput{
		Namespace: c.Namespace, LocationName: loc, Location: *spec, ControlPlaneVersion: version,
		Cluster: render.Cluster{
			Name: c.Name, ControlPlaneHost: c.Spec.ControlPlaneEndpoint.Host, ControlPlanePort: c.Spec.ControlPlaneEndpoint.Port,
			ServiceCIDRs: c.Spec.ClusterNetwork.Services.CIDRBlocks, PodCIDRs: c.Spec.ClusterNetwork.Pods.CIDRBlocks,
			DNSDomain: c.Spec.ClusterNetwork.ServiceDomain,
		},
	}
	satCluster, err := render.SatelliteCluster(in)
	if err != nil {
		return err
	}
	scp, err := render.SatelliteControlPlane(in)
	if err != nil {
		return err
	}
	infra, err := render.ProxmoxCluster(in)
	if err != nil {
		return err
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
	if into.GetUID() == "" {
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(satCluster), sat); err != nil {
			if apierrors.IsNotFound(err) {
				if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(satCluster), sat); err != nil {
					return err
				}
			} else {
				return err
			}
		}
	} else {
		sat.ObjectMeta = metav1.ObjectMeta{Namespace: into.GetNamespace(), Name: into.GetName(), UID: into.GetUID()}
	}
	owner := apply.Owner{Object: sat, GVK: clusterv1.GroupVersion.WithKind("Cluster")}

	if err := r.credentials(ctx, sat, loc, spec.Provider.Proxmox.CredentialsRef); err != nil {
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
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(scp), live); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(scp), live); err != nil {
			return err
		}
	}
	if err := r.kubeconfig(ctx, c, live); err != nil {
		return err
	}
	return r.status(ctx, live, kcp)
}

// controlPlane reads the tenant's KamajiControlPlane live (the cache holds no status):
// its desired version, and the object for the status mirrored on the satellites.
func (r *Reconciler) controlPlane(ctx context.Context, c *clusterv1.Cluster) (string, *unstructured.Unstructured, error) {
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}, kcp); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, nil
		}
		return "", nil, err
	}
	v, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	return normalizeVersion(v), kcp, nil
}

func normalizeVersion(v string) string {
	if v != "" && v[0] != 'v' {
		return "v" + v
	}
	return v
}

// remove deletes the satellite sat of c, whose location no pool names any more (its
// label says which). Cluster API deletes its
// control plane and InfraCluster first (and the garbage collector its copies of
// Secrets after them), so capmox still has its credentials while it cleans up.
func (r *Reconciler) remove(ctx context.Context, c *clusterv1.Cluster, sat *clusterv1.Cluster) error {
	loc := sat.Labels[names.LabelLocation]
	if !sat.DeletionTimestamp.IsZero() {
		return nil
	}
	uid := sat.UID
	err := r.Client.Delete(ctx, sat, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	log.FromContext(ctx).Info("deleted a satellite Cluster: no pool of the cluster is on its location any more", "satellite", sat.Name, "location", loc)
	r.event(c, corev1.EventTypeNormal, ReasonSatelliteDeleted, "deleted satellite Cluster %s: no pool of the cluster is on location %s any more", sat.Name, loc)
	return nil
}

func (r *Reconciler) event(c *clusterv1.Cluster, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, kind, reason, "KeepSatellites", format, args...)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
