package testenv

// This file gives tests the real CRDs of the Cluster API providers whose objects the
// operator renders, so a rendered object is checked against the schema its provider
// really installs, not against a copy we wrote and could get wrong the same way as the
// renderer.
//
// Where each file comes from matters as much as its content:
//
//   - A provider that publishes its CRDs in a Go module zip (Cluster API core, CAPK) is
//     read from the module cache after `go mod download`, which checks the zip against
//     sum.golang.org. That is the only network this project's CI has, so these CRDs
//     need no mirror at all.
//   - Every other provider is a pinned download: the raw GitHub URL of the file at a tag
//     or commit plus its sha256, as a user's machine would fetch it. A local mirror
//     (NODEGROUP_CRD_MIRROR, or shared/crds-upstream next to the clone) stands in for
//     the network where there is none, and the download is cached by its sum.
//
// Every file, whatever its source, is checked against its pinned sha256 before it is
// decoded, so a moved tag, a stale mirror or a tampered cache fails the test with both
// sums instead of silently testing against a different schema.

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// UpstreamCRD describes one provider CRD and where it comes from.
type UpstreamCRD struct {
	// Name is the CRD's metadata.name; the decoded file must carry exactly this name, so
	// a wrong path cannot install some other CRD in its place.
	Name string
	// Module and Version name the Go module whose zip ships the file at Path. When Module
	// is empty the file is a pinned download from GitHub (Repo, Ref) instead.
	Module  string
	Version string
	// ModuleSum is the module zip's h1: sum. go mod download checks the zip against
	// sum.golang.org; pinning the sum here also holds when GONOSUMDB, GOFLAGS=-insecure
	// or GOSUMDB=off would skip that check.
	ModuleSum string
	// Repo ("org/name") and Ref (tag or commit) locate a pinned download on GitHub.
	Repo string
	Ref  string
	// Path is the file's path in the upstream repository, which is also its path inside
	// the module zip.
	Path string
	// Mirror is the file's path inside the local mirror folder (see SOURCES.md there).
	// Only pinned downloads are read from the mirror; module files always come from the
	// module.
	Mirror string
	// SHA256 is the hex sha256 of the file exactly as upstream publishes it.
	SHA256 string
	// Labels are the contract labels upstream adds with kustomize at release time
	// (config/crd/kustomization.yaml), which the base files lack. Cluster API core reads
	// them to find which API version of a referenced provider kind to use, so without
	// them the real CAPI manager cannot resolve, for example, a KubevirtMachineTemplate
	// reference.
	Labels map[string]string
}

// URL is where a pinned download is fetched from, under base (normally
// https://raw.githubusercontent.com).
func (u UpstreamCRD) URL(base string) string {
	return strings.TrimSuffix(base, "/") + "/" + u.Repo + "/" + u.Ref + "/" + u.Path
}

// origin names the file in error messages: where it came from and which CRD it is.
func (u UpstreamCRD) origin() string {
	if u.Module != "" {
		return fmt.Sprintf("%s (%s@%s %s)", u.Name, u.Module, u.Version, u.Path)
	}
	return fmt.Sprintf("%s (%s@%s %s)", u.Name, u.Repo, u.Ref, u.Path)
}

