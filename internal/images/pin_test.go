package images

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"gopkg.in/yaml.v3"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// copyVersions copies the real images/versions.yaml into a temporary folder: pin tests
// run against the file as it is, never on it.
func copyVersions(t *testing.T) (string, []byte) {
	t.Helper()
	orig := readFile(t, filepath.Join("..", "..", "images", "versions.yaml"))
	p := filepath.Join(t.TempDir(), "versions.yaml")
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, orig
}

// kairosLines finds, with a YAML parser rather than pin's own line matching, the lines
// (0-based) of kairos.disk and kairos.osImage of a minor.
func kairosLines(t *testing.T, data []byte, minor string) (disk, osImage int) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	get := func(n *yaml.Node, key string) *yaml.Node {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
		t.Fatalf("no %s at line %d", key, n.Line)
		return nil
	}
	for _, r := range get(doc.Content[0], "releases").Content {
		if get(r, "minor").Value == minor {
			k := get(r, "kairos")
			return get(k, "disk").Line - 1, get(k, "osImage").Line - 1
		}
	}
	t.Fatalf("no release %s", minor)
	return 0, 0
}

// wrapAndPush makes a containerDisk from osImage and pushes it, returning the pushed
// reference.
func wrapAndPush(t *testing.T, host, osImage string, arches ...string) string {
	t.Helper()
	dir := t.TempDir()
	disks := map[string]string{}
	for _, a := range arches {
		disks[a] = qcow2(t, dir, a+".qcow2", "16M")
	}
	w, err := Wrap(disks, osImage)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := w.Push(host+"/kairos-worker/ubuntu:24.04-standard-generic-v3.7.2-kubeadmv1.35.4-img", remoteOpts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestPin pins a pushed disk and OS image into a copy of versions.yaml: the two values
// of the right minor change, every other byte stays, the catalog still parses, and the
// tag files hold the pushed references.
func TestPin(t *testing.T) {
	host := testRegistry(t)
	osImage := pushOSImage(t, host, "amd64", "arm64")
	disk := wrapAndPush(t, host, osImage, "amd64", "arm64")
	versions, orig := copyVersions(t)

	res, err := Pin(PinInput{VersionsFile: versions, Minor: "v1.35", Disk: disk, OSImage: osImage}, remoteOpts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	diskRef, _ := name.NewDigest(disk)
	osRef, _ := name.NewDigest(osImage)
	wantDisk := host + "/kairos-worker/ubuntu@" + diskRef.DigestStr()
	wantOS := host + "/kairos-worker/ubuntu@" + osRef.DigestStr()
	if res.Disk != wantDisk || res.OSImage != wantOS {
		t.Fatalf("pinned disk %s os %s, want %s and %s", res.Disk, res.OSImage, wantDisk, wantOS)
	}

	// Byte for byte: the original with exactly the two lines a YAML parser places at
	// releases[v1.35].kairos.{disk,osImage} replaced.
	got := readFile(t, versions)
	diskLine, osLine := kairosLines(t, orig, "v1.35")
	lines := strings.SplitAfter(string(orig), "\n")
	if lines[diskLine] != `      disk: ""`+"\n" || lines[osLine] != `      osImage: ""`+"\n" {
		t.Fatalf("versions.yaml changed shape: lines %q and %q", lines[diskLine], lines[osLine])
	}
	lines[diskLine] = fmt.Sprintf("      disk: %q\n", wantDisk)
	lines[osLine] = fmt.Sprintf("      osImage: %q\n", wantOS)
	if want := strings.Join(lines, ""); string(got) != want {
		t.Fatalf("versions.yaml is not the original with two lines changed:\n%s", lineDiff(want, string(got)))
	}
	if n := changedLines(orig, got); n != 2 {
		t.Fatalf("%d lines changed, want 2", n)
	}

	c, err := catalog.Parse(got)
	if err != nil {
		t.Fatalf("the pinned catalog does not parse: %v", err)
	}
	r, _ := c.Lookup("v1.35")
	if r.Kairos.Disk != wantDisk || r.Kairos.OSImage != wantOS {
		t.Errorf("catalog v1.35 kairos %+v", r.Kairos)
	}

	if b := string(readFile(t, filepath.Join(filepath.Dir(versions), "kairos-worker-v1.35.tag"))); b != disk+"\n" {
		t.Errorf("kairos-worker-v1.35.tag = %q, want %q", b, disk+"\n")
	}
	if b := string(readFile(t, filepath.Join(filepath.Dir(versions), "kairos-worker-base-v1.35.tag"))); b != osImage+"\n" {
		t.Errorf("kairos-worker-base-v1.35.tag = %q, want %q", b, osImage+"\n")
	}
	t.Logf("v1.35 pinned:\n%s%s", lines[diskLine], lines[osLine])

	// Pinning again with the same references changes nothing.
	if _, err := Pin(PinInput{VersionsFile: versions, Minor: "v1.35", Disk: disk, OSImage: osImage}, remoteOpts(t)...); err != nil {
		t.Fatal(err)
	}
	if again := readFile(t, versions); !bytes.Equal(again, got) {
		t.Error("pinning the same references twice changed the file")
	}
}

// TestPinRefuses: nothing is written unless both images pull back by digest and the
// disk was made from that OS image.
func TestPinRefuses(t *testing.T) {
	host := testRegistry(t)
	osImage := pushOSImage(t, host, "amd64")
	otherOS := pushOSImage(t, host, "amd64", "arm64")
	disk := wrapAndPush(t, host, osImage, "amd64")
	// Made from the amd64-only OS image, yet with an arm64 disk: wrap works offline and
	// cannot know, pin must catch it.
	armDisk := wrapAndPush(t, host, osImage, "amd64", "arm64")
	osRef, _ := name.NewDigest(osImage)
	missing := osRef.Context().Name() + "@sha256:" + sha256hex("never pushed")

	for _, c := range []struct {
		name                 string
		minor, disk, osImage string
	}{
		{"disk of another OS image", "v1.35", disk, otherOS},
		{"OS image not pushed", "v1.35", disk, missing},
		{"disk not pushed", "v1.35", missing, osImage},
		{"an OS image given as the disk", "v1.35", osImage, osImage},
		{"disk by tag", "v1.35", strings.Split(disk, "@")[0], osImage},
		{"disk has an arch the OS image lacks", "v1.35", armDisk, osImage},
		{"minor not in the catalog", "v1.99", disk, osImage},
		{"a patch, not a minor", "v1.35.4", disk, osImage},
	} {
		t.Run(c.name, func(t *testing.T) {
			versions, orig := copyVersions(t)
			_, err := Pin(PinInput{VersionsFile: versions, Minor: c.minor, Disk: c.disk, OSImage: c.osImage}, remoteOpts(t)...)
			if err == nil {
				t.Fatal("pinned")
			}
			t.Log(err)
			if got := readFile(t, versions); !bytes.Equal(got, orig) {
				t.Error("versions.yaml changed")
			}
			if entries, _ := os.ReadDir(filepath.Dir(versions)); len(entries) != 1 {
				t.Errorf("files written next to versions.yaml: %v", entries)
			}
		})
	}
}

// TestSetKairosEveryMinor rewrites each minor of the real file in turn: always two lines,
// always under that minor.
func TestSetKairosEveryMinor(t *testing.T) {
	_, orig := copyVersions(t)
	c, err := catalog.Parse(orig)
	if err != nil {
		t.Fatal(err)
	}
	for _, minor := range c.Minors() {
		disk := "ghcr.io/nodegroup-io/kairos-worker/ubuntu@sha256:" + sha256hex("disk "+minor)
		osImage := "ghcr.io/nodegroup-io/kairos-worker/ubuntu@sha256:" + sha256hex("os "+minor)
		got, err := SetKairos(orig, minor, disk, osImage)
		if err != nil {
			t.Fatalf("%s: %v", minor, err)
		}
		if n := changedLines(orig, got); n != 2 {
			t.Errorf("%s: %d lines changed, want 2", minor, n)
		}
		if err := checkOnlyKairosChanged(orig, got, minor, disk, osImage); err != nil {
			t.Errorf("%s: %v", minor, err)
		}
		d, o := kairosLines(t, orig, minor)
		gl := strings.SplitAfter(string(got), "\n")
		if !strings.Contains(gl[d], disk) || !strings.Contains(gl[o], osImage) {
			t.Errorf("%s: the values are not on the lines the YAML parser puts them on", minor)
		}
	}
	// CRLF files keep their line endings.
	crlf := bytes.ReplaceAll(orig, []byte("\n"), []byte("\r\n"))
	disk := "ghcr.io/x/y@sha256:" + sha256hex("d")
	got, err := SetKairos(crlf, "v1.36", disk, disk)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(got, []byte("\r\n")) != bytes.Count(crlf, []byte("\r\n")) || changedLines(crlf, got) != 2 {
		t.Error("CRLF file: line endings or other lines changed")
	}
}

func changedLines(a, b []byte) int {
	al, bl := strings.SplitAfter(string(a), "\n"), strings.SplitAfter(string(b), "\n")
	if len(al) != len(bl) {
		return -1
	}
	n := 0
	for i := range al {
		if al[i] != bl[i] {
			n++
		}
	}
	return n
}

func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, w, g)
		}
	}
	return b.String()
}
