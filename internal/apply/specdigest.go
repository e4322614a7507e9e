package apply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/cachedspec"
)

// cachedSpecSum is the spec digest the cache recorded on cur when desired leaves the
// replicas to others, "" otherwise: a pool that sets its replicas is corrected by the
// dry run after any scale.
func cachedSpecSum(cur client.Object, desired *unstructured.Unstructured) string {
	if sendsReplicas(desired) {
		return ""
	}
	return cachedspec.Of(cur)
}

// liveSpecSum is the spec digest of live, read into its typed form as the cache decodes
// it, or "" when the scheme does not know its kind.
func (a *Applier) liveSpecSum(live *unstructured.Unstructured) string {
	ro, err := a.client.Scheme().New(live.GroupVersionKind())
	if err != nil {
		return ""
	}
	typed, ok := ro.(client.Object)
	if !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, typed) != nil {
		return ""
	}
	return cachedspec.Digest(typed)
}

// sendsReplicas reports whether desired sets spec.replicas.
func sendsReplicas(desired *unstructured.Unstructured) bool {
	_, ok, _ := unstructured.NestedFieldNoCopy(desired.Object, "spec", "replicas")
	return ok
}
