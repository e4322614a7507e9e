package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RemoteOptions are the registry options of every push and pull: credentials from the
// usual places (docker config, credential helpers) and the caller's context.
func RemoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// WriteLayout writes the containerDisk to an OCI image layout folder, with nothing else
// in its index.json, for push to take it from there.
func (w *Wrapped) WriteLayout(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if w.Index != nil {
		return p.AppendIndex(w.Index)
	}
	return p.AppendImage(w.Image)
}

// ReadLayout reads back the one image or index a layout folder written by WriteLayout
// holds.
func ReadLayout(dir string) (*Wrapped, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images: push takes a layout with exactly one (as wrap --out writes it)", dir, len(m.Manifests))
	}
	d := m.Manifests[0]
	switch {
	case d.MediaType.IsIndex():
		ii, err := idx.ImageIndex(d.Digest)
		return &Wrapped{Index: ii}, err
	case d.MediaType.IsImage():
		img, err := idx.Image(d.Digest)
		return &Wrapped{Image: img}, err
	}
	return nil, fmt.Errorf("%s: %s has media type %s, neither an image nor an index", dir, d.Digest, d.MediaType)
}

// Push pushes the containerDisk to target, a repository with or without a tag: with one,
// the tag points at it; without, it is pushed by digest only. It then pulls the manifest
// back by digest and returns the pushed reference, repository[:tag]@sha256:....
func (w *Wrapped) Push(target string, opts ...remote.Option) (string, error) {
	dig, err := w.Digest()
	if err != nil {
		return "", err
	}
	ref, shown, err := pushTarget(target, dig)
	if err != nil {
		return "", err
	}
	if w.Index != nil {
		err = remote.WriteIndex(ref, w.Index, opts...)
	} else {
		err = remote.Write(ref, w.Image, opts...)
	}
	if err != nil {
		return "", fmt.Errorf("pushing %s: %w", shown, err)
	}
	if _, err := PullByDigest(shown, opts...); err != nil {
		return "", fmt.Errorf("pushed %s but cannot pull it back: %w", shown, err)
	}
	return shown, nil
}

// pushTarget is where to push a manifest of digest dig: the tag of target if it names one
// (repository:tag), else the digest itself; and the reference to show for it.
func pushTarget(target string, dig v1.Hash) (name.Reference, string, error) {
	if tag, err := name.NewTag(target, name.StrictValidation); err == nil {
		return tag, tag.String() + "@" + dig.String(), nil
	}
	repo, err := name.NewRepository(target)
	if err != nil {
		return nil, "", fmt.Errorf("%q is neither repository:tag nor a repository: %w", target, err)
	}
	d := repo.Digest(dig.String())
	return d, d.String(), nil
}

// PullByDigest fetches the manifest ref names by digest (repository[:tag]@sha256:...) and
// checks that what the registry returned hashes to that digest: a registry, or a proxy,
// cannot substitute another image.
func PullByDigest(ref string, opts ...remote.Option) (*remote.Descriptor, error) {
	d, err := name.NewDigest(ref)
	if err != nil {
		return nil, fmt.Errorf("%q is not a reference by digest (repository@sha256:<64 hex>): %w", ref, err)
	}
	desc, err := remote.Get(d, opts...)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(desc.Manifest)
	got := "sha256:" + hex.EncodeToString(sum[:])
	if got != d.DigestStr() || desc.Digest.String() != d.DigestStr() {
		return nil, fmt.Errorf("%s: the registry returned manifest %s (descriptor %s), not %s", ref, got, desc.Digest, d.DigestStr())
	}
	return desc, nil
}
