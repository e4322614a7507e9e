package resolve

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
)

// location reads the pool's Location: one that exists, runs on a provider this
// operator drives, and, for a satellite location that admits the namespace, serves no
// other tenant cluster.
func (r *Resolver) location(ctx context.Context, ng *v1.NodeGroup) (v1.LocationSpec, error) {
	var loc v1.Location
	name := ng.Spec.LocationName
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &loc); err != nil {
		if apierrors.IsNotFound(err) {
			return v1.LocationSpec{}, fail(v1.ConditionLocationResolved, ReasonLocationNotFound, true,
				"Location %q does not exist: set spec.locationName to a published location (kubectl get locations)", name)
		}
		return v1.LocationSpec{}, err
	}
	// Whether the location admits the pool's namespace is a rule of internal/policy,
	// which the reconciler evaluates after resolve (and the webhook at admission).
	// A Proxmox location resolves: render makes the pool's machine template and says,
	// on Rendered, that machines there are not made yet.
	if loc.Spec.Provider.KubeVirt == nil && loc.Spec.Provider.Proxmox == nil {
		return v1.LocationSpec{}, fail(v1.ConditionLocationResolved, ReasonProviderNotSupported, false,
			"Location %q uses provider %s, which this operator version does not run yet: use a KubeVirt or Proxmox location", name, loc.Spec.Provider.Type)
	}
	if loc.Spec.Provider.Satellite() {
		taken, err := r.locationTaken(ctx, ng, &loc)
		if err != nil {
			return v1.LocationSpec{}, err
		}
		if taken {
			// The message names no other tenant: it is the pool's, which its tenant reads.
			return v1.LocationSpec{}, fail(v1.ConditionLocationResolved, ReasonLocationInUse, true,
				"Location %q already serves another tenant cluster, and machines of two tenant clusters there would be given the same addresses: use a location of your own (ask the platform for one), or wait until the other cluster's pools have left it", name)
		}
	}
	return loc.Spec, nil
}

// locationTaken says whether loc, a satellite location that admits the pool's
// namespace, serves another tenant cluster (policy.LocationTaken). A location that does
// not admit the namespace is not asked: the policy refuses the pool for that
// (LocationNotAllowed), and its tenant learns nothing of who else is there.
func (r *Resolver) locationTaken(ctx context.Context, ng *v1.NodeGroup, loc *v1.Location) (bool, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ng.Namespace}, ns); err != nil {
		return false, err
	}
	admits, err := policy.LocationAdmits(ctx, &loc.Spec, ns.Labels)
	if err != nil || !admits {
		return false, err
	}
	return policy.LocationTaken(ctx, r.Client, loc.Name, ng.Namespace, ng.Spec.ClusterName)
}
