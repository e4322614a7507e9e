// Package release makes what a version tag publishes, in a folder, without a registry:
// the operator image for linux/amd64 and linux/arm64 as a multi-platform index in an OCI
// layout (built without Docker, the same digest from the same source), a CycloneDX SBOM
// of each platform's binary attached to its image as an OCI artifact, the charts
// packaged with the Helm SDK (version and appVersion from the tag, the image's digest in
// their values), the kubectl plugin for linux and darwin on amd64 and arm64 as archives
// with their checksums, and the plugin's krew manifest. Push then publishes the image
// and its SBOMs by digest and the charts as OCI artifacts.
package release

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Options says what to release.
type Options struct {
	// Root is the checkout of the module.
	Root string
	// Version is the tag, v<semver>.
	Version string
	// Repository is the operator image's repository, such as
	// ghcr.io/nodegroup-io/nodegroup-operator.
	Repository string
	// PluginURL is where the plugin archives are downloaded from (the tag's release
	// assets), written into the krew manifest.
	PluginURL string
}

// Result is what Build made, as release.json records it (paths relative to its folder).
type Result struct {
	Version string          `json:"version"`
	Image   Image           `json:"image"`
	Charts  []PackagedChart `json:"charts"`
	Plugin  []Archive       `json:"plugin"`
	// Checksums and Krew are the plugin's checksums file and krew manifest.
	Checksums string `json:"checksums"`
	Krew      string `json:"krew"`
}

// Image is the operator image's index and its platforms.
type Image struct {
	Repository string `json:"repository"`
	// Digest is the index's: what the charts run and what a pull by tag resolves to.
	Digest string `json:"digest"`
	// Layout is the OCI image layout holding the index and the SBOM artifacts.
	Layout    string          `json:"layout"`
	Platforms []ImagePlatform `json:"platforms"`
}

// ImagePlatform is the image of one platform, and its SBOM.
type ImagePlatform struct {
	Platform   string `json:"platform"`
	Digest     string `json:"digest"`
	SBOM       string `json:"sbom"`
	SBOMDigest string `json:"sbomDigest"`
}

// ResultFile is the name of the record of a release folder.
const ResultFile = "release.json"

// ChartVersion is the charts' version (and appVersion, and the image's tag) of a tag: the
// tag without its v, which must be semantic.
func ChartVersion(tag string) (string, error) {
	v, ok := strings.CutPrefix(tag, "v")
	if !ok {
		return "", fmt.Errorf("version %q: a release tag is v<major>.<minor>.<patch>", tag)
	}
	if _, err := semver.StrictNewVersion(v); err != nil {
		return "", fmt.Errorf("version %q: %w", tag, err)
	}
	return v, nil
}

// Build makes every artifact of a release into out (created; the subfolders it writes
// are replaced) and records them in out/release.json.
func Build(ctx context.Context, o Options, out string) (*Result, error) {
	chartVersion, err := ChartVersion(o.Version)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "nodegroup-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	r := &Result{Version: o.Version, Image: Image{Repository: o.Repository, Layout: filepath.Join(out, "image")}}
	idx, bins, err := OperatorImage(ctx, o.Root, o.Version, work)
	if err != nil {
		return nil, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	r.Image.Digest = digest.String()
	sboms, err := r.imageSBOMs(idx, bins, out)
	if err != nil {
		return nil, err
	}
	if err := WriteLayout(r.Image.Layout, idx, sboms...); err != nil {
		return nil, err
	}

	chartsDir := filepath.Join(out, "charts")
	if err := os.RemoveAll(chartsDir); err != nil {
		return nil, err
	}
	r.Charts, err = PackageCharts(filepath.Join(o.Root, "charts"), chartVersion, ImageRef{Repository: o.Repository, Digest: r.Image.Digest}, chartsDir)
	if err != nil {
		return nil, err
	}

	pluginDir := filepath.Join(out, "plugin")
	if err := os.RemoveAll(pluginDir); err != nil {
		return nil, err
	}
	if r.Plugin, err = PluginArchives(ctx, o.Root, o.Version, work, pluginDir); err != nil {
		return nil, err
	}
	r.Checksums = filepath.Join(pluginDir, "checksums.txt")
	krew, err := KrewManifest(o.Version, o.PluginURL, r.Plugin)
	if err != nil {
		return nil, err
	}
	r.Krew = filepath.Join(out, "plugins", "nodegroup.yaml")
	if err := os.MkdirAll(filepath.Dir(r.Krew), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(r.Krew, krew, 0o644); err != nil {
		return nil, err
	}
	return r, r.write(out)
}

// imageSBOMs writes the SBOM of each platform's binary into out/sbom and returns them as
// artifacts referring to their platform's image.
func (r *Result) imageSBOMs(idx v1.ImageIndex, bins map[Platform]string, out string) ([]v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(out, "sbom")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var arts []v1.Image
	for _, d := range m.Manifests {
		p := Platform{OS: d.Platform.OS, Arch: d.Platform.Architecture}
		doc, err := SBOM(bins[p], "nodegroup-operator", r.Version)
		if err != nil {
			return nil, err
		}
		file := filepath.Join(dir, fmt.Sprintf("nodegroup-operator_%s_%s_%s.cdx.json", r.Version, p.OS, p.Arch))
		if err := os.WriteFile(file, doc, 0o644); err != nil {
			return nil, err
		}
		art, err := Attachment(d, doc, SBOMMediaType)
		if err != nil {
			return nil, err
		}
		ad, err := art.Digest()
		if err != nil {
			return nil, err
		}
		arts = append(arts, art)
		r.Image.Platforms = append(r.Image.Platforms, ImagePlatform{Platform: p.String(), Digest: d.Digest.String(), SBOM: file, SBOMDigest: ad.String()})
	}
	return arts, nil
}

// write records r in out/release.json, its paths relative to out.
func (r *Result) write(out string) error {
	c := *r
	c.Image.Platforms = append([]ImagePlatform(nil), r.Image.Platforms...)
	c.Charts = append([]PackagedChart(nil), r.Charts...)
	c.Plugin = append([]Archive(nil), r.Plugin...)
	for _, p := range c.paths() {
		rel, err := filepath.Rel(out, *p)
		if err != nil {
			return err
		}
		*p = rel
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, ResultFile), append(data, '\n'), 0o644)
}

// Read reads the record of a release folder, its paths made absolute again.
func Read(out string) (*Result, error) {
	data, err := os.ReadFile(filepath.Join(out, ResultFile))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", ResultFile, err)
	}
	for _, p := range r.paths() {
		*p = filepath.Join(out, *p)
	}
	return &r, nil
}

// paths are the fields of r that name a file or folder.
func (r *Result) paths() []*string {
	ps := []*string{&r.Image.Layout, &r.Checksums, &r.Krew}
	for i := range r.Image.Platforms {
		ps = append(ps, &r.Image.Platforms[i].SBOM)
	}
	for i := range r.Charts {
		ps = append(ps, &r.Charts[i].File)
	}
	for i := range r.Plugin {
		ps = append(ps, &r.Plugin[i].File)
	}
	return ps
}
