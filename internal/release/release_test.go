package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/registry"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/operatorimage"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

const (
	testVersion = "v0.2.0"
	testRepo    = "ghcr.io/nodegroup-io/nodegroup-operator"
	testURL     = "https://downloads.example/nodegroup/v0.2.0"
)

var (
	dryRunOnce sync.Once
	dryRuns    [2]*Result
	dryRunErr  error
)

// dryRun builds the release twice, into two folders, once per test binary: the tests
// below read the two.
func dryRun(t *testing.T) (a, b *Result) {
	t.Helper()
	dryRunOnce.Do(func() {
		o := Options{Root: testenv.RepoRoot(), Version: testVersion, Repository: testRepo, PluginURL: testURL}
		base, err := os.MkdirTemp("", "nodegroup-release-test-")
		if err != nil {
			dryRunErr = err
			return
		}
		for i := range dryRuns {
			start := time.Now()
			if dryRuns[i], dryRunErr = Build(context.Background(), o, filepath.Join(base, fmt.Sprint(i))); dryRunErr != nil {
				return
			}
			fmt.Fprintf(os.Stderr, "release dry run %d took %s\n", i+1, time.Since(start).Round(time.Second))
		}
	})
	if dryRunErr != nil {
		t.Fatal(dryRunErr)
	}
	return dryRuns[0], dryRuns[1]
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dryRuns[0] != nil {
		os.RemoveAll(filepath.Dir(filepath.Dir(dryRuns[0].Krew)))
	}
	os.Exit(code)
}

// TestDryRunIsReproducible: two builds of the same source in two folders give the same
// image index, platform images, SBOM artifacts and plugin archives, byte for byte, and
// the record of a folder reads back as what the build returned.
func TestDryRunIsReproducible(t *testing.T) {
	a, b := dryRun(t)
	if a.Image.Digest != b.Image.Digest {
		t.Errorf("image index digests differ: %s and %s", a.Image.Digest, b.Image.Digest)
	}
	if !reflect.DeepEqual(digests(a), digests(b)) {
		t.Errorf("platform or SBOM digests differ:\n%v\n%v", digests(a), digests(b))
	}
	for i := range a.Plugin {
		if a.Plugin[i].SHA256 != b.Plugin[i].SHA256 {
			t.Errorf("plugin archive %s differs between builds", filepath.Base(a.Plugin[i].File))
		}
	}
	t.Logf("image index %s: %v", a.Image.Digest, digests(a))
	for _, r := range []*Result{a, b} {
		out := filepath.Dir(filepath.Dir(r.Krew))
		read, err := Read(out)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(read, r) {
			t.Errorf("%s reads back as\n%+v\nwant\n%+v", ResultFile, read, r)
		}
	}
}

func digests(r *Result) []string {
	var ds []string
	for _, p := range r.Image.Platforms {
		ds = append(ds, p.Platform+" "+p.Digest+" sbom "+p.SBOMDigest)
	}
	return ds
}

