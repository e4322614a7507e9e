// Package catalog is the version catalog the operator is built with: for each supported
// Kubernetes minor, the patch release pools run and the worker OS builds that go with it
// (images/versions.yaml).
//
// The catalog is compiled in rather than read from the cluster so that one operator
// release always means one set of tested version pairings: upgrading the platform's
// Kubernetes patch or Talos release is an operator release, never a live edit that
// rolls every pool at once. Parse is strict for the same reason: the file is edited by
// people and rewritten by CI tools, and a mistake (a typo'd field, a disk referenced by
// tag, a patch release filed under the wrong minor) must fail the build, not a pool.
package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"sync"

	"k8s.io/apimachinery/pkg/util/version"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/images"
)

// SchemaVersion is the only shape of versions.yaml this build understands. A file
// written for another shape is refused whole, rather than read in part.
const SchemaVersion = 1

// Catalog is a parsed, validated versions.yaml. Releases are sorted by minor, oldest
// first, with exactly one entry per minor; Parse guarantees at least one.
type Catalog struct {
	SchemaVersion int          `json:"schemaVersion"`
	TalosFactory  TalosFactory `json:"talosFactory"`
	Releases      []Release    `json:"releases"`
}

// TalosFactory names the Image Factory that Talos workers are installed from, unless
// their class names another installer repository (a mirror, for air-gapped sites). The
// schematic and Talos version of a Release complete these into concrete references, so
// they carry no tag or digest themselves.
type TalosFactory struct {
	// InstallerRepository is the installer image repository, e.g.
	// factory.talos.dev/installer; the installer is <repo>/<schematic>:<version>.
	InstallerRepository string `json:"installerRepository"`
	// DiskImageBase is where boot disk images are served, e.g. factory.talos.dev/image;
	// a disk is <base>/<schematic>/<version>/<platform>-<arch>.raw.xz.
	DiskImageBase string `json:"diskImageBase"`
}

// Release is everything the platform pins for one Kubernetes minor. A pool names a
// minor (or a patch of it) and gets the whole entry, so the pieces that must agree
// (kubelet release, Talos line, Kairos disk) are chosen together, in one place.
type Release struct {
	// Minor is the Kubernetes minor, e.g. v1.35.
	Minor string `json:"minor"`
	// Kubernetes is the patch release of Minor that pools following the catalog run.
	Kubernetes string `json:"kubernetes"`
	// KubeadmSHA512 is the published SHA-512 of the release's kubeadm binary per
	// architecture, checked before the binary goes into a worker image; empty until it is
	// recorded from the release's .sha512 files.
	KubeadmSHA512 PerArch `json:"kubeadmSHA512"`
	Talos         Talos   `json:"talos"`
	Kairos        Kairos  `json:"kairos"`
	// ClusterAutoscaler is the cluster-autoscaler release (its image tag) run for tenant
	// clusters whose control plane runs this minor: upstream releases one autoscaler
	// minor per Kubernetes minor and supports it against that minor.
	ClusterAutoscaler string `json:"clusterAutoscaler"`
}

// PerArch holds one value per architecture the worker images are built for.
type PerArch struct {
	AMD64 string `json:"amd64"`
	ARM64 string `json:"arm64"`
}

// For returns the value of an architecture ("amd64", "arm64"), empty for others.
func (p PerArch) For(arch string) string {
	switch arch {
	case "amd64":
		return p.AMD64
	case "arm64":
		return p.ARM64
	}
	return ""
}

// Talos is the Talos build for a minor. The version must come from a Talos line whose
// support matrix lists the minor; the schematic selects extensions and kernel arguments
// baked into the installer.
type Talos struct {
	Version   string `json:"version"`
	Schematic string `json:"schematic"`
}

// Kairos is the Kairos worker disk for a minor. Both references are pinned by digest so
// that a pushed tag cannot change what boots; both are empty until CI has built them.
type Kairos struct {
	// Base is the Kairos base image the worker OS image is built FROM, pinned by digest;
	// empty until chosen.
	Base string `json:"base"`
	// Disk is the KubeVirt containerDisk holding the worker disk.
	Disk string `json:"disk"`
	// OSImage is the Kairos OS image the disk was built from, kept so a disk can always
	// be traced back to its source and rebuilt.
	OSImage string `json:"osImage"`
}

