package catalog_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodegroup-io/nodegroup-operator/images"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// TestEmbeddedCatalog holds the shipped file to its shape before Default can panic on it.
func TestEmbeddedCatalog(t *testing.T) {
	c, err := catalog.Parse(images.VersionsYAML)
	if err != nil {
		t.Fatalf("images/versions.yaml does not parse: %v", err)
	}
	if c.SchemaVersion != catalog.SchemaVersion {
		t.Errorf("schemaVersion = %d, want %d", c.SchemaVersion, catalog.SchemaVersion)
	}
	if c.TalosFactory.InstallerRepository != "factory.talos.dev/installer" {
		t.Errorf("talosFactory.installerRepository = %q", c.TalosFactory.InstallerRepository)
	}
	if c.TalosFactory.DiskImageBase != "factory.talos.dev/image" {
		t.Errorf("talosFactory.diskImageBase = %q", c.TalosFactory.DiskImageBase)
	}

	minors := c.Minors()
	for _, want := range []string{"v1.34", "v1.35", "v1.36", "v1.37"} {
		if !slices.Contains(minors, want) {
			t.Errorf("minor %s missing from the catalog (have %v)", want, minors)
		}
	}

	patch := regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	pinned := regexp.MustCompile(`^[^@\s]+/[^@\s]+@sha256:[0-9a-f]{64}$`)
	for _, r := range c.Releases {
		if !patch.MatchString(r.Kubernetes) || !strings.HasPrefix(r.Kubernetes, r.Minor+".") {
			t.Errorf("%s: kubernetes %q is not a patch release of the minor", r.Minor, r.Kubernetes)
		}
		if !patch.MatchString(r.Talos.Version) {
			t.Errorf("%s: talos.version %q is not vX.Y.Z", r.Minor, r.Talos.Version)
		}
		if !hex64.MatchString(r.Talos.Schematic) {
			t.Errorf("%s: talos.schematic %q is not 64 lowercase hex", r.Minor, r.Talos.Schematic)
		}
		for name, ref := range map[string]string{"disk": r.Kairos.Disk, "osImage": r.Kairos.OSImage} {
			if ref != "" && !pinned.MatchString(ref) {
				t.Errorf("%s: kairos.%s %q is not pinned by digest", r.Minor, name, ref)
			}
		}
	}

	if got := c.Newest().Minor; got != minors[len(minors)-1] {
		t.Errorf("Newest().Minor = %s, want the last minor %s", got, minors[len(minors)-1])
	}

	d := catalog.Default()
	if !slices.Equal(d.Releases, c.Releases) || d.TalosFactory != c.TalosFactory {
		t.Errorf("Default() differs from parsing the embedded file:\n%+v\n%+v", d, c)
	}
}