const (
	capiModule  = "sigs.k8s.io/cluster-api"
	capiVersion = "v1.14.2"
	capiSum     = "h1:o3GFNaeNFAOEEMpDPfhCK+2CjmV6gtQ8yLEcUwCg7bA="

	capkModule  = "sigs.k8s.io/cluster-api-provider-kubevirt"
	capkVersion = "v0.11.2"
	capkSum     = "h1:+DyQP1xvAD34Cce/5efG1sJFwJZ3pxwoj17oEuKv/EI="

	// talosRepo v0.6.12 is the newest stable release (commit 065b684), a v1beta1-contract
	// provider serving bootstrap.cluster.x-k8s.io/v1alpha3.
	talosRepo = "siderolabs/cluster-api-bootstrap-provider-talos"
	talosRef  = "v0.6.12"
	// kairosRef is unreleased work after v0.1.3: only it has distribution: kubeadm and
	// spec.kubeadm, which the renderer uses for workers joining a Kamaji control plane.
	// The Go module proxy does not serve this module, hence a pinned download.
	kairosRepo = "kairos-io/cluster-api-provider-kairos"
	kairosRef  = "f653c6d469483ba4baf65fe1e385b01c2a3b98b0"
	// kamajiCPRef v0.20.0 is commit ce62959; its CRD serves v1alpha2.
	kamajiCPRepo = "clastix/cluster-api-control-plane-provider-kamaji"
	kamajiCPRef  = "v0.20.0"
	// capmoxRef v0.9.0 is commit eb2360a; its CRDs serve v1alpha1 and v1alpha2 (the
	// storage version, which render writes). The Go module proxy does not serve the
	// module here, hence a pinned download.
	capmoxRepo = "ionos-cloud/cluster-api-provider-proxmox"
	capmoxRef  = "v0.9.0"

	// DefaultCRDBaseURL serves raw files of GitHub repositories at a tag or commit.
	DefaultCRDBaseURL = "https://raw.githubusercontent.com"
	// MirrorEnv names a folder laid out like shared/crds-upstream that replaces the
	// network for pinned downloads.
	MirrorEnv = "NODEGROUP_CRD_MIRROR"
)

var (
	talosLabels = map[string]string{
		"cluster.x-k8s.io/v1alpha3": "v1alpha3",
		"cluster.x-k8s.io/v1alpha4": "v1alpha3",
		"cluster.x-k8s.io/v1beta1":  "v1alpha3",
	}
	kairosLabels = map[string]string{
		"cluster.x-k8s.io/v1beta1": "v1beta2",
		"cluster.x-k8s.io/v1beta2": "v1beta2",
	}
	// capkLabels carry no v1beta2 label: release-0.11 reverted the move to the v1beta2
	// contract, so v0.11.x is a v1beta1-contract provider despite its metadata.yaml.
	capkLabels = map[string]string{
		"cluster.x-k8s.io/provider": "kubevirt",
		"cluster.x-k8s.io/v1alpha1": "v1alpha1",
		"cluster.x-k8s.io/v1alpha2": "v1alpha1",
		"cluster.x-k8s.io/v1alpha3": "v1alpha1",
		"cluster.x-k8s.io/v1alpha4": "v1alpha1",
		"cluster.x-k8s.io/v1beta1":  "v1alpha1",
	}
	kamajiCPLabels = map[string]string{
		"cluster.x-k8s.io/v1beta2": "v1alpha2",
	}
	capmoxLabels = map[string]string{
		"cluster.x-k8s.io/v1beta1": "v1alpha2",
		"cluster.x-k8s.io/v1beta2": "v1alpha2",
	}
)

