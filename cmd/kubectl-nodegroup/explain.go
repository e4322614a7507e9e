package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

func explainCommand() *cobra.Command {
	var cluster clusterFlags
	var output *outputFlags
	cmd := &cobra.Command{
		Use:   "explain NAME",
		Short: "Say why a pool is or is not ready",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return status(explainCmd(cluster, output, args, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	cluster = addClusterFlags(cmd)
	output = addOutputFlags(cmd, "", "wide: every condition of the pool, also those of no step")
	return cmd
}

// explainCmd says, in plain words, why a pool is or is not ready: its conditions in the
// order a pool goes through them, its MachineDeployment and its machines, all read from
// the pool's status (a tenant's roles grant NodeGroups and nothing of Cluster API). With
// -o yaml or json it prints the pool as read; the exit code says whether it is ready
// either way.
func explainCmd(cluster clusterFlags, output *outputFlags, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "explain: name the pool: kubectl nodegroup explain NAME -n NAMESPACE")
		return 2
	}
	printer, err := output.printer()
	if err != nil {
		fmt.Fprintln(stderr, "explain:", err)
		return 2
	}
	ns, err := cluster.namespace()
	if err != nil {
		fmt.Fprintln(stderr, "explain: no cluster to ask:", err)
		return 2
	}
	c, err := cluster.client()
	if err != nil {
		fmt.Fprintln(stderr, "explain: no cluster to ask:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ng := &v1.NodeGroup{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, ng); err != nil {
		fmt.Fprintf(stderr, "explain: NodeGroup %s/%s: %v\n", ns, args[0], err)
		return 2
	}
	if printer != nil {
		if err := output.print(stdout, printer, []client.Object{ng}, false); err != nil {
			fmt.Fprintln(stderr, "explain:", err)
			return 2
		}
		if ready(ng) {
			return 0
		}
		return 1
	}
	return explain(ng, stdout, output.wide())
}

// steps are the conditions in the order a pool passes them, with what each means.
var steps = []struct{ condition, meaning string }{
	{v1.ConditionClassResolved, "its class"},
	{v1.ConditionLocationResolved, "its location"},
	{v1.ConditionClusterFound, "its cluster and control plane"},
	{v1.ConditionRendered, "its Cluster API objects"},
	{v1.ConditionReady, "its machines"},
}

// ready is what explain's exit code says: the pool's Ready condition is True.
func ready(ng *v1.NodeGroup) bool {
	return meta.IsStatusConditionTrue(ng.Status.Conditions, v1.ConditionReady)
}

// explain writes the pool's steps and machines; wide adds the conditions of no step
// (TalosIdentityReady, TenantClusterReachable, the autoscaler's and the like).
func explain(ng *v1.NodeGroup, w io.Writer, wide bool) int {
	fmt.Fprintf(w, "NodeGroup %s/%s (class %s, location %s, cluster %s, %d..%d machines)\n",
		ng.Namespace, ng.Name, ng.Spec.NodeGroupClassName, ng.Spec.LocationName, ng.Spec.ClusterName, ng.Spec.MinReplicas, ng.Spec.MaxReplicas)
	if ng.Status.ObservedGeneration != ng.Generation {
		fmt.Fprintf(w, "  The operator has not looked at the latest change yet (generation %d, status describes %d).\n",
			ng.Generation, ng.Status.ObservedGeneration)
	}
	for _, s := range steps {
		cond := meta.FindStatusCondition(ng.Status.Conditions, s.condition)
		switch {
		case cond == nil:
			fmt.Fprintf(w, "  ?  %s: not reported yet.\n", s.meaning)
		case cond.Status == metav1.ConditionUnknown:
			fmt.Fprintf(w, "  ?  %s: %s\n", s.meaning, cond.Message)
		case cond.Status == metav1.ConditionTrue:
			fmt.Fprintf(w, "  ok %s: %s\n", s.meaning, cond.Message)
		default:
			fmt.Fprintf(w, "  !! %s (%s): %s\n", s.meaning, cond.Reason, cond.Message)
		}
	}
	machines(w, ng)
	if wide {
		otherConditions(w, ng)
	}
	if ready(ng) {
		fmt.Fprintln(w, "The pool is ready.")
		return 0
	}
	fmt.Fprintln(w, "The pool is not ready: fix the first step marked !!, the ones after it follow.")
	return 1
}

// rollout are the conditions of the pool's machines, as the MachineDeployment reports
// them, with the state each is well in.
var rollout = []struct {
	condition string
	well      metav1.ConditionStatus
}{
	{v1.ConditionAvailable, metav1.ConditionTrue},
	{v1.ConditionUpToDate, metav1.ConditionTrue},
	{v1.ConditionRollingOut, metav1.ConditionFalse},
	{v1.ConditionScalingUp, metav1.ConditionFalse},
	{v1.ConditionScalingDown, metav1.ConditionFalse},
}

// machines tells what the pool's status says of its machines: counts, version,
// templates, what goes on, and the machines that do not run. It reads the status alone,
// so a tenant who may read NodeGroups and nothing of Cluster API gets the whole answer.
func machines(w io.Writer, ng *v1.NodeGroup) {
	st := &ng.Status
	if st.MachineDeploymentName == "" {
		return
	}
	fmt.Fprintf(w, "Machines (MachineDeployment %s): %s; %s ready, %d up to date, %d available of %d\n",
		st.MachineDeploymentName, cmp.Or(st.Summary, "not reported yet"), cmp.Or(st.Ready, "?"),
		st.UpToDateReplicas, st.AvailableReplicas, st.Replicas)
	fmt.Fprintf(w, "  Kubernetes %s, bootstrap template %s, infrastructure template %s\n",
		st.KubernetesVersion, st.BootstrapTemplateName, st.InfrastructureTemplateName)
	for _, r := range rollout {
		if c := meta.FindStatusCondition(st.Conditions, r.condition); c != nil {
			mark := "ok"
			if c.Status != r.well {
				mark = "->"
			}
			fmt.Fprintf(w, "  %s %s=%s: %s\n", mark, c.Type, c.Status, c.Message)
		}
	}
	for _, m := range st.NotRunningMachines {
		why := cmp.Or(m.Reason, "no reason reported")
		if m.Condition != "" {
			why = m.Condition + " " + why
		}
		if m.Message != "" {
			why += ": " + m.Message
		}
		fmt.Fprintf(w, "  machine %s: %s, %s\n", m.Name, cmp.Or(m.Phase, "no phase yet"), why)
	}
	if rest := int(st.NotRunningMachineCount) - len(st.NotRunningMachines); rest > 0 {
		fmt.Fprintf(w, "  and %d more machines not running (kubectl get machines -n %s -l %s=%s)\n",
			rest, ng.Namespace, names.LabelPool, names.LabelValue(ng.Name))
	}
}

// otherConditions writes the pool's conditions that are neither a step nor one of its
// machines' rollout.
func otherConditions(w io.Writer, ng *v1.NodeGroup) {
	known := map[string]bool{}
	for _, s := range steps {
		known[s.condition] = true
	}
	for _, r := range rollout {
		known[r.condition] = true
	}
	for _, c := range ng.Status.Conditions {
		if !known[c.Type] {
			fmt.Fprintf(w, "  %s=%s (%s): %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
}
