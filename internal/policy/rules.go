package policy

import (
	"strings"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// Rule is a built-in admission rule: a CEL expression that is true when the pool is
// admitted, the field a refusal points at, and a message that says what to change.
type Rule struct {
	Name       string
	Field      string
	Expression string
	Message    string
}

// versionPattern is a release the rules can parse: vMAJOR.MINOR or vMAJOR.MINOR.PATCH (the
// leading v optional, as control planes report it either way). Anything else is left to
// the CRD's own validation and to resolve, which report it better.
const versionPattern = `'^v?[0-9]{1,9}[.][0-9]{1,9}([.][0-9]{1,9})?$'`

// anyHas is a CEL expression that is true when the object at path has any of fields.
func anyHas(path string, fields []string) string {
	has := make([]string, len(fields))
	for i, f := range fields {
		has[i] = "has(" + path + "." + f + ")"
	}
	return strings.Join(has, " || ")
}

// BuiltinRules returns the built-in rules, in the order Evaluate reports them.
func BuiltinRules() []Rule { return append([]Rule(nil), builtinRules...) }

// Names of the built-in rules a caller reports with a condition of its own.
const (
	RuleLocationAccess = "location-access"
	RuleVersion        = "version"
	RuleClassVersion   = "class-version"
	RuleMachineCluster = "machine-cluster"
)

var builtinRules = []Rule{
	{
		// oldClass is the class the pool's machines were built from: the webhook passes
		// the old object's class, the reconciler the OS its live MachineDeployment boots.
		// Classes are immutable, so comparing the OS is the same as comparing the class
		// name and then the OS, and needs no old object.
		Name:  "os-switch",
		Field: "spec.nodeGroupClassName",
		Expression: `!machineDeploymentExists || oldClass == null || !has(oldClass.os) ||
			class.os == oldClass.os`,
		Message: "spec.nodeGroupClassName names a class of another operating system than the pool's running machines: a running pool cannot switch between Talos and Kairos; set spec.nodeGroupClassName back, or create a new pool on the new class and delete this one",
	},
	{
		// Cluster API refuses to change a MachineDeployment's spec.clusterName, and the
		// machines of a pool on a Proxmox location run under the tenant's satellite
		// there, not under the tenant's Cluster: a running pool stays with its Cluster.
		// Moves between KubeVirt locations keep the tenant's Cluster and pass.
		Name:       RuleMachineCluster,
		Field:      "spec.locationName",
		Expression: `machineCluster == '' || machineCluster == cluster`,
		Message:    "spec.locationName moves the pool's running machines to another Cluster API Cluster (a Proxmox location's machines run under the tenant's satellite Cluster there, KubeVirt machines under the tenant's Cluster), which a MachineDeployment cannot do: set spec.locationName back, or create a new pool on the new location and delete this one",
	},
	{
		// Every Kairos class; the CRD's own rule can only name the built-in one.
		Name:       "talos-only-fields",
		Field:      "spec",
		Expression: `class.os != 'Kairos' || !(` + anyHas("object.spec", v1.TalosOnlyFields()) + `)`,
		Message:    v1.TalosOnlyFieldsMessage,
	},
	{
		// The semantics of metav1.LabelSelector: every matchLabels entry and every
		// matchExpressions requirement must hold; an unknown operator admits nothing.
		Name:  RuleLocationAccess,
		Field: "spec.locationName",
		Expression: `has(location.allowedNamespaces) && cel.bind(sel, location.allowedNamespaces,
			(!has(sel.matchLabels) ||
			  sel.matchLabels.all(k, k in namespaceLabels && namespaceLabels[k] == sel.matchLabels[k])) &&
			(!has(sel.matchExpressions) || sel.matchExpressions.all(e,
			  e.operator == 'In' ? e.key in namespaceLabels && has(e.values) && namespaceLabels[e.key] in e.values :
			  e.operator == 'NotIn' ? !(e.key in namespaceLabels && has(e.values) && namespaceLabels[e.key] in e.values) :
			  e.operator == 'Exists' ? e.key in namespaceLabels :
			  e.operator == 'DoesNotExist' ? !(e.key in namespaceLabels) :
			  false)))`,
		Message: "the location named by spec.locationName does not admit the pool's namespace (its spec.allowedNamespaces): ask the platform for access, or set spec.locationName to a location that admits it",
	},
	{
		// The release the pool runs: the one built into its class's image if it has one,
		// else spec.kubernetesVersion. Unset, it follows the control plane.
		Name:  RuleVersion,
		Field: "spec.kubernetesVersion",
		Expression: `cel.bind(want,
			has(class.image) ? class.image.kubernetesVersion :
			has(object.spec.kubernetesVersion) ? object.spec.kubernetesVersion : '',
			!want.matches(` + versionPattern + `) || !controlPlaneVersion.matches(` + versionPattern + `) ||
			cel.bind(p, want.replace('v', '').split('.').map(s, int(s)),
			cel.bind(c, controlPlaneVersion.replace('v', '').split('.').map(s, int(s)),
			  p[0] < c[0] || (p[0] == c[0] && p[1] <= c[1]))))`,
		Message: "the pool's Kubernetes minor (spec.kubernetesVersion, or the release built into its class's image) is ahead of the control plane's: workers must not be newer than their API server; lower spec.kubernetesVersion or pick a class built for the control plane's minor, or upgrade the control plane first",
	},
	{
		// A class with an image fixes the release: its kubelet and kubeadm are built in.
		Name:  RuleClassVersion,
		Field: "spec.kubernetesVersion",
		Expression: `!has(class.image) || !has(object.spec.kubernetesVersion) ||
			!object.spec.kubernetesVersion.matches(` + versionPattern + `) ||
			!class.image.kubernetesVersion.matches(` + versionPattern + `) ||
			cel.bind(p, object.spec.kubernetesVersion.replace('v', '').split('.').map(s, int(s)),
			cel.bind(c, class.image.kubernetesVersion.replace('v', '').split('.').map(s, int(s)),
			  p[0] == c[0] && p[1] == c[1]))`,
		Message: "spec.kubernetesVersion is another minor than the release built into the class's image (spec.image.kubernetesVersion of the class): remove spec.kubernetesVersion, set it to the class's minor, or use another class",
	},
}
