package nodegroup

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// WriteStatusClassMissing runs the status step on ng, read as old, as a reconcile that
// found its class missing would.
func (r *Reconciler) WriteStatusClassMissing(ctx context.Context, old, ng *v1.NodeGroup) error {
	s := newScope()
	s.set(v1.ConditionClassResolved, metav1.ConditionFalse, "ClassNotFound", "the class is gone")
	return r.writeStatus(ctx, old, ng, s)
}