var (
	// schematicRE is an Image Factory schematic ID: the sha256 of the schematic document.
	schematicRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// repositoryRE matches the NodeGroupClass installerRepository pattern, and pinnedRE
	// the class image reference rule, so a catalog value is accepted wherever a class
	// value is.
	repositoryRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)+$`)
	// sha512RE is a SHA-512 in lowercase hex.
	sha512RE = regexp.MustCompile(`^[0-9a-f]{128}$`)
	pinnedRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)+@sha256:[a-f0-9]{64}$`)
)

// parseVersion reads vMAJOR.MINOR or vMAJOR.MINOR.PATCH with apimachinery's version
// parser, and accepts only the one spelling the NodeGroup CRD allows: a leading "v", no
// leading zeros ("v1.035" would be a second spelling of v1.35 and miss every lookup), no
// spaces and no suffix.
func parseVersion(s string) (*version.Version, error) {
	v, err := version.ParseGeneric(s)
	if err != nil || len(v.Components()) > 3 || "v"+v.String() != s {
		return nil, fmt.Errorf("%q is not a Kubernetes version: want vMAJOR.MINOR or vMAJOR.MINOR.PATCH, such as v1.35 or v1.35.4", s)
	}
	return v, nil
}

func hasPatch(v *version.Version) bool { return len(v.Components()) == 3 }

func minorString(v *version.Version) string { return fmt.Sprintf("v%d.%d", v.Major(), v.Minor()) }

// MinorOf returns the minor ("v1.35") of a minor or patch version ("v1.35",
// "v1.35.4"). Pools may name either; the catalog is keyed by minor, so every lookup goes
// through here and one spelling rule applies everywhere (the same one the NodeGroup CRD
// enforces: a leading "v", no pre-release suffix).
func MinorOf(v string) (string, error) {
	p, err := parseVersion(v)
	if err != nil {
		return "", err
	}
	return minorString(p), nil
}

// Parse reads and validates a catalog. It refuses unknown or misspelt fields (matched
// case-sensitively), duplicate keys, and any value that breaks the rules in
// versions.yaml, reporting every problem at once so one edit can fix them all.
func Parse(data []byte) (*Catalog, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("catalog: invalid YAML: %w", err)
	}
	var c Catalog
	strictErrs, err := kjson.UnmarshalStrict(j, &c)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if len(strictErrs) > 0 {
		return nil, fmt.Errorf("catalog: %w", errors.Join(strictErrs...))
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return &c, nil
}

