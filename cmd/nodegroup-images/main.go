// Command nodegroup-images builds what the Kairos worker images need without a container
// engine: the plan of every build, kubeadm checked against its SHA-512, the KubeVirt
// containerDisk wrapped around a qcow2 disk, the push, and the digests pinned back into
// images/versions.yaml. The logic is in internal/images; this file only reads flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/images"
)

const usage = `usage: nodegroup-images <command> [flags]

commands:
  plan    list the builds: one per Kubernetes minor of the catalog and architecture
  verify  download a release binary and check it against its SHA-512
  wrap    turn qcow2 disks into a KubeVirt containerDisk image (an index for several arches)
  push    push a containerDisk written by wrap --out to a registry
  pin     write pushed digests into versions.yaml and the tag files
  sums    record the published kubeadm SHA-512 of a minor's release in versions.yaml

Run nodegroup-images <command> -h for its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code (2 for usage errors).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"plan": planCmd, "verify": verifyCmd, "wrap": wrapCmd, "push": pushCmd, "pin": pinCmd, "sums": sumsCmd,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := cmd(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "nodegroup-images %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "nodegroup-images %s: %v\n", args[0], err)
		return 1
	}
}

type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func newFlags(name string, stderr io.Writer, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: nodegroup-images %s\n\nflags:\n", help)
		fs.PrintDefaults()
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	return nil
}

func planCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", stderr, "plan [--arch amd64,arm64] [--json] [--catalog images/versions.yaml]")
	n := images.DefaultNaming
	arch := fs.String("arch", "amd64", "architectures to build, comma-separated (of "+strings.Join(images.Arches, ", ")+")")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	file := fs.String("catalog", "", "versions.yaml to plan from (default: the catalog compiled into this binary)")
	fs.StringVar(&n.KairosVersion, "kairos-version", n.KairosVersion, "Kairos release of the base image")
	fs.StringVar(&n.Flavor, "flavor", n.Flavor, "Kairos flavor (Linux distribution) of the base image")
	fs.StringVar(&n.FlavorRelease, "flavor-release", n.FlavorRelease, "release of the flavor")
	fs.StringVar(&n.Model, "model", n.Model, "Kairos model")
	fs.StringVar(&n.BaseRegistry, "base-registry", n.BaseRegistry, "registry and org of the Kairos base images")
	fs.StringVar(&n.Registry, "registry", n.Registry, "registry and org the worker images are pushed under")
	if err := parse(fs, args); err != nil {
		return err
	}
	c := catalog.Default()
	if *file != "" {
		data, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		if c, err = catalog.Parse(data); err != nil {
			return err
		}
	}
	p, err := images.NewPlan(c, strings.Split(*arch, ","), n)
	if err != nil {
		return usageError{err}
	}
	if *asJSON {
		return p.WriteJSON(stdout)
	}
	return p.WriteTable(stdout)
}

func verifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stderr, "verify --url URL --sha512 SUM [--out FILE]")
	url := fs.String("url", "", "release binary to download (required)")
	sum := fs.String("sha512", "", "its expected SHA-512, 128 hex characters (required)")
	out := fs.String("out", "", "write the binary here, only if it matches (default: check only)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *url == "" || *sum == "" {
		return usagef("--url and --sha512 are required")
	}
	got, err := images.Verify(ctx, nil, *url, *sum, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: SHA-512 %s OK\n", *url, got)
	if *out != "" {
		fmt.Fprintf(stdout, "wrote %s\n", *out)
	}
	return nil
}

func wrapCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("wrap", stderr, "wrap --disk disk.qcow2 [--disk-arm64 disk.qcow2] --os-image REF@sha256:... (--out DIR | --tag REPO[:TAG])")
	amd64 := fs.String("disk", "", "qcow2 disk for amd64")
	arm64 := fs.String("disk-arm64", "", "qcow2 disk for arm64 (with --disk: one index of both)")
	osImage := fs.String("os-image", "", "the OS image the disks were made from, by digest (required; pin checks it)")
	out := fs.String("out", "", "write an OCI image layout to this folder")
	tag := fs.String("tag", "", "push to this repository:tag (a repository alone: by digest only)")
	if err := parse(fs, args); err != nil {
		return err
	}
	disks := map[string]string{}
	if *amd64 != "" {
		disks["amd64"] = *amd64
	}
	if *arm64 != "" {
		disks["arm64"] = *arm64
	}
	switch {
	case len(disks) == 0:
		return usagef("no disk: give --disk and/or --disk-arm64")
	case *osImage == "":
		return usagef("--os-image is required: a disk is only pinned with the OS image it was made from")
	case (*out == "") == (*tag == ""):
		return usagef("give exactly one of --out and --tag")
	}
	w, err := images.Wrap(disks, *osImage)
	if err != nil {
		return err
	}
	if *out != "" {
		if err := w.WriteLayout(*out); err != nil {
			return err
		}
		d, err := w.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", d)
		return nil
	}
	ref, err := w.Push(*tag, images.RemoteOptions(ctx)...)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, ref)
	return nil
}

func pushCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("push", stderr, "push --layout DIR --tag REPO[:TAG]")
	dir := fs.String("layout", "", "OCI image layout written by wrap --out (required)")
	tag := fs.String("tag", "", "repository:tag to push to; a repository alone pushes by digest only (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" || *tag == "" {
		return usagef("--layout and --tag are required")
	}
	w, err := images.ReadLayout(*dir)
	if err != nil {
		return err
	}
	ref, err := w.Push(*tag, images.RemoteOptions(ctx)...)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, ref)
	return nil
}

func pinCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pin", stderr, "pin --minor vX.Y --disk REF@sha256:... --os-image REF@sha256:... [--versions images/versions.yaml] [--tag-dir DIR]")
	in := images.PinInput{}
	fs.StringVar(&in.VersionsFile, "versions", "images/versions.yaml", "catalog to write the digests into")
	fs.StringVar(&in.TagDir, "tag-dir", "", "folder of the tag files (default: the catalog's folder)")
	fs.StringVar(&in.Minor, "minor", "", "Kubernetes minor of the catalog entry, e.g. v1.35 (required)")
	fs.StringVar(&in.Disk, "disk", "", "the containerDisk as pushed, by digest (required)")
	fs.StringVar(&in.OSImage, "os-image", "", "the OS image it was made from, as pushed, by digest (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if in.Minor == "" || in.Disk == "" || in.OSImage == "" {
		return usagef("--minor, --disk and --os-image are required")
	}
	res, err := images.Pin(in, images.RemoteOptions(ctx)...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s: kairos.disk = %s\n", in.VersionsFile, in.Minor, res.Disk)
	fmt.Fprintf(stdout, "%s %s: kairos.osImage = %s\n", in.VersionsFile, in.Minor, res.OSImage)
	fmt.Fprintf(stdout, "%s: %s\n%s: %s\n", res.DiskTagFile, res.DiskTagValue, res.OSImageTagFile, res.OSImageTagValue)
	return nil
}

func sumsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sums", stderr, "sums --minor vX.Y [--arch amd64,arm64] [--versions images/versions.yaml] [--base https://dl.k8s.io]")
	minor := fs.String("minor", "", "Kubernetes minor of the catalog entry, e.g. v1.35 (required)")
	arch := fs.String("arch", "amd64,arm64", "architectures, comma-separated")
	file := fs.String("versions", "images/versions.yaml", "catalog to record the sums in")
	base := fs.String("base", images.DefaultReleaseBase, "where the release binaries and their .sha512 files are published")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *minor == "" {
		return usagef("--minor is required")
	}
	sums, err := images.RecordKubeadmSums(ctx, *file, *minor, strings.Split(*arch, ","), *base, http.DefaultClient)
	if err != nil {
		return err
	}
	for _, a := range strings.Split(*arch, ",") {
		fmt.Fprintf(stdout, "%s %s: kubeadmSHA512.%s = %s\n", *file, *minor, a, sums[a])
	}
	return nil
}
