package names

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// TemplateKinds are the kinds of the templates render makes, every Bootstrap and
// Infrastructure kind: a pool's clean-up of superseded templates looks through them,
// and the operator's cache holds their metadata.
var TemplateKinds = []schema.GroupVersionKind{
	talos.GroupVersion.WithKind("TalosConfigTemplate"),
	kairos.GroupVersion.WithKind("KairosConfigTemplate"),
	capk.GroupVersion.WithKind("KubevirtMachineTemplate"),
}

// ProxmoxTemplateKind is the machine template of pools on Proxmox locations. It is not
// in TemplateKinds: it is served only where capmox is installed, and the operator
// watches and cleans it up only then.
var ProxmoxTemplateKind = capmox.GroupVersion.WithKind("ProxmoxMachineTemplate")
