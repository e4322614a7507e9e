package resolve

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/render"
)

// TestForgetDropsRememberedValues: what was remembered of a Service or a Secret is gone
// once its object's event says to forget it, and only that object's value.
func TestForgetDropsRememberedValues(t *testing.T) {
	r := &Resolver{Cache: struct{ client.Reader }{}} // remember keeps values only with a cache
	a := types.NamespacedName{Namespace: "tenant-a", Name: "tenant"}
	b := types.NamespacedName{Namespace: "tenant-b", Name: "tenant"}
	for _, key := range []types.NamespacedName{a, b} {
		remember(r, &r.services, key, "1", "10.0.0.1")
		remember(r, &r.secrets, key, "1", render.TalosSecrets{BootstrapToken: "token"})
	}

	r.ForgetService(a)
	r.ForgetSecret(b)
	if _, ok := r.services[a]; ok {
		t.Error("the Service's address survived ForgetService")
	}
	if _, ok := r.secrets[b]; ok {
		t.Error("the Talos secrets survived ForgetSecret")
	}
	if _, ok := r.services[b]; !ok {
		t.Error("ForgetSecret dropped a Service's address")
	}
	if _, ok := r.secrets[a]; !ok {
		t.Error("ForgetService dropped a Secret's value")
	}
}
