package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// checkDiskImage checks one containerDisk image as KubeVirt will read it: OCI media
// types, the architecture, the base annotation, and a single layer holding exactly
// /disk (0555) and /disk/disk.qcow2 (0440), both owned by 107:107, the file byte for byte
// the qcow2 it was made from.
func checkDiskImage(t *testing.T, img v1.Image, arch, disk, osImage string) {
	t.Helper()
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("%s: manifest media type %s (%v), want %s", arch, mt, err, types.OCIManifestSchema1)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("%s: config media type %s, want %s", arch, m.Config.MediaType, types.OCIConfigJSON)
	}
	osRef, _ := name.NewDigest(osImage)
	if m.Annotations[AnnotationBaseDigest] != osRef.DigestStr() || m.Annotations[AnnotationBaseName] != osRef.String() {
		t.Errorf("%s: annotations %v, want the OS image %s", arch, m.Annotations, osImage)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != arch || !cf.Created.Time.Equal(time.Unix(0, 0)) {
		t.Errorf("config: os %q arch %q created %v, want linux %s at the epoch", cf.OS, cf.Architecture, cf.Created, arch)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 || len(m.Layers) != 1 {
		t.Fatalf("%s: %d layers, want 1", arch, len(layers))
	}
	if m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("%s: layer media type %s, want %s", arch, m.Layers[0].MediaType, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	want := readFile(t, disk)
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 107 || h.Gid != 107 {
			t.Errorf("%s: %s owned by %d:%d, want 107:107", arch, h.Name, h.Uid, h.Gid)
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: %s mtime %v, want the epoch", arch, h.Name, h.ModTime)
		}
		switch h.Name {
		case "disk/":
			if h.Typeflag != tar.TypeDir || h.Mode != 0o555 {
				t.Errorf("%s: disk/ is type %c mode %o, want a folder 0555", arch, h.Typeflag, h.Mode)
			}
		case "disk/disk.qcow2":
			if h.Typeflag != tar.TypeReg || (h.Mode != 0o440 && h.Mode != 0o444) {
				t.Errorf("%s: disk.qcow2 is type %c mode %o, want a file 0440 or 0444", arch, h.Typeflag, h.Mode)
			}
			got, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: /disk/disk.qcow2 (%d bytes, sha256 %x) is not %s (%d bytes, sha256 %x)",
					arch, len(got), sha256.Sum256(got), disk, len(want), sha256.Sum256(want))
			}
		}
	}
	if len(names) != 2 || names[0] != "disk/" || names[1] != "disk/disk.qcow2" {
		t.Errorf("%s: layer holds %q, want [disk/ disk/disk.qcow2]", arch, names)
	}
}

