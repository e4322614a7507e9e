package release

import (
	"context"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/nodegroup-io/nodegroup-operator/internal/gobuild"
	"github.com/nodegroup-io/nodegroup-operator/internal/operatorimage"
)

// OperatorImage builds cmd/nodegroup-operator for every ImagePlatforms entry into work and
// returns the multi-platform index of their images and the binaries, by platform.
func OperatorImage(ctx context.Context, root, version, work string) (v1.ImageIndex, map[Platform]string, error) {
	var images []operatorimage.Platform
	bins := map[Platform]string{}
	for _, p := range ImagePlatforms {
		bin := filepath.Join(work, "nodegroup-operator-"+p.OS+"-"+p.Arch)
		if err := gobuild.Build(ctx, root, "./cmd/nodegroup-operator", p, version, bin); err != nil {
			return nil, nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, nil, err
		}
		img, err := operatorimage.Build(data, p.Arch, version)
		if err != nil {
			return nil, nil, err
		}
		images = append(images, operatorimage.Platform{Arch: p.Arch, Image: img})
		bins[p] = bin
	}
	idx, err := operatorimage.Index(images)
	return idx, bins, err
}

// WriteLayout writes an index, and the artifacts that refer to it, as an OCI image
// layout in dir (replacing what was there).
func WriteLayout(dir string, idx v1.ImageIndex, referrers ...v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx); err != nil {
		return err
	}
	for _, r := range referrers {
		if err := p.AppendImage(r); err != nil {
			return err
		}
	}
	return nil
}

// ReadLayout reads back what WriteLayout wrote: the index and the images beside it.
func ReadLayout(dir string) (v1.ImageIndex, []v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	var idx v1.ImageIndex
	var imgs []v1.Image
	for _, d := range m.Manifests {
		if d.MediaType.IsIndex() {
			if idx, err = top.ImageIndex(d.Digest); err != nil {
				return nil, nil, err
			}
			continue
		}
		img, err := top.Image(d.Digest)
		if err != nil {
			return nil, nil, err
		}
		imgs = append(imgs, img)
	}
	if idx == nil {
		return nil, nil, os.ErrNotExist
	}
	return idx, imgs, nil
}
