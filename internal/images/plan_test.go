package images

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// TestPlanAllMinors plans the embedded catalog for both architectures and prints the
// table in the test log.
func TestPlanAllMinors(t *testing.T) {
	c := catalog.Default()
	p, err := NewPlan(c, []string{"amd64", "arm64"}, DefaultNaming)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := p.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("plan for every minor of images/versions.yaml:\n%s", table.String())

	if len(p.Builds) != 2*len(c.Releases) || len(p.Pins) != len(c.Releases) {
		t.Fatalf("%d builds and %d pins for %d minors and 2 arches", len(p.Builds), len(p.Pins), len(c.Releases))
	}
	i := 0
	for _, r := range c.Releases {
		for _, arch := range []string{"amd64", "arm64"} {
			b := p.Builds[i]
			i++
			if b.Minor != r.Minor || b.Kubernetes != r.Kubernetes || b.Arch != arch {
				t.Errorf("build %d is %s/%s/%s, want %s/%s/%s", i, b.Minor, b.Kubernetes, b.Arch, r.Minor, r.Kubernetes, arch)
			}
			if want := "https://dl.k8s.io/release/" + r.Kubernetes + "/bin/linux/" + arch + "/kubeadm"; b.Kubeadm.URL != want {
				t.Errorf("%s/%s: kubeadm %s, want %s", r.Minor, arch, b.Kubeadm.URL, want)
			}
			if b.Kubeadm.SHA512 != Unknown || b.Steps[0].Blocked == "" {
				t.Errorf("%s/%s: kubeadm sum %q, blocked %q: the catalog has no sums, the step must be blocked", r.Minor, arch, b.Kubeadm.SHA512, b.Steps[0].Blocked)
			}
			engine := map[string]bool{}
			for _, s := range b.Steps {
				engine[s.Name] = s.NeedsContainerEngine
			}
			if engine["kubeadm"] || !engine["os-image"] || !engine["disk"] {
				t.Errorf("%s/%s: container engine marks %v: only os-image and disk need one", r.Minor, arch, engine)
			}
		}
	}
	for _, pin := range p.Pins {
		for _, s := range pin.Steps {
			if s.NeedsContainerEngine != (s.Name == "os-index") {
				t.Errorf("%s: step %s needs a container engine: %v", pin.Minor, s.Name, s.NeedsContainerEngine)
			}
		}
	}
	if !strings.Contains(table.String(), "needs a container engine") {
		t.Error("the table does not mark the container engine steps")
	}

	var round Plan
	var js bytes.Buffer
	if err := p.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js.Bytes(), &round); err != nil || len(round.Builds) != len(p.Builds) {
		t.Errorf("JSON does not read back: %v", err)
	}
}

// TestNaming pins the names to kairos-sdk's convention, spelled out by hand here so a
// change in the SDK or in our use of it shows.
func TestNaming(t *testing.T) {
	n := DefaultNaming
	for _, c := range []struct {
		name string
		got  func() (string, error)
		want string
	}{
		{"base", func() (string, error) { return n.BaseImage("arm64") },
			"quay.io/kairos/ubuntu:24.04-core-arm64-generic-v3.7.2"},
		{"os image", func() (string, error) { return n.OSImage("v1.35.4", "amd64") },
			"ghcr.io/nodegroup-io/kairos-worker/ubuntu:24.04-standard-amd64-generic-v3.7.2-kubeadmv1.35.4"},
		{"disk image", func() (string, error) { return n.DiskImage("v1.35.4", "amd64") },
			"ghcr.io/nodegroup-io/kairos-worker/ubuntu:24.04-standard-amd64-generic-v3.7.2-kubeadmv1.35.4-img"},
		{"disk file", func() (string, error) { return n.DiskFile("v1.35.4", "arm64") },
			"kairos-ubuntu-24.04-standard-arm64-generic-v3.7.2-kubeadmv1.35.4.qcow2"},
		{"os index", func() (string, error) { return n.OSIndex("v1.35.4", []string{"amd64", "arm64"}) },
			"ghcr.io/nodegroup-io/kairos-worker/ubuntu:24.04-standard-generic-v3.7.2-kubeadmv1.35.4"},
		{"disk index", func() (string, error) { return n.DiskIndex("v1.35.4", []string{"amd64", "arm64"}) },
			"ghcr.io/nodegroup-io/kairos-worker/ubuntu:24.04-standard-generic-v3.7.2-kubeadmv1.35.4-img"},
	} {
		got, err := c.got()
		if err != nil || got != c.want {
			t.Errorf("%s: %q (%v), want %q", c.name, got, err, c.want)
		}
	}

	// A single architecture pins its own images, not an index.
	p, err := NewPlan(catalog.Default(), []string{"amd64"}, n)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pins[0].Disk != p.Builds[0].DiskImage || p.Pins[0].OSImage != p.Builds[0].OSImage {
		t.Errorf("one arch: pins %+v, want the build's own images", p.Pins[0])
	}
	for _, bad := range [][]string{{}, {"s390x"}, {"amd64", "amd64"}} {
		if _, err := NewPlan(catalog.Default(), bad, n); err == nil {
			t.Errorf("arches %q accepted", bad)
		}
	}
}