// TestWrapPushPullTwoArches wraps two real qcow2 disks into an index, writes it to a
// layout, pushes it from there to a registry, pulls it back by digest and checks all of
// it: the index, both images and their layers.
func TestWrapPushPullTwoArches(t *testing.T) {
	dir := t.TempDir()
	disks := map[string]string{
		"amd64": qcow2(t, dir, "amd64.qcow2", "16M"),
		"arm64": qcow2(t, dir, "arm64.qcow2", "24M"), // another size: another file
	}
	host := testRegistry(t)
	osImage := pushOSImage(t, host, "amd64", "arm64")

	w, err := Wrap(disks, osImage)
	if err != nil {
		t.Fatal(err)
	}
	if w.Index == nil {
		t.Fatal("two architectures gave no index")
	}
	want, err := w.Digest()
	if err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	if err := w.WriteLayout(lay); err != nil {
		t.Fatal(err)
	}
	fromLayout, err := ReadLayout(lay)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := fromLayout.Push(host+"/kairos-worker/ubuntu:24.04-standard-generic-v3.7.2-kubeadmv1.35.4-img", remoteOpts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	if wantRef := host + "/kairos-worker/ubuntu:24.04-standard-generic-v3.7.2-kubeadmv1.35.4-img@" + want.String(); ref != wantRef {
		t.Fatalf("pushed %s, want %s", ref, wantRef)
	}

	desc, err := PullByDigest(ref, remoteOpts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	if desc.MediaType != types.OCIImageIndex {
		t.Fatalf("pulled media type %s, want %s", desc.MediaType, types.OCIImageIndex)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	osRef, _ := name.NewDigest(osImage)
	if im.Annotations[AnnotationBaseDigest] != osRef.DigestStr() {
		t.Errorf("index annotations %v, want base digest %s", im.Annotations, osRef.DigestStr())
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("index has %d manifests, want 2", len(im.Manifests))
	}
	for i, arch := range []string{"amd64", "arm64"} { // sorted by arch, whatever the map order
		d := im.Manifests[i]
		if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			t.Errorf("index entry %d: media type %s platform %+v, want %s linux/%s", i, d.MediaType, d.Platform, types.OCIManifestSchema1, arch)
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkDiskImage(t, img, arch, disks[arch], osImage)
	}
	t.Logf("pushed and pulled back %s", ref)
}

// TestWrapOneArchIsAnImage: with one architecture there is nothing to choose between, so
// the result is a plain image; pushed by repository alone, it is pushed by digest only.
func TestWrapOneArchIsAnImage(t *testing.T) {
	dir := t.TempDir()
	disk := qcow2(t, dir, "disk.qcow2", "16M")
	host := testRegistry(t)
	osImage := pushOSImage(t, host, "amd64")

	w, err := Wrap(map[string]string{"amd64": disk}, osImage)
	if err != nil {
		t.Fatal(err)
	}
	if w.Image == nil || w.Index != nil {
		t.Fatal("one architecture should give an image, not an index")
	}
	ref, err := w.Push(host+"/kairos-worker/disk", remoteOpts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	dig, _ := w.Digest()
	if ref != host+"/kairos-worker/disk@"+dig.String() {
		t.Fatalf("pushed by digest as %s", ref)
	}
	desc, err := PullByDigest(ref, remoteOpts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	img, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	checkDiskImage(t, img, "amd64", disk, osImage)
}

// TestWrapIsDeterministic: the same disks and OS image give the same digest, whatever the
// file's name, folder, times or owner on this machine.
func TestWrapIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	a := qcow2(t, dir, "a.qcow2", "16M")
	b := qcow2(t, dir, "b.qcow2", "16M")
	osImage := "registry.example.com/kairos-worker/ubuntu@sha256:" + sha256hex("os image")

	digest := func(disks map[string]string) v1.Hash {
		t.Helper()
		w, err := Wrap(disks, osImage)
		if err != nil {
			t.Fatal(err)
		}
		d, err := w.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := digest(map[string]string{"amd64": a, "arm64": b})
	// A copy of the same bytes, elsewhere, with other times and mode.
	other := filepath.Join(t.TempDir(), "renamed.qcow2")
	if err := os.WriteFile(other, readFile(t, a), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(other, time.Now().Add(time.Hour), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	second := digest(map[string]string{"arm64": b, "amd64": other})
	if first != second {
		t.Fatalf("wrapping the same disks twice gave %s, then %s", first, second)
	}
	single := digest(map[string]string{"amd64": a})
	if again := digest(map[string]string{"amd64": other}); single != again {
		t.Fatalf("one disk wrapped twice gave %s, then %s", single, again)
	}
	// Another OS image is another disk image: the digest covers the trace.
	w, err := Wrap(map[string]string{"amd64": a}, "registry.example.com/kairos-worker/ubuntu@sha256:"+sha256hex("other"))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := w.Digest(); d == single {
		t.Fatal("the OS image does not enter the digest")
	}
	t.Logf("index %s, amd64 image %s", first, single)
}

func TestWrapRefuses(t *testing.T) {
	dir := t.TempDir()
	disk := qcow2(t, dir, "disk.qcow2", "16M")
	raw := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(raw, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	osImage := "registry.example.com/kairos-worker/ubuntu@sha256:" + sha256hex("os image")
	for _, c := range []struct {
		name    string
		disks   map[string]string
		osImage string
	}{
		{"no disk", map[string]string{}, osImage},
		{"raw disk", map[string]string{"amd64": raw}, osImage},
		{"missing disk", map[string]string{"amd64": filepath.Join(dir, "nope.qcow2")}, osImage},
		{"unknown arch", map[string]string{"riscv64": disk}, osImage},
		{"os image by tag", map[string]string{"amd64": disk}, "registry.example.com/kairos-worker/ubuntu:v1"},
	} {
		if _, err := Wrap(c.disks, c.osImage); err == nil {
			t.Errorf("%s: wrapped", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
