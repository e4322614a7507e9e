package controlplanedns

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Publish sends the controller's apply for one KamajiControlPlane as it is, without the
// checks before it, so a test can show what the API server does with it.
func (r *Reconciler) Publish(ctx context.Context, namespace, name, addr string) error {
	kcp := &unstructured.Unstructured{}
	kcp.SetNamespace(namespace)
	kcp.SetName(name)
	return r.publish(ctx, kcp, addr)
}
