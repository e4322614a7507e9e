package nodegroup

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
)

// maxMessage is how many characters of a Machine's or a MachineDeployment's condition
// message, or of a Machine's condition reason, the pool's status repeats (the API's
// MachineNotRunning holds a reason of at most 256 characters).
const maxMessage = 256

// notRunning reads the pool's Machines from the cache and returns those that are not
// running and ready, sorted by name, each with the first of operator.MachineConditions
// that says why. The cache holds those conditions only of such machines
// (operator.CacheOptions), and nothing else of their status but the phase.
//
// The machines are the pool's own: of its namespace, with its pool label and made by
// its MachineDeployment (the deployment-name label Cluster API sets, which the cache
// keeps). The status repeats their providers' text to the tenant, so no machine of
// another pool, cluster or namespace may reach it.
func (r *Reconciler) notRunning(ctx context.Context, ng *v1.NodeGroup) ([]v1.MachineNotRunning, error) {
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(ng.Namespace), client.MatchingLabels{
		names.LabelPool:                      names.LabelValue(ng.Name),
		clusterv1.MachineDeploymentNameLabel: names.MachineDeploymentName(ng.Spec.ClusterName, ng.Name),
	}); err != nil {
		return nil, err
	}
	var out []v1.MachineNotRunning
	for i := range machines.Items {
		m := &machines.Items[i]
		if operator.MachineRunning(m) {
			continue
		}
		out = append(out, machineNotRunning(m))
	}
	slices.SortFunc(out, func(a, b v1.MachineNotRunning) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// machineNotRunning says why a machine is not running: the first condition of
// operator.MachineConditions that is not as it should be (Deleting True, the others
// not True).
func machineNotRunning(m *clusterv1.Machine) v1.MachineNotRunning {
	out := v1.MachineNotRunning{Name: m.Name, Phase: m.Status.Phase}
	for _, typ := range operator.MachineConditions {
		c := meta.FindStatusCondition(m.Status.Conditions, typ)
		if c == nil || (c.Status == metav1.ConditionTrue) != (typ == clusterv1.DeletingCondition) {
			continue
		}
		out.Condition, out.Reason, out.Message = c.Type, oneLine(c.Reason), oneLine(c.Message)
		break
	}
	return out
}

// rollingOut names what the pool rolls out: the current templates (current) that a
// MachineSet of the pool does not use yet ("bootstrap template web-1a2b"), or its
// Kubernetes version when the templates are the same.
func (r *Reconciler) rollingOut(ctx context.Context, ng *v1.NodeGroup, current *objects, version string) (string, error) {
	sets := &clusterv1.MachineSetList{}
	if err := r.Client.List(ctx, sets, client.InNamespace(ng.Namespace),
		client.MatchingLabels{names.LabelPool: names.LabelValue(ng.Name)}); err != nil {
		return "", err
	}
	var bootstrap, infra bool
	for _, ms := range sets.Items {
		spec := ms.Spec.Template.Spec
		bootstrap = bootstrap || spec.Bootstrap.ConfigRef.Name != current.bootstrap
		infra = infra || spec.InfrastructureRef.Name != current.infrastructure
	}
	var what []string
	if bootstrap {
		what = append(what, "bootstrap template "+current.bootstrap)
	}
	if infra {
		what = append(what, "infrastructure template "+current.infrastructure)
	}
	if len(what) == 0 {
		return "Kubernetes " + version, nil
	}
	return strings.Join(what, " and "), nil
}

// oneLine is a provider's condition text as a pool's status repeats it to the tenant:
// valid UTF-8 on one line (Cluster API's lists of causes joined by "; "), without
// control or format characters (terminal escapes, carriage returns, bidirectional
// overrides, zero-width characters), runs of white space as one space, cut at
// maxMessage characters.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(strings.ToValidUTF8(s, string(utf8.RuneError)), "\n") {
		l = strings.Join(strings.Fields(strings.Map(printable, l)), " ")
		if l = strings.TrimSpace(strings.TrimPrefix(l, "* ")); l != "" {
			parts = append(parts, l)
		}
	}
	s = strings.Join(parts, "; ")
	if utf8.RuneCountInString(s) <= maxMessage {
		return s
	}
	return string([]rune(s)[:maxMessage-3]) + "..."
}

// printable maps a control or format character to a space (strings.Map).
func printable(r rune) rune {
	if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
		return ' '
	}
	return r
}
