// Package scheme builds the runtime.Scheme the operator and its tests share: the
// built-in kinds, this project's API, and the provider kinds the operator writes.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// New returns a scheme with every kind the operator reads or writes.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, v1.AddToScheme, cpv1.AddToScheme, clusterv1.AddToScheme, capk.AddToScheme, capmox.AddToScheme, talos.AddToScheme, kairos.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // only a programming error: the kinds are registered twice
		}
	}
	return s
}
