package nodegroup

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// WriteStatusClassMissing runs the status step on ng, read as old, as a reconcile that
// found its class missing would.
func (r *Reconciler) WriteStatusClassMissing(ctx context.Context, old, ng *v1.NodeGroup) error {
	s := newScope()
	s.set(v1.ConditionClassResolved, metav1.ConditionFalse, "ClassNotFound", "the class is gone")
	return r.writeStatus(ctx, old, ng, s)
}

// WithClient is a Reconciler wired as r is, that reads the pool and writes with c.
func (r *Reconciler) WithClient(c client.Client) *Reconciler {
	out := &Reconciler{Client: c, APIReader: r.APIReader, Cache: r.Cache, Catalog: r.Catalog, Recorder: r.Recorder,
		ManagementDNS: r.ManagementDNS, ManagementDNSDomain: r.ManagementDNSDomain, Tenants: r.Tenants}
	out.wire(r.resolver.Mapper)
	return out
}
