package nodegroup

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/credentials"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// finalize deletes the MachineDeployment first and waits for it to go, so Cluster API
// drains and deletes the machines with their templates still present; then the health
// check and the templates; then it releases the NodeGroup.
func (r *Reconciler) finalize(ctx context.Context, ng *v1.NodeGroup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ng, Finalizer) {
		return ctrl.Result{}, nil
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := r.APIReader.List(ctx, mds, client.InNamespace(ng.Namespace), poolSelector(ng)); err != nil {
		return ctrl.Result{}, err
	}
	if len(mds.Items) > 0 {
		for i := range mds.Items {
			md := &mds.Items[i]
			if md.DeletionTimestamp.IsZero() && ownedBy(md, ng) {
				if err := r.Client.Delete(ctx, md); client.IgnoreNotFound(err) != nil {
					return ctrl.Result{}, err
				}
				r.event(ng, corev1.EventTypeNormal, "Deleting", "DeleteMachineDeployment", "deleting MachineDeployment %s; its machines are drained first", md.Name)
			}
		}
		return ctrl.Result{RequeueAfter: deletionPoll}, nil
	}
	mhc := &clusterv1.MachineHealthCheckList{}
	if err := r.APIReader.List(ctx, mhc, client.InNamespace(ng.Namespace), poolSelector(ng)); err != nil {
		return ctrl.Result{}, err
	}
	for i := range mhc.Items {
		if ownedBy(&mhc.Items[i], ng) {
			if err := r.Client.Delete(ctx, &mhc.Items[i]); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if err := credentials.ReleasePullSecrets(ctx, r.Client, r.APIReader, ng, ""); err != nil {
		return ctrl.Result{}, err
	}
	// With the MachineDeployment gone no MachineSet of the pool remains, so every
	// template of the pool is superseded.
	if _, err := r.applier.DeleteSupersededTemplates(ctx, ng.Namespace, names.LabelValue(ng.Name), ng.Status.MachineDeploymentName, nil, r.templateKinds...); err != nil {
		return ctrl.Result{}, err
	}
	r.applier.Forget(ng.Namespace, names.MachineDeploymentName(ng.Spec.ClusterName, ng.Name))
	r.readyTimer.Forget(client.ObjectKeyFromObject(ng))
	patch := client.MergeFrom(ng.DeepCopy())
	controllerutil.RemoveFinalizer(ng, Finalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, ng, patch))
}

// poolSelector selects the objects the operator created for a pool.
func poolSelector(ng *v1.NodeGroup) client.MatchingLabels {
	return client.MatchingLabels{names.LabelPool: names.LabelValue(ng.Name), names.LabelManagedBy: names.ManagedByValue}
}

func ownedBy(obj metav1.Object, ng *v1.NodeGroup) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == ng.UID {
			return true
		}
	}
	return false
}