// upstreamCRDs is every provider CRD the renderer's objects need. The sums are those of
// the byte-identical copies in shared/crds-upstream (see SOURCES.md there).
var upstreamCRDs = []UpstreamCRD{
	capiCRD("clusters", "39768d1dbe14c7932e4fc4aacd90fcc08395f5922f74886e1a3d87868ce8d997"),
	capiCRD("machinedeployments", "7e24327ee53661507cf25fb2e0aa24053e7d565c2de72f52cdec412fde908dba"),
	capiCRD("machinesets", "169429b63295a9e7d727fc56272ed53c36c4a48fc7ffcd4512d4d5b36e16da01"),
	capiCRD("machines", "0bd43e08ed8fa25424960d13275dd718fcb3477b407e11f7f0cfa25ad38d9476"),
	capiCRD("machinehealthchecks", "ed6db855b4b04e8a84ad9449023a52c64527945f4d43bff97cb8e555572e3b34"),
	capkCRD("kubevirtmachinetemplates", "2acccbdbdb74a8b75e01a5f1252e9da06f8f208abf2b36c3941378552be4b38c"),
	capkCRD("kubevirtclusters", "865e8c5906bc3f8f32c8340d5300d3039e0d01cc7a10e06cabd089b28981e509"),
	// Cluster API clones a KubevirtMachineTemplate into a KubevirtMachine per Machine.
	capkCRD("kubevirtmachines", "a6369faf1073068d0c895e720901ea2dfbec88691c630773c327e72704c5b1fe"),
	pinnedCRD("talos", talosRepo, talosRef, "bootstrap.cluster.x-k8s.io", "talosconfigtemplates",
		"2363fbfa580a9548e73bfbe7a1257b189842319c6f37dad24326f354db2bff46", talosLabels),
	pinnedCRD("talos", talosRepo, talosRef, "bootstrap.cluster.x-k8s.io", "talosconfigs",
		"c68c02392c2df8e222315586b783ac48bc0e6a28cb76e28c78093dee93966531", talosLabels),
	pinnedCRD("kairos", kairosRepo, kairosRef, "bootstrap.cluster.x-k8s.io", "kairosconfigtemplates",
		"041e5f67ab8773eb07482a21a65f003f526fe8871722e630a2cf2267aca61b28", kairosLabels),
	pinnedCRD("kairos", kairosRepo, kairosRef, "bootstrap.cluster.x-k8s.io", "kairosconfigs",
		"72e0e72b407aebf2d346c47f652bfd1d31ea7cc9d4a266b164e0809629beac97", kairosLabels),
	pinnedCRD("kamaji-controlplane", kamajiCPRepo, kamajiCPRef, "controlplane.cluster.x-k8s.io", "kamajicontrolplanes",
		"8cb61d397fede0faec40e269e0d4b14bc2e2ca5a788deb9b7ad3c696239a3de1", kamajiCPLabels),
	pinnedCRD("capmox", capmoxRepo, capmoxRef, "infrastructure.cluster.x-k8s.io", "proxmoxmachinetemplates",
		"43edaf89ff05f4b723f822bf59767de317ebddd66eceef51d24cb62dab99d8d1", capmoxLabels),
	pinnedCRD("capmox", capmoxRepo, capmoxRef, "infrastructure.cluster.x-k8s.io", "proxmoxclusters",
		"91c27514b7a59a8f4ecfc8374c574d832ff8b9a8bb0e041af5639508306119a9", capmoxLabels),
}

// capiCRD is a Cluster API core CRD. CAPI publishes its CRDs in the module zip under
// core/config/crd/bases; core CRDs need no contract label.
func capiCRD(plural, sum string) UpstreamCRD {
	file := "cluster.x-k8s.io_" + plural + ".yaml"
	return UpstreamCRD{
		Name:      plural + ".cluster.x-k8s.io",
		Module:    capiModule,
		Version:   capiVersion,
		ModuleSum: capiSum,
		Path:      "core/config/crd/bases/" + file,
		Mirror:    "capi/" + file,
		SHA256:    sum,
	}
}

// capkCRD is a CAPK CRD; the module zip carries config/crd/bases.
func capkCRD(plural, sum string) UpstreamCRD {
	file := "infrastructure.cluster.x-k8s.io_" + plural + ".yaml"
	return UpstreamCRD{
		Name:      plural + ".infrastructure.cluster.x-k8s.io",
		Module:    capkModule,
		Version:   capkVersion,
		ModuleSum: capkSum,
		Path:      "config/crd/bases/" + file,
		Mirror:    "capk/" + file,
		SHA256:    sum,
		Labels:    capkLabels,
	}
}

// pinnedCRD is a kubebuilder-layout CRD fetched from GitHub at ref.
func pinnedCRD(mirrorDir, repo, ref, group, plural, sum string, labels map[string]string) UpstreamCRD {
	file := group + "_" + plural + ".yaml"
	return UpstreamCRD{
		Name:   plural + "." + group,
		Repo:   repo,
		Ref:    ref,
		Path:   "config/crd/bases/" + file,
		Mirror: mirrorDir + "/" + file,
		SHA256: sum,
		Labels: labels,
	}
}

// UpstreamCRDs lists where each of ProviderCRDs' CRDs comes from.
func UpstreamCRDs() []UpstreamCRD {
	out := slices.Clone(upstreamCRDs)
	for i := range out {
		out[i].Labels = maps.Clone(out[i].Labels)
	}
	return out
}

var (
	providerOnce sync.Once
	providerCRDs []*apiextensionsv1.CustomResourceDefinition
	providerErr  error
)