// TestEmbeddedCatalogIsLineEditable keeps the file rewritable by tools that replace one
// value on one line: no anchors or aliases, no flow collections, no block scalars, and
// every string quoted (a bare all-digit schematic would become a number).
func TestEmbeddedCatalogIsLineEditable(t *testing.T) {
	keyValue := regexp.MustCompile(`^\s*(- )?([A-Za-z][A-Za-z0-9]*):(.*)$`)
	quoted := regexp.MustCompile(`^"[^"\\]*"$`)
	sc := bufio.NewScanner(bytes.NewReader(images.VersionsYAML))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		m := keyValue.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("line %d is not a single `key: value`: %q", n, line)
			continue
		}
		value := strings.TrimSpace(m[3])
		switch {
		case value == "":
			// A mapping or list header.
		case m[2] == "schemaVersion":
			if value != "1" {
				t.Errorf("line %d: schemaVersion %q is not a bare integer", n, value)
			}
		case !quoted.MatchString(value):
			t.Errorf("line %d: value %s is not one plain double-quoted string (no anchors, aliases, flow or block style)", n, value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultReturnsACopy(t *testing.T) {
	a := catalog.Default()
	want := a.Releases[0].Kubernetes
	a.Releases[0].Kubernetes = "v0.0.0"
	a.Releases = a.Releases[:0]
	if b := catalog.Default(); len(b.Releases) == 0 || b.Releases[0].Kubernetes != want {
		t.Fatalf("editing one Default() result changed the next: %+v", b.Releases)
	}
}

const (
	schematic = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
	digest    = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// validCatalog is a small good catalog; each refusal case changes one thing in it.
const validCatalog = `schemaVersion: 1
talosFactory:
  installerRepository: "factory.talos.dev/installer"
  diskImageBase: "factory.talos.dev/image"
releases:
  - minor: "v1.34"
    kubernetes: "v1.34.4"
    clusterAutoscaler: "v1.34.5"
    talos:
      version: "v1.11.6"
      schematic: "` + schematic + `"
    kairos:
      disk: ""
      osImage: ""
  - minor: "v1.35"
    kubernetes: "v1.35.4"
    clusterAutoscaler: "v1.35.2"
    talos:
      version: "v1.12.12"
      schematic: "` + schematic + `"
    kairos:
      disk: "ghcr.io/nodegroup-io/kairos-worker-disk@` + digest + `"
      osImage: "ghcr.io/nodegroup-io/kairos-worker@` + digest + `"
`

// secondRelease is the text of the v1.35 entry in validCatalog.
var secondRelease = validCatalog[strings.Index(validCatalog, `  - minor: "v1.35"`):]

// firstRelease is the text of the v1.34 entry in validCatalog.
var firstRelease = validCatalog[strings.Index(validCatalog, `  - minor: "v1.34"`):strings.Index(validCatalog, `  - minor: "v1.35"`)]

func TestParseValid(t *testing.T) {
	c, err := catalog.Parse([]byte(validCatalog))
	if err != nil {
		t.Fatalf("Parse(validCatalog): %v", err)
	}
	want := catalog.Release{
		Minor:             "v1.35",
		Kubernetes:        "v1.35.4",
		ClusterAutoscaler: "v1.35.2",
		Talos:             catalog.Talos{Version: "v1.12.12", Schematic: schematic},
		Kairos: catalog.Kairos{
			Disk:    "ghcr.io/nodegroup-io/kairos-worker-disk@" + digest,
			OSImage: "ghcr.io/nodegroup-io/kairos-worker@" + digest,
		},
	}
	if got := c.Newest(); got != want {
		t.Errorf("Newest() = %+v, want %+v", got, want)
	}
	if got := c.Minors(); !slices.Equal(got, []string{"v1.34", "v1.35"}) {
		t.Errorf("Minors() = %v", got)
	}
}

// TestParseSortsMinorsNumerically guards against a string comparison, which puts v1.10
// before v1.9.
func TestParseSortsMinorsNumerically(t *testing.T) {
	nine := strings.NewReplacer(`"v1.34"`, `"v1.9"`, `"v1.34.4"`, `"v1.9.11"`).Replace(firstRelease)
	ten := strings.NewReplacer(`"v1.35"`, `"v1.10"`, `"v1.35.4"`, `"v1.10.13"`).Replace(secondRelease)
	head := validCatalog[:strings.Index(validCatalog, firstRelease)]

	if _, err := catalog.Parse([]byte(head + nine + ten)); err != nil {
		t.Errorf("v1.9 then v1.10 refused: %v", err)
	}
	_, err := catalog.Parse([]byte(head + ten + nine))
	if err == nil || !strings.Contains(err.Error(), "releases[1].minor v1.9 comes after v1.10") {
		t.Errorf("v1.10 then v1.9: err = %v, want it refused as unsorted", err)
	}
}

func TestParseRefuses(t *testing.T) {
	// edit replaces old with new in validCatalog and fails the test if old is absent, so a
	// case can never silently test the valid catalog.
	edit := func(old, new string) func(*testing.T) string {
		return func(t *testing.T) string {
			t.Helper()
			if !strings.Contains(validCatalog, old) {
				t.Fatalf("test bug: %q not in validCatalog", old)
			}
			return strings.Replace(validCatalog, old, new, 1)
		}
	}
	raw := func(s string) func(*testing.T) string { return func(*testing.T) string { return s } }

	tests := []struct {
		name    string
		doc     func(*testing.T) string
		wantErr string
	}{
		// Shape.
		{"unknown top-level field", edit("schemaVersion: 1\n", "schemaVersion: 1\nchannel: stable\n"),
			`unknown field "channel"`},
		{"unknown nested field", edit(`      version: "v1.12.12"`, "      version: \"v1.12.12\"\n      extensions: []"),
			`unknown field "releases[1].talos.extensions"`},
		{"field in the wrong case", edit(`  - minor: "v1.35"`, `  - Minor: "v1.35"`),
			`unknown field "releases[1].Minor"`},
		{"duplicate key", edit(`    kubernetes: "v1.35.4"`, "    kubernetes: \"v1.35.4\"\n    kubernetes: \"v1.35.5\""),
			`"kubernetes" already set in map`},
		{"wrong type", edit("schemaVersion: 1", `schemaVersion: "1"`),
			"cannot unmarshal string into Go struct field Catalog.schemaVersion of type int"},
		{"empty document", raw(""),
			"schemaVersion 0 is not supported: this build reads schemaVersion 1"},
		{"newer schema", edit("schemaVersion: 1", "schemaVersion: 2"),
			"schemaVersion 2 is not supported"},
		{"no releases", raw(validCatalog[:strings.Index(validCatalog, "releases:")] + "releases: []\n"),
			"releases is empty"},
		{"installer repository with a scheme", edit(`"factory.talos.dev/installer"`, `"https://factory.talos.dev/installer"`),
			`talosFactory.installerRepository "https://factory.talos.dev/installer" must be a repository without scheme, tag or digest`},
		{"installer repository with a tag", edit(`"factory.talos.dev/installer"`, `"factory.talos.dev/installer:latest"`),
			`talosFactory.installerRepository "factory.talos.dev/installer:latest" must be`},
		{"empty disk image base", edit(`"factory.talos.dev/image"`, `""`),
			`talosFactory.diskImageBase "" must be`},

		// Minors.
		{"duplicate minor", raw(validCatalog[:strings.Index(validCatalog, secondRelease)] + firstRelease),
			"releases[1].minor v1.34 is a duplicate of releases[0]"},
		{"unsorted minors", raw(validCatalog[:strings.Index(validCatalog, firstRelease)] + secondRelease + firstRelease),
			"releases[1].minor v1.34 comes after v1.35: releases must be sorted by minor, oldest first"},
		{"minor is a patch", edit(`  - minor: "v1.35"`, `  - minor: "v1.35.4"`),
			`releases[1].minor "v1.35.4" must be a minor (vMAJOR.MINOR), not a patch release`},
		{"minor without v", edit(`  - minor: "v1.35"`, `  - minor: "1.35"`),
			`releases[1].minor: "1.35" is not a Kubernetes version`},
		{"empty minor", edit(`  - minor: "v1.35"`, `  - minor: ""`),
			`releases[1].minor: "" is not a Kubernetes version`},

		// Kubernetes patch release.
		{"patch of another minor", edit(`kubernetes: "v1.35.4"`, `kubernetes: "v1.34.9"`),
			"releases[1].kubernetes v1.34.9 is not a release of minor v1.35"},
		{"kubernetes without patch", edit(`kubernetes: "v1.35.4"`, `kubernetes: "v1.35"`),
			`releases[1].kubernetes "v1.35" must be a patch release (vMAJOR.MINOR.PATCH)`},
		{"kubernetes pre-release", edit(`kubernetes: "v1.35.4"`, `kubernetes: "v1.35.0-rc.1"`),
			`releases[1].kubernetes: "v1.35.0-rc.1" is not a Kubernetes version`},
		{"missing kubernetes", edit("    kubernetes: \"v1.35.4\"\n", ""),
			`releases[1].kubernetes: "" is not a Kubernetes version`},

		// Talos.
		{"talos version without patch", edit(`version: "v1.12.12"`, `version: "v1.12"`),
			`releases[1].talos.version "v1.12" must be a Talos release such as v1.13.10`},
		{"talos version without v", edit(`version: "v1.12.12"`, `version: "1.12.12"`),
			`releases[1].talos.version "1.12.12" must be a Talos release`},
		{"schematic in upper case", edit(`schematic: "`+schematic+`"`+"\n    kairos:\n      disk: \"ghcr", `schematic: "`+strings.ToUpper(schematic)+`"`+"\n    kairos:\n      disk: \"ghcr"),
			`releases[1].talos.schematic "` + strings.ToUpper(schematic) + `" must be an Image Factory schematic ID: 64 lowercase hex characters`},
		{"schematic too short", edit(`schematic: "`+schematic+`"`, `schematic: "`+schematic[1:]+`"`),
			`releases[0].talos.schematic "` + schematic[1:] + `" must be an Image Factory schematic ID`},
		{"schematic not hex", edit(`schematic: "`+schematic+`"`, `schematic: "vanilla"`),
			`releases[0].talos.schematic "vanilla" must be an Image Factory schematic ID`},

		// Build inputs.
		{"kubeadm sum not hex", edit(`    kubernetes: "v1.35.4"`, "    kubernetes: \"v1.35.4\"\n    kubeadmSHA512:\n      amd64: \"nothex\""),
			`releases[1].kubeadmSHA512.amd64 "nothex" must be a SHA-512: 128 lowercase hex characters`},
		{"kubeadm sum for an unknown architecture", edit(`    kubernetes: "v1.35.4"`, "    kubernetes: \"v1.35.4\"\n    kubeadmSHA512:\n      riscv64: \"\""),
			`unknown field "releases[1].kubeadmSHA512.riscv64"`},
		{"autoscaler without a patch", edit(`clusterAutoscaler: "v1.35.2"`, `clusterAutoscaler: "v1.35"`),
			`releases[1].clusterAutoscaler "v1.35" must be a cluster-autoscaler release tag`},
		{"autoscaler missing", edit(`    clusterAutoscaler: "v1.35.2"`+"\n", ``),
			`releases[1].clusterAutoscaler "" must be a cluster-autoscaler release tag`},
		{"base by tag", edit("    kairos:\n      disk: \"ghcr", "    kairos:\n      base: \"quay.io/kairos/ubuntu:24.04\"\n      disk: \"ghcr"),
			`releases[1].kairos.base "quay.io/kairos/ubuntu:24.04" must be pinned by digest`},

		// Kairos references.
		{"disk by tag", edit(`"ghcr.io/nodegroup-io/kairos-worker-disk@`+digest+`"`, `"ghcr.io/nodegroup-io/kairos-worker-disk:v1.35.4"`),
			`releases[1].kairos.disk "ghcr.io/nodegroup-io/kairos-worker-disk:v1.35.4" must be pinned by digest, as registry/repository@sha256:<64 lowercase hex>`},
		{"disk by tag and digest", edit(`"ghcr.io/nodegroup-io/kairos-worker-disk@`, `"ghcr.io/nodegroup-io/kairos-worker-disk:v1.35.4@`),
			`releases[1].kairos.disk "ghcr.io/nodegroup-io/kairos-worker-disk:v1.35.4@` + digest + `" must be pinned by digest`},
		{"disk with a short digest", edit(`kairos-worker-disk@`+digest, `kairos-worker-disk@`+digest[:len(digest)-1]),
			`releases[1].kairos.disk "ghcr.io/nodegroup-io/kairos-worker-disk@` + digest[:len(digest)-1] + `" must be pinned by digest`},
		{"disk without registry", edit(`"ghcr.io/nodegroup-io/kairos-worker-disk@`, `"kairos-worker-disk@`),
			`releases[1].kairos.disk "kairos-worker-disk@` + digest + `" must be pinned by digest`},
		{"os image by tag", edit(`"ghcr.io/nodegroup-io/kairos-worker@`+digest+`"`, `"quay.io/kairos/ubuntu:24.04"`),
			`releases[1].kairos.osImage "quay.io/kairos/ubuntu:24.04" must be pinned by digest`},
		{"disk without its os image", edit(`osImage: "ghcr.io/nodegroup-io/kairos-worker@`+digest+`"`, `osImage: ""`),
			"releases[1].kairos.osImage is empty but kairos.disk is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.doc(t)
			c, err := catalog.Parse([]byte(doc))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\ngot %+v", doc, c)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestParseReportsEveryProblem lets one edit fix a file instead of one error per run.
func TestParseReportsEveryProblem(t *testing.T) {
	doc := strings.NewReplacer(`kubernetes: "v1.35.4"`, `kubernetes: "v1.34.4"`, `version: "v1.12.12"`, `version: "v1.12"`).Replace(validCatalog)
	_, err := catalog.Parse([]byte(doc))
	if err == nil {
		t.Fatal("Parse accepted two errors")
	}
	for _, want := range []string{"releases[1].kubernetes v1.34.4 is not a release of minor v1.35", `releases[1].talos.version "v1.12"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v\nwant it to contain %q", err, want)
		}
	}
}

func TestLookup(t *testing.T) {
	c, err := catalog.Parse([]byte(validCatalog))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in        string
		wantMinor string // "" means not found
	}{
		{"v1.35", "v1.35"},
		{"v1.35.4", "v1.35"},
		{"v1.35.9", "v1.35"}, // a patch the catalog does not pin still selects its minor
		{"v1.34", "v1.34"},
		{"v1.34.0", "v1.34"},
		{"v1.36", ""},
		{"v1.36.1", ""},
		{"v1.3", ""},
		{"1.35", ""},
		{"v1.35.4-rc.0", ""},
		{"v1.035", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, ok := c.Lookup(tt.in)
		switch {
		case tt.wantMinor == "" && ok:
			t.Errorf("Lookup(%q) = %+v, want not found", tt.in, got)
		case tt.wantMinor != "" && !ok:
			t.Errorf("Lookup(%q) not found, want %s", tt.in, tt.wantMinor)
		case tt.wantMinor != "" && got.Minor != tt.wantMinor:
			t.Errorf("Lookup(%q).Minor = %s, want %s", tt.in, got.Minor, tt.wantMinor)
		}
	}

	// The shipped catalog answers both spellings with the same release.
	d := catalog.Default()
	byMinor, ok1 := d.Lookup("v1.35")
	byPatch, ok2 := d.Lookup("v1.35.4")
	if !ok1 || !ok2 || byMinor != byPatch || byMinor.Kubernetes != "v1.35.4" {
		t.Errorf("Default().Lookup: v1.35 -> %+v (%v), v1.35.4 -> %+v (%v)", byMinor, ok1, byPatch, ok2)
	}
}

func TestMinorOf(t *testing.T) {
	good := map[string]string{
		"v1.35":    "v1.35",
		"v1.35.4":  "v1.35",
		"v1.35.0":  "v1.35",
		"v1.10.1":  "v1.10",
		"v2.0":     "v2.0",
		"v0.1.100": "v0.1",
	}
	for in, want := range good {
		got, err := catalog.MinorOf(in)
		if err != nil || got != want {
			t.Errorf("MinorOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}

	bad := []string{
		"", "v", "1.35", "1.35.4", "V1.35", "v1", "v1.", "v1.35.", "v1..35", "v1.35.4.1",
		"v1.35.4-rc.0", "v1.35.4+k3s1", "v1.035", "v01.35", "v1.35.04", " v1.35", "v1.35 ",
		"v1.x", "v1.99999999999999999999", // past uint64
	}
	for _, in := range bad {
		got, err := catalog.MinorOf(in)
		if err == nil {
			t.Errorf("MinorOf(%q) = %q, want an error", in, got)
			continue
		}
		if want := "want vMAJOR.MINOR or vMAJOR.MINOR.PATCH"; !strings.Contains(err.Error(), want) {
			t.Errorf("MinorOf(%q) error = %v, want it to contain %q", in, err, want)
		}
	}
}

// FuzzParse: Parse never panics, and a catalog it accepts keeps its promises: at least
// one release, each found by its minor and by its own patch release, Newest the last,
// and the catalog written back (as the tools that rewrite the file do) reads the same.
func FuzzParse(f *testing.F) {
	f.Add(images.VersionsYAML)
	f.Add([]byte(validCatalog))
	f.Add([]byte(strings.Replace(validCatalog, `"v1.34"`, `"v1.9"`, 1)))
	f.Add([]byte("schemaVersion: 1\nreleases: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := catalog.Parse(data)
		if err != nil {
			return
		}
		if len(c.Releases) == 0 {
			t.Fatal("accepted a catalog without releases")
		}
		for _, r := range c.Releases {
			for _, v := range []string{r.Minor, r.Kubernetes} {
				if got, ok := c.Lookup(v); !ok || got != r {
					t.Fatalf("Lookup(%q) = %+v, %v, want %+v", v, got, ok, r)
				}
			}
		}
		if c.Newest() != c.Releases[len(c.Releases)-1] {
			t.Fatalf("Newest() = %+v, not the last release", c.Newest())
		}
		written, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := catalog.Parse(written)
		if err != nil {
			t.Fatalf("the catalog written back is refused: %v\n%s", err, written)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("the catalog written back reads as\n%+v\nnot\n%+v", again, c)
		}
	})
}
