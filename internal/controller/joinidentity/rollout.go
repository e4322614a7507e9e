package joinidentity

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// rolled tells whether a rotation may end: every Talos MachineDeployment of the cluster
// names a bootstrap template that carries the current token, and no MachineSet that
// still has machines (or is to have them) names one that carries the previous token. A
// machine made from such a template until then still joins. When not, waiting says
// what is still to roll.
//
// It reads the templates' content, not their names: what decides is the token a
// machine will present. Only a rotation in flight reads this, live (the cache holds
// no template content).
func (r *Reconciler) rolled(ctx context.Context, c *clusterv1.Cluster, id *joinIdentity) (done bool, waiting string, err error) {
	inCluster := []client.ListOption{client.InNamespace(c.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name}}
	carries := map[string]string{} // template name → "current", "previous" or ""
	tokenOf := func(name string) (string, error) {
		if v, ok := carries[name]; ok {
			return v, nil
		}
		tpl := &unstructured.Unstructured{}
		tpl.SetGroupVersionKind(talos.GroupVersion.WithKind("TalosConfigTemplate"))
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, tpl); err != nil {
			return "", client.IgnoreNotFound(err)
		}
		data, _, _ := unstructured.NestedString(tpl.Object, "spec", "template", "spec", "data")
		switch {
		case strings.Contains(data, id.current):
			carries[name] = "current"
		case strings.Contains(data, id.previous):
			carries[name] = "previous"
		default:
			carries[name] = ""
		}
		return carries[name], nil
	}
	isTalos := func(ref clusterv1.ContractVersionedObjectReference) bool {
		return ref.APIGroup == talos.GroupVersion.Group && ref.Kind == "TalosConfigTemplate"
	}

	// Only the pools' own: another MachineDeployment of the cluster is not the operator's
	// to wait for.
	var mds clusterv1.MachineDeploymentList
	if err := r.APIReader.List(ctx, &mds, append(inCluster, client.MatchingLabels{names.LabelManagedBy: names.ManagedByValue})...); err != nil {
		return false, "", err
	}
	for _, md := range mds.Items {
		ref := md.Spec.Template.Spec.Bootstrap.ConfigRef
		if !isTalos(ref) || !md.DeletionTimestamp.IsZero() {
			continue
		}
		if t, err := tokenOf(ref.Name); err != nil {
			return false, "", err
		} else if t != "current" {
			return false, fmt.Sprintf("MachineDeployment %s is not rendered with the new token yet", md.Name), nil
		}
	}
	var sets clusterv1.MachineSetList
	if err := r.APIReader.List(ctx, &sets, append(inCluster, client.HasLabels{names.LabelPool})...); err != nil {
		return false, "", err
	}
	for _, ms := range sets.Items {
		ref := ms.Spec.Template.Spec.Bootstrap.ConfigRef
		if !isTalos(ref) {
			continue
		}
		replicas := ms.Status.Replicas
		if ms.Spec.Replicas != nil && *ms.Spec.Replicas > 0 || replicas != nil && *replicas > 0 {
			if t, err := tokenOf(ref.Name); err != nil {
				return false, "", err
			} else if t == "previous" {
				return false, fmt.Sprintf("MachineSet %s still runs machines made with the old token", ms.Name), nil
			}
		}
	}
	return true, "", nil
}
