package main

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/images"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestPlanCommand(t *testing.T) {
	code, out, errOut := runCmd(t, "plan", "--arch", "amd64,arm64")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	t.Logf("nodegroup-images plan --arch amd64,arm64\n%s", out)

	code, out, errOut = runCmd(t, "plan", "--json", "--arch", "arm64", "--kairos-version", "v3.6.0")
	if code != 0 {
		t.Fatalf("plan --json: exit %d: %s", code, errOut)
	}
	var p images.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan --json is not JSON: %v\n%s", err, out)
	}
	if n := len(catalog.Default().Releases); len(p.Builds) != n || len(p.Pins) != n {
		t.Fatalf("plan --json: %d builds, %d pins for %d minors", len(p.Builds), len(p.Pins), n)
	}
	if b := p.Builds[0]; b.Arch != "arm64" || b.Kubeadm.SHA512 != images.Unknown ||
		!strings.HasSuffix(b.BaseImage, ":24.04-core-arm64-generic-v3.6.0") {
		t.Errorf("plan --json: first build %+v", b)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"build"},
		{"plan", "--arch", "s390x"},
		{"plan", "extra"},
		{"verify", "--url", "http://127.0.0.1/kubeadm"},
		{"wrap", "--disk", "d.qcow2", "--os-image", "r@sha256:00"},
		{"wrap", "--disk", "d.qcow2", "--out", "o", "--tag", "t"},
		{"wrap", "--out", "o", "--os-image", "x"},
		{"push", "--layout", "l"},
		{"pin", "--minor", "v1.35"},
	} {
		if code, _, errOut := runCmd(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
	if code, _, _ := runCmd(t, "plan", "-h"); code != 0 {
		t.Errorf("plan -h: exit %d", code)
	}
}

func TestVerifyCommand(t *testing.T) {
	body := []byte("#!/bin/true\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	sum := sha512.Sum512(body)
	good := hex.EncodeToString(sum[:])
	out := filepath.Join(t.TempDir(), "kubeadm")

	if code, _, errOut := runCmd(t, "verify", "--url", srv.URL, "--sha512", strings.Repeat("0", 128), "--out", out); code != 1 ||
		!strings.Contains(errOut, good) || !strings.Contains(errOut, strings.Repeat("0", 128)) {
		t.Errorf("wrong sum: exit %d, want 1 with both sums: %s", code, errOut)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("wrong sum: %s written", out)
	}
	if code, _, errOut := runCmd(t, "verify", "--url", srv.URL, "--sha512", good, "--out", out); code != 0 {
		t.Fatalf("good sum: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, body) {
		t.Error("good sum: file not written")
	}
}

// TestWrapPushPinCommands runs the tool's own part of the images build, end to end,
// against an in-process registry and a copy of versions.yaml.
func TestWrapPushPinCommands(t *testing.T) {
	qemu, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Fatalf("qemu-img is not installed and this test needs a real qcow2 disk: "+
			"install it with `apt-get update && apt-get install -y qemu-utils` (%v)", err)
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.Command(qemu, "create", "-f", "qcow2", disk, "16M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	// The OS image, as the container engine would have pushed it.
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	img, _ = mutate.ConfigFile(img, cf)
	tag, _ := name.NewTag(host + "/kairos-worker/ubuntu:24.04-standard-amd64-generic-v3.7.2-kubeadmv1.35.4")
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	osImage := tag.String() + "@" + d.String()

	layout := filepath.Join(dir, "layout")
	code, out, errOut := runCmd(t, "wrap", "--disk", disk, "--os-image", osImage, "--out", layout)
	if code != 0 {
		t.Fatalf("wrap: exit %d: %s", code, errOut)
	}
	wrapped := strings.TrimSpace(out)

	code, out, errOut = runCmd(t, "push", "--layout", layout, "--tag", host+"/kairos-worker/ubuntu:24.04-standard-amd64-generic-v3.7.2-kubeadmv1.35.4-img")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	pushed := strings.TrimSpace(out)
	if !strings.HasSuffix(pushed, "@"+wrapped) {
		t.Fatalf("push printed %q, want the digest wrap printed, %s", pushed, wrapped)
	}

	orig, err := os.ReadFile(filepath.Join("..", "..", "images", "versions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	versions := filepath.Join(dir, "images", "versions.yaml")
	os.MkdirAll(filepath.Dir(versions), 0o755)
	if err := os.WriteFile(versions, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd(t, "pin", "--versions", versions, "--minor", "v1.35", "--disk", pushed, "--os-image", osImage)
	if code != 0 {
		t.Fatalf("pin: exit %d: %s", code, errOut)
	}
	t.Logf("pin:\n%s", out)
	c, err := catalog.Parse(mustRead(t, versions))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Lookup("v1.35")
	if r.Kairos.Disk != host+"/kairos-worker/ubuntu@"+wrapped || r.Kairos.OSImage != host+"/kairos-worker/ubuntu@"+d.String() {
		t.Errorf("pinned %+v", r.Kairos)
	}
	if got := string(mustRead(t, filepath.Join(dir, "images", "kairos-worker-v1.35.tag"))); got != pushed+"\n" {
		t.Errorf("disk tag file %q", got)
	}
	if got := string(mustRead(t, filepath.Join(dir, "images", "kairos-worker-base-v1.35.tag"))); got != osImage+"\n" {
		t.Errorf("OS image tag file %q", got)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
