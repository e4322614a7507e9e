package images

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// qcow2 makes a real qcow2 file with qemu-img. A missing qemu-img fails the test rather
// than skipping it: a skipped wrap test would pass CI without ever wrapping a disk.
func qcow2(t *testing.T, dir, file, size string) string {
	t.Helper()
	bin, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Fatalf("qemu-img is not installed, and the containerDisk tests need a real qcow2 disk: "+
			"install it with `apt-get update && apt-get install -y qemu-utils` (%v)", err)
	}
	p := filepath.Join(dir, file)
	if out, err := exec.Command(bin, "create", "-f", "qcow2", p, size).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create -f qcow2 %s %s: %v\n%s", p, size, err, out)
	}
	return p
}

// testRegistry serves an in-memory registry on a loopback port (plain HTTP, which
// go-containerregistry uses for loopback hosts) and returns its host:port.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func remoteOpts(t *testing.T) []remote.Option {
	return []remote.Option{remote.WithContext(context.Background())}
}

// pushOSImage pushes a stand-in for a Kairos OS image: one small random image per
// architecture, in an index when there are several. It returns repository:tag@digest.
func pushOSImage(t *testing.T, host string, arches ...string) string {
	t.Helper()
	var imgs []v1.Image
	for _, a := range arches {
		img, err := random.Image(512, 1)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", a
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	tag, err := name.NewTag(host + "/kairos-worker/ubuntu:24.04-standard-" + strings.Join(arches, "-") + "-generic-v3.7.2-kubeadmv1.35.4")
	if err != nil {
		t.Fatal(err)
	}
	var dig v1.Hash
	if len(imgs) == 1 {
		if err := remote.Write(tag, imgs[0], remoteOpts(t)...); err != nil {
			t.Fatal(err)
		}
		dig, err = imgs[0].Digest()
	} else {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for i, img := range imgs {
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
				Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arches[i]}}})
		}
		if err := remote.WriteIndex(tag, idx, remoteOpts(t)...); err != nil {
			t.Fatal(err)
		}
		dig, err = idx.Digest()
	}
	if err != nil {
		t.Fatal(err)
	}
	return tag.String() + "@" + dig.String()
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
