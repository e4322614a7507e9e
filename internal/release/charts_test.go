package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

func TestChartVersion(t *testing.T) {
	for tag, want := range map[string]string{"v0.2.0": "0.2.0", "v1.0.0-rc.1": "1.0.0-rc.1"} {
		if got, err := ChartVersion(tag); err != nil || got != want {
			t.Errorf("ChartVersion(%q) = %q, %v; want %q", tag, got, err, want)
		}
	}
	for _, tag := range []string{"0.2.0", "v0.2", "v0.2.0.1", "vlatest", ""} {
		if got, err := ChartVersion(tag); err == nil {
			t.Errorf("ChartVersion(%q) = %q, want an error", tag, got)
		}
	}
}

// TestPackageChartsWithLocalDependency: a chart that depends on another of the same
// folder (file://) is packaged with it inside at the release's version; a chart without
// image values is packaged as it is; the image's digest and repository go into the one
// that has them, and nothing else of its values.yaml changes.
func TestPackageChartsWithLocalDependency(t *testing.T) {
	dir := t.TempDir()
	values := "# -- The image.\nimage:\n  # -- Repository.\n  repository: example.org/op # where\n  digest: \"\"\n  tag: \"\"\nreplicas: 2\n"
	write(t, dir, "op/Chart.yaml", "apiVersion: v2\nname: op\nversion: 0.1.0\nappVersion: \"0.1.0\"\n"+
		"dependencies:\n  - name: op-crds\n    version: 0.1.0\n    repository: file://../op-crds\n    condition: crds.install\n")
	write(t, dir, "op/values.yaml", values)
	write(t, dir, "op/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  image: {{ .Values.image.repository }}@{{ .Values.image.digest }}\n")
	write(t, dir, "op-crds/Chart.yaml", "apiVersion: v2\nname: op-crds\nversion: 0.1.0\n")
	write(t, dir, "op-crds/templates/crd.yaml", "# a CRD\n")
	write(t, dir, "README.md", "not a chart\n")

	digest := "sha256:" + strings.Repeat("ab", 32)
	out := t.TempDir()
	made, err := PackageCharts(dir, "1.2.3", ImageRef{Repository: "ghcr.io/x/op", Digest: digest}, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != 2 {
		t.Fatalf("packaged %+v", made)
	}
	for _, m := range made {
		ch, err := loader.Load(m.File)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != "1.2.3" {
			t.Errorf("%s: version %s appVersion %s", m.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
		}
		if m.Name != "op" {
			continue
		}
		deps := ch.Dependencies()
		if len(deps) != 1 || deps[0].Name() != "op-crds" || deps[0].Metadata.Version != "1.2.3" || ch.Metadata.Dependencies[0].Version != "1.2.3" {
			t.Errorf("op's dependencies: %v (%+v)", deps, ch.Metadata.Dependencies)
		}
		var raw string
		for _, f := range ch.Raw {
			if f.Name == chartutil.ValuesfileName {
				raw = string(f.Data)
			}
		}
		want := strings.Replace(strings.Replace(values, "example.org/op", `"ghcr.io/x/op"`, 1), `digest: ""`, `digest: "`+digest+`"`, 1)
		if raw != want {
			t.Errorf("values.yaml:\n%s\nwant\n%s", raw, want)
		}
		if d, _ := chartutil.Values(ch.Values).PathValue("image.digest"); d != digest {
			t.Errorf("values image.digest = %v", d)
		}
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
