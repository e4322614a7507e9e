package satellite

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
)

// Condition and reasons of a SatelliteControlPlane.
const (
	ConditionReady            = "Ready"
	ReasonMirrored            = "Mirrored"
	ReasonControlPlaneMissing = "ControlPlaneNotFound"
)

// status mirrors the tenant's KamajiControlPlane (kcp; nil when there is none) on the
// satellite's control plane, in the fields Cluster API's control-plane contract reads:
// initialized, and the current version, which with spec.version makes Cluster API hold
// a satellite's scale-ups while the tenant upgrades, as it holds the main Cluster's.
// Written only when it changes.
func (r *Reconciler) status(ctx context.Context, scp *cpv1.SatelliteControlPlane, kcp *unstructured.Unstructured) error {
	want := scp.DeepCopy()
	st := &want.Status
	st.ExternalManagedControlPlane = ptr.To(true)
	st.ObservedGeneration = scp.Generation
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonControlPlaneMissing,
		Message: "the tenant Cluster's KamajiControlPlane " + scp.Spec.ClusterName + " does not exist", ObservedGeneration: scp.Generation}
	initialized := false
	st.Version = ""
	if kcp != nil {
		initialized, _, _ = unstructured.NestedBool(kcp.Object, "status", "initialization", "controlPlaneInitialized")
		v, _, _ := unstructured.NestedString(kcp.Object, "status", "version")
		st.Version = normalizeVersion(v)
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonMirrored
		cond.Message = "mirrors KamajiControlPlane " + kcp.GetName()
		if !initialized {
			cond.Message += ", not initialized yet"
		}
	}
	st.Initialization.ControlPlaneInitialized = ptr.To(initialized)
	meta.SetStatusCondition(&st.Conditions, cond)
	if equality.Semantic.DeepEqual(scp.Status, want.Status) {
		return nil
	}
	return r.Client.Status().Patch(ctx, want, client.MergeFromWithOptions(scp, client.MergeFromWithOptimisticLock{}))
}
