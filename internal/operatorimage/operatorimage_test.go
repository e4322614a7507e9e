package operatorimage

import (
	"archive/tar"
	"errors"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestImageIsNonRootReproducibleAndHoldsOnlyTheBinary(t *testing.T) {
	bin := []byte("\x7fELF pretend operator binary")
	a, err := Build(bin, "amd64", "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(append([]byte(nil), bin...), "amd64", "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("two builds of the same binary differ: %s %s", da, db)
	}
	if other, _ := Build([]byte("another binary"), "amd64", "v0.1.0"); other != nil {
		if d, _ := other.Digest(); d == da {
			t.Fatal("a different binary gave the same digest")
		}
	}

	cf, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != BinaryPath || cf.Architecture != "amd64" {
		t.Errorf("config: user %q entrypoint %v arch %s", cf.Config.User, cf.Config.Entrypoint, cf.Architecture)
	}
	if mt, _ := a.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("media type %s", mt)
	}
	layers, err := a.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d (%v)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		if h.Uid != UID || h.Gid != GID || h.Mode != 0o555 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: uid %d gid %d mode %o mtime %s", h.Name, h.Uid, h.Gid, h.Mode, h.ModTime)
		}
		body, _ := io.ReadAll(tr)
		if string(body) != string(bin) {
			t.Errorf("%s does not hold the binary", h.Name)
		}
	}
	if len(files) != 1 || files[0] != "nodegroup-operator" {
		t.Errorf("image files = %v, want only the binary", files)
	}
}

// TestIndex: the index lists each architecture's image with its platform, the same
// images give the same index, and an image of another architecture than it is listed
// under is refused.
func TestIndex(t *testing.T) {
	build := func(arch string) v1.Image {
		img, err := Build([]byte("binary for "+arch), arch, "v0.1.0")
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	platforms := []Platform{{"amd64", build("amd64")}, {"arm64", build("arm64")}}
	a, err := Index(platforms)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Index([]Platform{{"amd64", build("amd64")}, {"arm64", build("arm64")}})
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two indexes of the same images differ: %s %s", da, db)
	}
	m, err := a.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || len(m.Manifests) != 2 {
		t.Fatalf("index %s with %d manifests", m.MediaType, len(m.Manifests))
	}
	for i, d := range m.Manifests {
		want, _ := platforms[i].Image.Digest()
		if d.Digest != want || d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != platforms[i].Arch {
			t.Errorf("manifest %d: %s %+v, want %s linux/%s", i, d.Digest, d.Platform, want, platforms[i].Arch)
		}
	}
	if _, err := Index([]Platform{{"arm64", build("amd64")}}); err == nil {
		t.Error("an amd64 image listed as arm64 was accepted")
	}
}