func (c *Catalog) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.SchemaVersion != SchemaVersion {
		bad("schemaVersion %d is not supported: this build reads schemaVersion %d", c.SchemaVersion, SchemaVersion)
	}
	if !repositoryRE.MatchString(c.TalosFactory.InstallerRepository) {
		bad("talosFactory.installerRepository %q must be a repository without scheme, tag or digest, such as factory.talos.dev/installer", c.TalosFactory.InstallerRepository)
	}
	if !repositoryRE.MatchString(c.TalosFactory.DiskImageBase) {
		bad("talosFactory.diskImageBase %q must be a host and path without scheme, such as factory.talos.dev/image", c.TalosFactory.DiskImageBase)
	}
	if len(c.Releases) == 0 {
		bad("releases is empty: the catalog must offer at least one Kubernetes minor")
	}

	seen := map[string]int{}
	var prev *version.Version
	for i, r := range c.Releases {
		at := fmt.Sprintf("releases[%d]", i)

		minor, err := parseVersion(r.Minor)
		minorOK := err == nil && !hasPatch(minor)
		switch {
		case err != nil:
			bad("%s.minor: %w", at, err)
		case hasPatch(minor):
			bad("%s.minor %q must be a minor (vMAJOR.MINOR), not a patch release", at, r.Minor)
		default:
			if j, dup := seen[r.Minor]; dup {
				bad("%s.minor %s is a duplicate of releases[%d]: one entry per minor", at, r.Minor, j)
			} else if prev != nil && !prev.LessThan(minor) {
				// Numerically: v1.9 comes before v1.10, which a string sort gets wrong.
				bad("%s.minor %s comes after %s: releases must be sorted by minor, oldest first", at, r.Minor, minorString(prev))
			}
			seen[r.Minor] = i
			prev = minor
		}

		if kube, err := parseVersion(r.Kubernetes); err != nil {
			bad("%s.kubernetes: %w", at, err)
		} else if !hasPatch(kube) {
			bad("%s.kubernetes %q must be a patch release (vMAJOR.MINOR.PATCH)", at, r.Kubernetes)
		} else if minorOK && minorString(kube) != r.Minor {
			bad("%s.kubernetes %s is not a release of minor %s", at, r.Kubernetes, r.Minor)
		}

		if tv, err := parseVersion(r.Talos.Version); err != nil || !hasPatch(tv) {
			bad("%s.talos.version %q must be a Talos release such as v1.13.10", at, r.Talos.Version)
		}
		if !schematicRE.MatchString(r.Talos.Schematic) {
			bad("%s.talos.schematic %q must be an Image Factory schematic ID: 64 lowercase hex characters", at, r.Talos.Schematic)
		}

		if r.Kairos.Disk != "" && !pinnedRE.MatchString(r.Kairos.Disk) {
			bad("%s.kairos.disk %q must be pinned by digest, as registry/repository@sha256:<64 lowercase hex>", at, r.Kairos.Disk)
		}
		if r.Kairos.OSImage != "" && !pinnedRE.MatchString(r.Kairos.OSImage) {
			bad("%s.kairos.osImage %q must be pinned by digest, as registry/repository@sha256:<64 lowercase hex>", at, r.Kairos.OSImage)
		}
		if r.Kairos.Disk != "" && r.Kairos.OSImage == "" {
			bad("%s.kairos.osImage is empty but kairos.disk is set: record the OS image every disk was built from", at)
		}
		if r.Kairos.Base != "" && !pinnedRE.MatchString(r.Kairos.Base) {
			bad("%s.kairos.base %q must be pinned by digest, as registry/repository@sha256:<64 lowercase hex>", at, r.Kairos.Base)
		}
		if ca, err := parseVersion(r.ClusterAutoscaler); err != nil || !hasPatch(ca) {
			bad("%s.clusterAutoscaler %q must be a cluster-autoscaler release tag such as v1.35.2", at, r.ClusterAutoscaler)
		}
		for _, arch := range []string{"amd64", "arm64"} {
			if sum := r.KubeadmSHA512.For(arch); sum != "" && !sha512RE.MatchString(sum) {
				bad("%s.kubeadmSHA512.%s %q must be a SHA-512: 128 lowercase hex characters", at, arch, sum)
			}
		}
	}
	return errors.Join(errs...)
}

// Lookup returns the release for a minor ("v1.35") or for any patch of it ("v1.35.4",
// "v1.35.9"): a pool that names a patch the catalog does not pin still belongs to that
// minor's builds. Callers that need the exact patch compare Release.Kubernetes.
// Malformed versions are simply not found.
func (c *Catalog) Lookup(v string) (Release, bool) {
	minor, err := MinorOf(v)
	if err != nil {
		return Release{}, false
	}
	for _, r := range c.Releases {
		if r.Minor == minor {
			return r, true
		}
	}
	return Release{}, false
}

// Minors lists the supported minors, oldest first, e.g. for error messages that tell a
// tenant what they may ask for.
func (c *Catalog) Minors() []string {
	out := make([]string, 0, len(c.Releases))
	for _, r := range c.Releases {
		out = append(out, r.Minor)
	}
	return out
}

// Newest is the release of the highest minor, the platform's default when nothing else
// decides. A catalog from Parse is never empty; a zero Catalog gives a zero Release.
func (c *Catalog) Newest() Release {
	if len(c.Releases) == 0 {
		return Release{}
	}
	return c.Releases[len(c.Releases)-1]
}

// embedded parses the compiled-in file once, on first use rather than at init, so that
// the package's own tests report a broken file as a test failure with the parse error
// instead of the whole test binary dying in init.
var embedded = sync.OnceValues(func() (*Catalog, error) { return Parse(images.VersionsYAML) })

// Default is the catalog compiled into this binary. A broken embedded file is a bug in
// the build, never an input error, so it panics; TestEmbeddedCatalog fails first.
// Each call returns a fresh copy, so a caller that edits its copy cannot change the
// catalog for the rest of the process.
func Default() *Catalog {
	c, err := embedded()
	if err != nil {
		panic(fmt.Sprintf("embedded images/versions.yaml is invalid: %v", err))
	}
	cp := *c
	cp.Releases = append([]Release(nil), c.Releases...)
	return &cp
}
