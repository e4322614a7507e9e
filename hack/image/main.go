// Command image builds the operator's container image without Docker (make image): a
// static, trimmed build of cmd/nodegroup-operator wrapped by internal/operatorimage,
// written as an OCI layout or pushed. The same source gives the same digest.
//
// Usage: go run ./hack/image [--arch amd64] [--version v0.1.0] (--out DIR | --tag REF)
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nodegroup-io/nodegroup-operator/internal/operatorimage"
)

func main() {
	arch := flag.String("arch", "amd64", "architecture to build for")
	version := flag.String("version", "v0.1.0", "version recorded in the image")
	out := flag.String("out", "", "write an OCI image layout to this folder")
	tag := flag.String("tag", "", "push to this reference")
	flag.Parse()
	if (*out == "") == (*tag == "") {
		fmt.Fprintln(os.Stderr, "image: give exactly one of --out and --tag")
		os.Exit(2)
	}
	if err := run(*arch, *version, *out, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(arch, version, out, tag string) error {
	tmp, err := os.MkdirTemp("", "nodegroup-operator-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "nodegroup-operator")
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", bin, "./cmd/nodegroup-operator")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the operator: %w", err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	img, err := operatorimage.Build(data, arch, version)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if out != "" {
		p, err := layout.Write(out, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img); err != nil {
			return err
		}
		fmt.Printf("%s (OCI layout %s)\n", digest, out)
		return nil
	}
	ref, err := name.ParseReference(tag)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img); err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref.Context(), digest)
	return nil
}
