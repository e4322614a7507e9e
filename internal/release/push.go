package release

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/registry"
)

// PushOptions says where to publish.
type PushOptions struct {
	// ChartRepository is the OCI repository the charts go under (oci:// optional):
	// a chart is pushed as <ChartRepository>/<name>:<version>.
	ChartRepository string
	// PlainHTTP talks to the registries without TLS (a local registry).
	PlainHTTP bool
}

// Published is what Push published, by reference.
type Published struct {
	// Image is the index by digest; Tag the same index by the chart version.
	Image, Tag string
	// SBOMs are the SBOM artifacts by digest.
	SBOMs []string
	// Charts are the charts by tag, each with the digest of its manifest.
	Charts []string
}

// Push publishes a release folder that Build made: the image index by digest and then by
// the chart version as a tag, its SBOM artifacts by digest (a registry without the
// referrers API gets them under the fallback tag sha256-<digest>), and each chart with
// the Helm SDK's registry client. Credentials come from the Docker config
// (~/.docker/config.json), as `docker login` or the forge's login action write it, and,
// for the charts, from Helm's registry config too.
func Push(ctx context.Context, r *Result, o PushOptions) (*Published, error) {
	var nameOpts []name.Option
	if o.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	repo, err := name.NewRepository(r.Image.Repository, nameOpts...)
	if err != nil {
		return nil, err
	}
	idx, sboms, err := ReadLayout(r.Image.Layout)
	if err != nil {
		return nil, fmt.Errorf("reading the image layout: %w", err)
	}
	if d, err := idx.Digest(); err != nil || d.String() != r.Image.Digest {
		return nil, fmt.Errorf("the image layout holds index %s, %s records %s (%v)", d, ResultFile, r.Image.Digest, err)
	}
	chartVersion, err := ChartVersion(r.Version)
	if err != nil {
		return nil, err
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	pub := &Published{Image: repo.Digest(r.Image.Digest).String(), Tag: repo.Tag(chartVersion).String()}
	if err := remote.WriteIndex(repo.Digest(r.Image.Digest), idx, ropts...); err != nil {
		return nil, fmt.Errorf("pushing the image: %w", err)
	}
	if err := remote.Tag(repo.Tag(chartVersion), idx, ropts...); err != nil {
		return nil, fmt.Errorf("tagging the image: %w", err)
	}
	for _, s := range sboms {
		d, err := s.Digest()
		if err != nil {
			return nil, err
		}
		if err := remote.Write(repo.Digest(d.String()), s, ropts...); err != nil {
			return nil, fmt.Errorf("pushing an SBOM: %w", err)
		}
		pub.SBOMs = append(pub.SBOMs, repo.Digest(d.String()).String())
	}

	var copts []registry.ClientOption
	if o.PlainHTTP {
		copts = append(copts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(copts...)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(strings.TrimPrefix(o.ChartRepository, registry.OCIScheme+"://"), "/")
	for _, c := range r.Charts {
		data, err := os.ReadFile(c.File)
		if err != nil {
			return nil, err
		}
		res, err := client.Push(data, fmt.Sprintf("%s/%s:%s", base, c.Name, c.Version), registry.PushOptStrictMode(true))
		if err != nil {
			return nil, fmt.Errorf("pushing chart %s: %w", c.Name, err)
		}
		pub.Charts = append(pub.Charts, res.Ref+"@"+res.Manifest.Digest)
	}
	return pub, nil
}
