// Command kubectl-nodegroup is a kubectl plugin for tenants and CI pipelines.
//
//	kubectl nodegroup validate -f pool.yaml [--name NAME] [--old old.yaml] [-n NAMESPACE | --context CONTEXT]
//	    [--objects objects.yaml ... | --class class.yaml --location location.yaml
//	     --namespace-labels k=v,... --control-plane-version v1.35.4 --running]
//	kubectl nodegroup render -f pool.yaml [--name NAME] [-n NAMESPACE | --context CONTEXT]
//	    [--objects objects.yaml ...] [-o yaml|json|wide]
//	kubectl nodegroup explain NAME [-n NAMESPACE] [-o yaml|json|wide]
//	kubectl nodegroup get [NAME ...] [-n NAMESPACE | -A] [-o wide|yaml|json]
//	kubectl nodegroup classes [-n NAMESPACE]
//	kubectl nodegroup version
//	kubectl nodegroup completion bash|zsh|fish|powershell
//
// validate checks a pool without a cluster as the API server would, so a GitOps
// repository or a pipeline refuses a pool before it is applied: first the CRD the chart
// ships (its schema, defaults and CEL rules, internal/offline/customresource), then the
// admission rules of the operator's webhook (internal/policy; with --objects, the
// webhook's own code over the files). Class and location files, and the objects of the
// chart's kinds among --objects (for render too), are checked against their CRDs the
// same way; one the API server would refuse is bad input. It exits 0 when the pool is
// admitted, 1 when a rule refuses it, 2 on bad input.
//
// render prints the objects the operator would apply for the pool, read with the CRD's
// defaults and resolved from files with the operator's own resolve and render packages;
// it exits 1 with the condition the operator would set when the pool cannot render.
//
// Neither asks a cluster. A pool file that names no namespace is read in the namespace
// of -n, else of the kubeconfig's context (--kubeconfig, --context), as kubectl apply
// reads it; -n other than the file's namespace is refused.
//
// explain, get and classes ask the cluster, reached as kubectl reaches it (--kubeconfig,
// --context, -n and the rest of kubectl's flags, k8s.io/cli-runtime): explain why a pool
// is not ready (exit 0 for a ready pool, 1 otherwise), get the pools in one table, classes
// the classes and locations and which locations the namespace may use.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitCode is the status a command ends with, returned as its error so cobra passes it
// up: 1 when the answer is no (a refused pool, a pool that is not ready), 2 on bad input.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// status is a command's exit code as the error cobra's RunE returns.
func status(code int) error {
	if code == 0 {
		return nil
	}
	return exitCode(code)
}

func run(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "kubectl-nodegroup",
		Short:         "Check, render and inspect NodeGroups",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nodegroup"},
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return exitCode(2)
		},
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(validateCommand(), renderCommand(), explainCommand(), getCommand(), classesCommand(), versionCommand())
	err := root.Execute()
	var code exitCode
	switch {
	case errors.As(err, &code):
		return int(code)
	case err != nil:
		fmt.Fprintln(stderr, "kubectl nodegroup:", err)
		return 2
	}
	return 0
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the revision it was built from",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "kubectl-nodegroup", version())
		},
	}
}

// releaseVersion is the tag of a release build, linked in by internal/release
// (-X main.releaseVersion=v0.3.0), which builds without VCS stamping.
var releaseVersion string

// version is the release's tag, else the module version the binary was built as (a tag
// with `go install ...@v0.3.0`, "(devel)" from a checkout) and the VCS revision it was
// built from (none when built with -buildvcs=false).
func version() string {
	if releaseVersion != "" {
		return releaseVersion
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(no build information)"
	}
	return versionOf(info)
}

func versionOf(info *debug.BuildInfo) string {
	v := info.Main.Version
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if revision != "" {
		v += " (revision " + revision + modified + ")"
	}
	return v
}
