package operatorimage

import (
	"archive/tar"
	"errors"
	"io"
	"testing"

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
