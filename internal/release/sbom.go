package release

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/package-url/packageurl-go"
)

// SBOMMediaType is the media type of the SBOM, and the artifactType of the OCI artifact
// that carries it beside the image.
const SBOMMediaType types.MediaType = "application/vnd.cyclonedx+json"

// emptyJSON is OCI's empty descriptor's content and media type: the config of an
// artifact that has none.
const emptyJSON types.MediaType = "application/vnd.oci.empty.v1+json"

// SBOM returns a CycloneDX (JSON) bill of materials of a Go binary: the binary as the
// application and every module linked into it as a library, each with its version and
// Go package URL, read from the build information the Go linker embeds (what `go
// version -m` prints). It holds no time or random serial number, so the same binary gives
// the same document.
func SBOM(binary, name, version string) ([]byte, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the build information of %s: %w", binary, err)
	}
	app := cdx.Component{
		BOMRef: purl(info.Main.Path, version), Type: cdx.ComponentTypeApplication,
		Name: name, Version: version, PackageURL: purl(info.Main.Path, version),
	}
	var props []cdx.Property
	props = append(props, cdx.Property{Name: "go:version", Value: info.GoVersion})
	for _, s := range info.Settings {
		if strings.HasPrefix(s.Key, "-") || strings.HasPrefix(s.Key, "GO") || s.Key == "CGO_ENABLED" {
			props = append(props, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
		}
	}
	app.Properties = &props
	var libs []cdx.Component
	var refs []string
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		ref := purl(m.Path, m.Version)
		libs = append(libs, cdx.Component{
			BOMRef: ref, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: ref,
		})
		refs = append(refs, ref)
	}
	sort.Slice(libs, func(i, j int) bool { return libs[i].BOMRef < libs[j].BOMRef })
	sort.Strings(refs)
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{Component: &app}
	bom.Components = &libs
	bom.Dependencies = &[]cdx.Dependency{{Ref: app.BOMRef, Dependencies: &refs}}
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func purl(module, version string) string {
	ns, name := "", module
	if i := strings.LastIndex(module, "/"); i >= 0 {
		ns, name = module[:i], module[i+1:]
	}
	return packageurl.NewPackageURL(packageurl.TypeGolang, ns, name, version, nil, "").ToString()
}

// Attachment returns an OCI artifact (an image manifest with an artifactType, an empty
// config and the document as its one layer) whose subject is the given manifest: a
// registry that serves the referrers API lists it under the subject's digest, and
// `oras discover` or `cosign tree` find it there.
func Attachment(subject v1.Descriptor, doc []byte, mt types.MediaType) (v1.Image, error) {
	layer := static.NewLayer(doc, mt)
	ld, err := partial.Descriptor(layer)
	if err != nil {
		return nil, err
	}
	cfg := []byte("{}")
	cd, err := partial.Descriptor(static.NewLayer(cfg, emptyJSON))
	if err != nil {
		return nil, err
	}
	cd.Data = cfg
	subject = v1.Descriptor{MediaType: subject.MediaType, Size: subject.Size, Digest: subject.Digest}
	m := v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: string(mt),
		Config: *cd, Layers: []v1.Descriptor{*ld}, Subject: &subject,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&artifact{manifest: raw, config: cfg, layer: layer})
}

// artifact is the least go-containerregistry needs to write an artifact manifest as an
// image: its raw manifest, its config and its one layer.
type artifact struct {
	manifest, config []byte
	layer            v1.Layer
}

func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.layer.Digest(); err == nil && d == h {
		return a.layer, nil
	}
	return nil, fmt.Errorf("artifact has no blob %s", h)
}