// ProviderCRDs returns every upstream CRD the renderer's objects need, decoded as
// *apiextensionsv1.CustomResourceDefinition with contract labels added and without
// status or a conversion webhook, ready for Start(Options{CRDs: crds}).
//
// The files are read and verified once per test binary; each call returns fresh deep
// copies because installing a CRD fills in its resourceVersion, which would make a second
// install of the same object fail.
func ProviderCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	providerOnce.Do(func() {
		providerCRDs, providerErr = defaultSource().load(upstreamCRDs)
	})
	if providerErr != nil {
		return nil, providerErr
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, len(providerCRDs))
	for i, crd := range providerCRDs {
		out[i] = crd.DeepCopy()
	}
	return out, nil
}

// source reads upstream files. Its fields are set from the environment by defaultSource
// and injected by tests, which serve the "network" from httptest.
type source struct {
	// mirror is a local folder that replaces the network for pinned downloads; empty
	// means download.
	mirror string
	// cacheDir keeps downloads, named by sha256.
	cacheDir string
	// baseURL is prefixed to "<org>/<repo>/<ref>/<path>".
	baseURL string
	client  *http.Client
	// modules remembers each module's folder, so one go mod download serves all of its
	// files.
	modules map[string]string
}

// defaultSource picks the mirror the way the project's docs describe: NODEGROUP_CRD_MIRROR
// if set, else shared/crds-upstream next to the clone if present, else the network with
// a cache under ${XDG_CACHE_HOME:-$HOME/.cache}/nodegroup-operator/crds (the same cache
// root as hack/testbin.sh).
func defaultSource() *source {
	s := &source{
		cacheDir: filepath.Join(cacheRoot(), "nodegroup-operator", "crds"),
		baseURL:  DefaultCRDBaseURL,
		client:   &http.Client{Timeout: 2 * time.Minute},
	}
	if dir := os.Getenv(MirrorEnv); dir != "" {
		s.mirror = dir
	} else if dir := filepath.Join(RepoRoot(), "..", "shared", "crds-upstream"); isDir(dir) {
		s.mirror = filepath.Clean(dir)
	}
	return s
}

func cacheRoot() string {
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return os.TempDir()
	}
	return filepath.Join(home, ".cache")
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// load reads, verifies and decodes every file, failing on the first problem.
func (s *source) load(list []UpstreamCRD) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(list))
	for _, u := range list {
		data, err := s.read(u)
		if err != nil {
			return nil, err
		}
		crd, err := decodeCRD(u, data)
		if err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

// read returns the verified bytes of one file from its module, the mirror, the cache or
// the network.
func (s *source) read(u UpstreamCRD) ([]byte, error) {
	if u.Module != "" {
		return s.readModule(u)
	}
	if s.mirror != "" {
		path := filepath.Join(s.mirror, filepath.FromSlash(u.Mirror))
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("upstream CRD %s: reading the local CRD mirror %s (from %s or shared/crds-upstream next to the clone): %w",
				u.origin(), s.mirror, MirrorEnv, err)
		}
		return data, verifySHA256(u, path, data)
	}
	return s.download(u)
}

// readModule reads the file from the module cache, downloading the module first.
func (s *source) readModule(u UpstreamCRD) ([]byte, error) {
	key := u.Module + "@" + u.Version
	dir, ok := s.modules[key]
	if !ok {
		var err error
		if dir, err = goModDownload(u.Module, u.Version, u.ModuleSum); err != nil {
			return nil, fmt.Errorf("upstream CRD %s: %w", u.origin(), err)
		}
		if s.modules == nil {
			s.modules = map[string]string{}
		}
		s.modules[key] = dir
	}
	path := filepath.Join(dir, filepath.FromSlash(u.Path))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("upstream CRD %s: the module zip does not carry it: %w", u.origin(), err)
	}
	return data, verifySHA256(u, path, data)
}

