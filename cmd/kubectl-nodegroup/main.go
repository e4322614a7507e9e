// Command kubectl-nodegroup is a kubectl plugin for tenants and CI pipelines.
//
//	kubectl nodegroup validate -f pool.yaml [--name NAME] [--old old.yaml]
//	    [--objects objects.yaml ... | --class class.yaml --location location.yaml
//	     --namespace-labels k=v,... --control-plane-version v1.35.4 --running]
//	kubectl nodegroup render -f pool.yaml [--name NAME] [--objects objects.yaml ...] [-o yaml|json]
//	kubectl nodegroup explain NAME [-n NAMESPACE]
//
// validate checks a pool without a cluster as the API server would, so a GitOps
// repository or a pipeline refuses a pool before it is applied: first the CRD the chart
// ships (its schema, defaults and CEL rules, internal/offline/customresource), then the
// admission rules of the operator's webhook (internal/policy; with --objects, the
// webhook's own code over the files). It exits 0 when the pool is admitted, 1 when a
// rule refuses it, 2 on bad input.
//
// render prints the objects the operator would apply for the pool, read with the CRD's
// defaults and resolved from files with the operator's own resolve and render packages;
// it exits 1 with the condition the operator would set when the pool cannot render.
//
// explain asks the cluster (the current kubeconfig) why a pool is not ready: its
// conditions in order, its MachineDeployment and its machines. It exits 0 for a ready
// pool, 1 otherwise.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "render":
		return renderCmd(args[1:], stdout, stderr)
	case "explain":
		return explainCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s\n", args[0], usage)
		return 2
	}
}

const usage = `usage: kubectl nodegroup validate -f pool.yaml [--name NAME] [--old old.yaml] [--objects objects.yaml ...]
                              [--class class.yaml] [--location location.yaml]
                              [--namespace-labels k=v,...] [--control-plane-version vX.Y.Z] [--running]
       kubectl nodegroup render -f pool.yaml [--name NAME] [--objects objects.yaml ...] [--apiserver-ip IP]
                              [--management-dns-ip IP] [--control-plane-endpoint HOST:PORT] [-o yaml|json]
       kubectl nodegroup explain NAME [-n NAMESPACE]`
