package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// restConfig is how explain reaches the cluster; tests replace it.
var restConfig = func() (*rest.Config, error) { return config.GetConfig() }

// explainCmd says, in plain words, why a pool is or is not ready: its conditions in the
// order a pool goes through them, its MachineDeployment and its machines.
func explainCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ns := fs.String("n", "default", "namespace of the pool")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" {
		fmt.Fprintln(stderr, "explain: name the pool: kubectl nodegroup explain NAME -n NAMESPACE")
		return 2
	}
	cfg, err := restConfig()
	if err != nil {
		fmt.Fprintln(stderr, "explain: no cluster to ask:", err)
		return 2
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		fmt.Fprintln(stderr, "explain:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ng := &v1.NodeGroup{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: *ns, Name: name}, ng); err != nil {
		fmt.Fprintf(stderr, "explain: NodeGroup %s/%s: %v\n", *ns, name, err)
		return 2
	}
	return explain(ctx, c, ng, stdout)
}

// steps are the conditions in the order a pool passes them, with what each means.
var steps = []struct{ condition, meaning string }{
	{v1.ConditionClassResolved, "its class"},
	{v1.ConditionLocationResolved, "its location"},
	{v1.ConditionClusterFound, "its cluster and control plane"},
	{v1.ConditionRendered, "its Cluster API objects"},
	{v1.ConditionReady, "its machines"},
}

func explain(ctx context.Context, c client.Client, ng *v1.NodeGroup, w io.Writer) int {
	fmt.Fprintf(w, "NodeGroup %s/%s (class %s, location %s, cluster %s, %d..%d machines)\n",
		ng.Namespace, ng.Name, ng.Spec.NodeGroupClassName, ng.Spec.LocationName, ng.Spec.ClusterName, ng.Spec.MinReplicas, ng.Spec.MaxReplicas)
	if ng.Status.ObservedGeneration != ng.Generation {
		fmt.Fprintf(w, "  The operator has not looked at the latest change yet (generation %d, status describes %d).\n",
			ng.Generation, ng.Status.ObservedGeneration)
	}
	ready := false
	for _, s := range steps {
		cond := meta.FindStatusCondition(ng.Status.Conditions, s.condition)
		switch {
		case cond == nil:
			fmt.Fprintf(w, "  ?  %s: not reported yet.\n", s.meaning)
		case cond.Status == metav1.ConditionUnknown:
			fmt.Fprintf(w, "  ?  %s: %s\n", s.meaning, cond.Message)
		case cond.Status == metav1.ConditionTrue:
			fmt.Fprintf(w, "  ok %s: %s\n", s.meaning, cond.Message)
			ready = ready || s.condition == v1.ConditionReady
		default:
			fmt.Fprintf(w, "  !! %s (%s): %s\n", s.meaning, cond.Reason, cond.Message)
		}
	}
	if ng.Status.MachineDeploymentName != "" {
		md := &clusterv1.MachineDeployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ng.Namespace, Name: ng.Status.MachineDeploymentName}, md); err == nil {
			fmt.Fprintf(w, "MachineDeployment %s: %d desired, %d ready, version %s\n", md.Name,
				deref(md.Spec.Replicas), deref(md.Status.ReadyReplicas), md.Spec.Template.Spec.Version)
			machines := &clusterv1.MachineList{}
			if err := c.List(ctx, machines, client.InNamespace(ng.Namespace),
				client.MatchingLabels{"cluster.x-k8s.io/deployment-name": md.Name}); err == nil {
				sort.Slice(machines.Items, func(i, j int) bool { return machines.Items[i].Name < machines.Items[j].Name })
				for _, m := range machines.Items {
					node := m.Status.NodeRef.Name
					if node == "" {
						node = "no node yet"
					}
					fmt.Fprintf(w, "  machine %s: %s, %s\n", m.Name, m.Status.Phase, node)
				}
			}
		} else {
			fmt.Fprintf(w, "MachineDeployment %s: %v\n", ng.Status.MachineDeploymentName, err)
		}
	}
	if ready {
		fmt.Fprintln(w, "The pool is ready.")
		return 0
	}
	fmt.Fprintln(w, "The pool is not ready: fix the first step marked !!, the ones after it follow.")
	return 1
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
