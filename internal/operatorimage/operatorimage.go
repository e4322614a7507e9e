// Package operatorimage builds the operator's container image without Docker: one layer
// holding the static operator binary, owned by the non-root user it runs as, on an empty
// base (no shell, no package manager: nothing to patch but the binary). Timestamps are
// fixed, so the same binary gives the same digest.
package operatorimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// BinaryPath is where the operator binary lives in the image.
	BinaryPath = "/nodegroup-operator"
	// UID and GID the operator runs as: the conventional "nonroot" user.
	UID = 65532
	GID = 65532
)

// epoch is the fixed time of every file and of the image: builds are reproducible.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image for an operator binary of the given architecture.
func Build(binary []byte, arch, version string) (v1.Image, error) {
	layer, err := binaryLayer(binary)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: epoch}
	cf.Config.User = fmt.Sprintf("%d:%d", UID, GID)
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "nodegroup-operator",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/nodegroup-io/nodegroup-operator",
	}
	cf.History = nil
	return mutate.ConfigFile(img, cf)
}

// Index returns the multi-platform image index of the images by architecture (all
// linux), in the order given: a pull picks the image of its node's architecture.
func Index(images []Platform) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	adds := make([]mutate.IndexAddendum, 0, len(images))
	for _, p := range images {
		cf, err := p.Image.ConfigFile()
		if err != nil {
			return nil, err
		}
		if cf.OS != "linux" || cf.Architecture != p.Arch {
			return nil, fmt.Errorf("image for %s is built for %s/%s", p.Arch, cf.OS, cf.Architecture)
		}
		adds = append(adds, mutate.IndexAddendum{Add: p.Image, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: p.Arch},
		}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// Platform is the image of one architecture in an index.
type Platform struct {
	Arch  string
	Image v1.Image
}

func binaryLayer(binary []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Name: BinaryPath[1:], Mode: 0o555, Size: int64(len(binary)), Typeflag: tar.TypeReg,
		Uid: UID, Gid: GID, ModTime: epoch, Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
