// Command release makes what a version tag publishes (internal/release) into a folder,
// and with --push publishes it: the operator image index and its SBOMs by digest, the
// charts as OCI artifacts. The release workflow runs it; without --push it needs no
// registry, and `make test` runs the same build (internal/release's tests).
//
// Usage: go run ./hack/release --version v0.2.0 --out DIR [--push] [--chart-repository oci://REPO]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/nodegroup-io/nodegroup-operator/internal/release"
)

func main() {
	o := release.Options{Root: "."}
	var out string
	var push bool
	var po release.PushOptions
	flag.StringVar(&o.Version, "version", "", "the release tag, v<semver>")
	flag.StringVar(&out, "out", "dist", "folder to write the release into")
	flag.StringVar(&o.Repository, "repository", "ghcr.io/nodegroup-io/nodegroup-operator", "the operator image's repository")
	flag.StringVar(&o.PluginURL, "plugin-url", "", "where the plugin archives are downloaded from (default: the tag's GitHub release)")
	flag.BoolVar(&push, "push", false, "publish the image, its SBOMs and the charts after building them")
	flag.StringVar(&po.ChartRepository, "chart-repository", "oci://ghcr.io/nodegroup-io/charts", "OCI repository the charts are pushed under")
	flag.BoolVar(&po.PlainHTTP, "plain-http", false, "talk to the registries without TLS")
	flag.Parse()
	if o.Version == "" {
		fmt.Fprintln(os.Stderr, "release: --version is required")
		os.Exit(2)
	}
	if o.PluginURL == "" {
		o.PluginURL = "https://github.com/nodegroup-io/nodegroup-operator/releases/download/" + o.Version
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, out, push, po); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o release.Options, out string, push bool, po release.PushOptions) error {
	r, err := release.Build(ctx, o, out)
	if err != nil {
		return err
	}
	var report any = r
	if push {
		if report, err = release.Push(ctx, r, po); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}
