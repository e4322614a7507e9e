// Command image builds the operator's container image without Docker (make image): a
// static, trimmed build of cmd/nodegroup-operator for linux/amd64 and linux/arm64, each
// wrapped by internal/operatorimage, as one multi-platform index written as an OCI
// layout or pushed. The same source gives the same digest; internal/release builds the
// release's image the same way.
//
// Usage: go run ./hack/image [--version v0.1.0] (--out DIR | --tag REF)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nodegroup-io/nodegroup-operator/internal/release"
)

func main() {
	version := flag.String("version", "v0.1.0", "version recorded in the image")
	out := flag.String("out", "", "write an OCI image layout to this folder")
	tag := flag.String("tag", "", "push to this reference")
	flag.Parse()
	if (*out == "") == (*tag == "") {
		fmt.Fprintln(os.Stderr, "image: give exactly one of --out and --tag")
		os.Exit(2)
	}
	if err := run(context.Background(), *version, *out, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, version, out, tag string) error {
	tmp, err := os.MkdirTemp("", "nodegroup-operator-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	idx, _, err := release.OperatorImage(ctx, ".", version, tmp)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if out != "" {
		if err := release.WriteLayout(out, idx); err != nil {
			return err
		}
		fmt.Printf("%s (OCI layout %s)\n", digest, out)
		return nil
	}
	ref, err := name.ParseReference(tag)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref.Context(), digest)
	return nil
}