// TestImageIndex: the layout holds a linux/amd64 and a linux/arm64 image, each of the
// operator binary for its architecture, built as a release is (static, trimmed paths),
// and beside them one SBOM artifact per image whose subject is that image.
func TestImageIndex(t *testing.T) {
	r, _ := dryRun(t)
	idx, arts, err := ReadLayout(r.Image.Layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		info := imageBuildInfo(t, img)
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		want := map[string]string{"GOOS": "linux", "GOARCH": d.Platform.Architecture, "CGO_ENABLED": "0", "-trimpath": "true"}
		for k, v := range want {
			if settings[k] != v {
				t.Errorf("%s: the binary's %s is %q, want %q", d.Platform.Architecture, k, settings[k], v)
			}
		}
		if info.Path != "github.com/nodegroup-io/nodegroup-operator/cmd/nodegroup-operator" {
			t.Errorf("%s: the image runs %s", d.Platform.Architecture, info.Path)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture || cf.Config.Labels["org.opencontainers.image.version"] != testVersion {
			t.Errorf("%s: config architecture %s, version label %q", d.Platform.Architecture, cf.Architecture, cf.Config.Labels["org.opencontainers.image.version"])
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("index platforms = %v", platforms)
	}

	if len(arts) != len(m.Manifests) {
		t.Fatalf("%d SBOM artifacts for %d images", len(arts), len(m.Manifests))
	}
	for i, art := range arts {
		raw, err := art.RawManifest()
		if err != nil {
			t.Fatal(err)
		}
		am, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if am.Subject == nil || am.Subject.Digest != m.Manifests[i].Digest || am.ArtifactType != string(SBOMMediaType) {
			t.Errorf("artifact %d: subject %v, artifactType %q; want %s", i, am.Subject, am.ArtifactType, m.Manifests[i].Digest)
		}
		layers, err := art.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("artifact %d: %d layers (%v)", i, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := io.ReadAll(rc)
		rc.Close()
		file, err := os.ReadFile(r.Image.Platforms[i].SBOM)
		if err != nil || !bytes.Equal(doc, file) {
			t.Errorf("artifact %d does not carry %s (%v)", i, r.Image.Platforms[i].SBOM, err)
		}
	}
}

// imageBuildInfo reads the Go build information of the operator binary in img's layer.
func imageBuildInfo(t *testing.T, img v1.Image) *buildinfo.BuildInfo {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatal("no operator binary in the layer")
		}
		if err != nil {
			t.Fatal(err)
		}
		if "/"+h.Name != operatorimage.BinaryPath {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.Read(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
}

// TestSBOM: the SBOM names the operator at the release's version and the modules linked
// into it with their versions and package URLs.
func TestSBOM(t *testing.T) {
	r, _ := dryRun(t)
	f, err := os.Open(r.Image.Platforms[0].SBOM)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.Metadata == nil || bom.Metadata.Component == nil || bom.Metadata.Component.Version != testVersion ||
		bom.Metadata.Component.PackageURL != "pkg:golang/github.com/nodegroup-io/nodegroup-operator@"+testVersion {
		t.Fatalf("SBOM metadata component: %+v", bom.Metadata)
	}
	found := map[string]string{}
	for _, c := range *bom.Components {
		found[c.Name] = c.PackageURL
	}
	for mod, purl := range map[string]string{
		"sigs.k8s.io/controller-runtime": "pkg:golang/sigs.k8s.io/controller-runtime@v0.25.2",
		"k8s.io/client-go":               "pkg:golang/k8s.io/client-go@v0.37.2",
	} {
		if found[mod] != purl {
			t.Errorf("SBOM component %s: purl %q, want %q", mod, found[mod], purl)
		}
	}
	if _, ok := found["github.com/rhysd/actionlint"]; ok {
		t.Error("the SBOM lists a module the operator does not link (actionlint, a test dependency)")
	}
}

// TestCharts: every chart is packaged at the tag's version, and the operator chart runs
// the image by the digest the release built.
func TestCharts(t *testing.T) {
	r, _ := dryRun(t)
	var names []string
	for _, c := range r.Charts {
		names = append(names, c.Name)
		ch, err := loader.Load(c.File)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.Version != "0.2.0" || ch.Metadata.AppVersion != "0.2.0" || filepath.Base(c.File) != c.Name+"-0.2.0.tgz" {
			t.Errorf("%s: version %s appVersion %s file %s", c.Name, ch.Metadata.Version, ch.Metadata.AppVersion, c.File)
		}
		if c.Name != "nodegroup-operator" {
			continue
		}
		if d, _ := chartutil.Values(ch.Values).PathValue("image.digest"); d != r.Image.Digest {
			t.Errorf("values image.digest = %v, want %s", d, r.Image.Digest)
		}
		var raw string
		for _, f := range ch.Raw {
			if f.Name == chartutil.ValuesfileName {
				raw = string(f.Data)
			}
		}
		if !strings.Contains(raw, "# -- Image repository of the operator.") || !strings.Contains(raw, `digest: "`+r.Image.Digest+`"`) {
			t.Errorf("the packaged values.yaml lost its comments or the digest:\n%s", raw)
		}
		vals, err := chartutil.ToRenderValues(ch, nil, chartutil.ReleaseOptions{Name: "ngo", Namespace: "ngo", IsInstall: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := engine.Render(ch, vals)
		if err != nil {
			t.Fatal(err)
		}
		want := "image: " + testRepo + "@" + r.Image.Digest
		if d := out["nodegroup-operator/templates/deployment.yaml"]; !strings.Contains(d, want) {
			t.Errorf("the Deployment does not run %q:\n%s", want, d)
		}
	}
	if !slices.Contains(names, "nodegroup-operator") {
		t.Errorf("charts packaged: %v", names)
	}
}

// TestPluginAndKrewManifest: an archive per platform holding only the plugin binary,
// the checksums file and the krew manifest agree with the archives, and the linux/amd64
// binary says the release's version.
func TestPluginAndKrewManifest(t *testing.T) {
	r, _ := dryRun(t)
	data, err := os.ReadFile(r.Krew)
	if err != nil {
		t.Fatal(err)
	}
	var p KrewPlugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "nodegroup" ||
		filepath.Base(r.Krew) != p.Metadata.Name+".yaml" || p.Spec.Version != testVersion || p.Spec.ShortDescription == "" {
		t.Errorf("krew manifest header: %+v %+v", p.TypeMeta, p.Metadata)
	}
	sums, err := os.ReadFile(r.Checksums)
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, pl := range p.Spec.Platforms {
		goos, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		platforms = append(platforms, goos+"/"+arch)
		u, err := url.Parse(pl.URI)
		if err != nil || !strings.HasPrefix(pl.URI, testURL+"/") {
			t.Errorf("%s/%s: uri %q", goos, arch, pl.URI)
			continue
		}
		file := filepath.Join(filepath.Dir(r.Checksums), filepath.Base(u.Path))
		body := readFile(t, file)
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != pl.SHA256 {
			t.Errorf("%s: the manifest's sha256 %s is not the archive's", file, pl.SHA256)
		}
		if !strings.Contains(string(sums), pl.SHA256+"  "+filepath.Base(file)+"\n") {
			t.Errorf("checksums.txt has no line for %s", filepath.Base(file))
		}
		if pl.Bin != PluginName || len(pl.Files) != 1 || pl.Files[0].From != PluginName {
			t.Errorf("%s/%s: bin %q files %+v", goos, arch, pl.Bin, pl.Files)
		}
		names, bin := untar(t, body)
		if !slices.Equal(names, []string{PluginName}) {
			t.Errorf("%s holds %v", filepath.Base(file), names)
		}
		if goos == runtime.GOOS && arch == runtime.GOARCH {
			exe := filepath.Join(t.TempDir(), PluginName)
			if err := os.WriteFile(exe, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(exe, "version").Output()
			if err != nil || strings.TrimSpace(string(out)) != PluginName+" "+testVersion {
				t.Errorf("%s version: %q (%v)", PluginName, out, err)
			}
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}) {
		t.Errorf("krew platforms = %v", platforms)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// untar returns the names in a .tar.gz and the content of the last file.
func untar(t *testing.T, tgz []byte) ([]string, []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	var last []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, last
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode != 0o755 {
			t.Errorf("%s: mode %o", h.Name, h.Mode)
		}
		names = append(names, h.Name)
		if last, err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPush publishes a dry run to a registry (go-containerregistry's, in process): the
// index by digest and by tag, each SBOM found as a referrer of its image, each chart
// pulled back with Helm's registry client at its version with the digest in its values.
func TestPush(t *testing.T) {
	_, built := dryRun(t)
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	r := *built
	r.Image.Repository = host + "/nodegroup-io/nodegroup-operator"
	pub, err := Push(context.Background(), &r, PushOptions{ChartRepository: "oci://" + host + "/charts", PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{pub.Image, pub.Tag} {
		parsed, err := name.ParseReference(ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(parsed)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if d, _ := idx.Digest(); d.String() != r.Image.Digest {
			t.Errorf("%s resolves to %s, want %s", ref, d, r.Image.Digest)
		}
	}
	for _, p := range r.Image.Platforms {
		d, err := name.NewDigest(r.Image.Repository+"@"+p.Digest, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		refs, err := remote.Referrers(d, remote.WithFilter("artifactType", string(SBOMMediaType)))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := refs.IndexManifest()
		if len(m.Manifests) != 1 || m.Manifests[0].Digest.String() != p.SBOMDigest {
			t.Errorf("%s: referrers %+v, want the SBOM %s", p.Platform, m.Manifests, p.SBOMDigest)
		}
	}
	client, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	if len(pub.Charts) != len(r.Charts) {
		t.Fatalf("published charts %v for %d packaged", pub.Charts, len(r.Charts))
	}
	for _, c := range r.Charts {
		pulled, err := client.Pull(fmt.Sprintf("%s/charts/%s:%s", host, c.Name, c.Version))
		if err != nil {
			t.Fatal(err)
		}
		ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.Version != c.Version || pulled.Chart.Meta.AppVersion != c.AppVersion {
			t.Errorf("pulled %s at %s (appVersion %s)", c.Name, ch.Metadata.Version, pulled.Chart.Meta.AppVersion)
		}
	}
}