// goModDownload runs go mod download outside this module, so the providers' modules
// never enter go.mod or go.sum, and checks the zip's h1: sum against the pinned one.
func goModDownload(module, version, wantSum string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goBin = filepath.Join(root, "bin", "go")
		} else {
			return "", fmt.Errorf("finding the go command for go mod download %s@%s: %w", module, version, err)
		}
	}
	work, err := os.MkdirTemp("", "nodegroup-crd-module-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	cmd := exec.Command(goBin, "mod", "download", "-json", module+"@"+version)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var info struct {
		Dir, Sum, Error string
	}
	jsonErr := json.Unmarshal(out, &info)
	if runErr != nil || jsonErr != nil || info.Error != "" {
		detail := strings.TrimSpace(info.Error + "\n" + stderr.String())
		if detail == "" {
			detail = cmp.Or(runErr, jsonErr).Error()
		}
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, detail)
	}
	if info.Sum != wantSum {
		return "", fmt.Errorf("go mod download %s@%s: module sum mismatch: expected %s, got %s", module, version, wantSum, info.Sum)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s reported no module folder", module, version)
	}
	return info.Dir, nil
}

// maxCRDBytes bounds a download; the largest file here is about 520 KB.
const maxCRDBytes = 16 << 20

// download returns the file from the cache, or fetches it, verifies it and then caches
// it. Only verified bytes ever reach the cache, under their sum, so a cache hit that no
// longer matches was damaged afterwards and is fetched again.
func (s *source) download(u UpstreamCRD) ([]byte, error) {
	cached := filepath.Join(s.cacheDir, u.SHA256+".yaml")
	if data, err := os.ReadFile(cached); err == nil && verifySHA256(u, cached, data) == nil {
		return data, nil
	}
	url := u.URL(s.baseURL)
	resp, err := s.client.Get(url)
	if err != nil {
		return nil, fmt.Errorf("upstream CRD %s: downloading %s: %w", u.origin(), url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("upstream CRD %s: downloading %s: %s (no internet? set %s to a local mirror)",
			u.origin(), url, resp.Status, MirrorEnv)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxCRDBytes+1))
	if err != nil {
		return nil, fmt.Errorf("upstream CRD %s: downloading %s: %w", u.origin(), url, err)
	}
	if len(data) > maxCRDBytes {
		return nil, fmt.Errorf("upstream CRD %s: %s is larger than %d bytes", u.origin(), url, maxCRDBytes)
	}
	if err := verifySHA256(u, url, data); err != nil {
		return nil, err
	}
	if err := writeAtomic(cached, data); err != nil {
		return nil, fmt.Errorf("upstream CRD %s: caching the download: %w", u.origin(), err)
	}
	return data, nil
}

// writeAtomic writes through a temporary file and a rename, so a parallel test binary
// never reads half a file.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// verifySHA256 fails unless data is the pinned file; where names the copy that was read.
func verifySHA256(u UpstreamCRD, where string, data []byte) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != u.SHA256 {
		return fmt.Errorf("upstream CRD %s: sha256 mismatch for %s: expected %s, actual %s",
			u.origin(), where, u.SHA256, got)
	}
	return nil
}

// decodeCRD decodes one verified file strictly, so a field the apiextensions/v1 types do
// not know fails instead of being dropped, then adds the contract labels and removes what
// a test API server cannot honour: status, which the server owns, and a conversion
// webhook, which no test runs. Without a conversion stanza the server uses None
// conversion, so tests must use the storage version of multi-version CRDs.
func decodeCRD(u UpstreamCRD, data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("upstream CRD %s: decoding: %w", u.origin(), err)
	}
	if crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || crd.Kind != "CustomResourceDefinition" {
		return nil, fmt.Errorf("upstream CRD %s: is %s %s, not an apiextensions.k8s.io/v1 CustomResourceDefinition",
			u.origin(), crd.APIVersion, crd.Kind)
	}
	if crd.Name != u.Name {
		return nil, fmt.Errorf("upstream CRD %s: the file defines %q", u.origin(), crd.Name)
	}
	if len(u.Labels) > 0 {
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		maps.Copy(crd.Labels, u.Labels)
	}
	if c := crd.Spec.Conversion; c != nil && (c.Strategy == apiextensionsv1.WebhookConverter || c.Webhook != nil) {
		crd.Spec.Conversion = nil
	}
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	return crd, nil
}
