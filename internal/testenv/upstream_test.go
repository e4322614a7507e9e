package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// wantProviderCRDs is what the renderer's objects need, written out by hand so a change
// to the upstream list has to be made twice on purpose.
var wantProviderCRDs = map[string]struct {
	group, kind string
	labels      map[string]string
}{
	"clusters.cluster.x-k8s.io":            {"cluster.x-k8s.io", "Cluster", nil},
	"machinedeployments.cluster.x-k8s.io":  {"cluster.x-k8s.io", "MachineDeployment", nil},
	"machinesets.cluster.x-k8s.io":         {"cluster.x-k8s.io", "MachineSet", nil},
	"machines.cluster.x-k8s.io":            {"cluster.x-k8s.io", "Machine", nil},
	"machinehealthchecks.cluster.x-k8s.io": {"cluster.x-k8s.io", "MachineHealthCheck", nil},
	"kubevirtmachinetemplates.infrastructure.cluster.x-k8s.io": {"infrastructure.cluster.x-k8s.io", "KubevirtMachineTemplate", map[string]string{
		"cluster.x-k8s.io/provider": "kubevirt",
		"cluster.x-k8s.io/v1alpha1": "v1alpha1",
		"cluster.x-k8s.io/v1alpha2": "v1alpha1",
		"cluster.x-k8s.io/v1alpha3": "v1alpha1",
		"cluster.x-k8s.io/v1alpha4": "v1alpha1",
		"cluster.x-k8s.io/v1beta1":  "v1alpha1",
	}},
	"kubevirtclusters.infrastructure.cluster.x-k8s.io": {"infrastructure.cluster.x-k8s.io", "KubevirtCluster", map[string]string{
		"cluster.x-k8s.io/provider": "kubevirt",
		"cluster.x-k8s.io/v1alpha1": "v1alpha1",
		"cluster.x-k8s.io/v1alpha2": "v1alpha1",
		"cluster.x-k8s.io/v1alpha3": "v1alpha1",
		"cluster.x-k8s.io/v1alpha4": "v1alpha1",
		"cluster.x-k8s.io/v1beta1":  "v1alpha1",
	}},
	"kubevirtmachines.infrastructure.cluster.x-k8s.io": {"infrastructure.cluster.x-k8s.io", "KubevirtMachine", map[string]string{
		"cluster.x-k8s.io/provider": "kubevirt",
		"cluster.x-k8s.io/v1alpha1": "v1alpha1",
		"cluster.x-k8s.io/v1alpha2": "v1alpha1",
		"cluster.x-k8s.io/v1alpha3": "v1alpha1",
		"cluster.x-k8s.io/v1alpha4": "v1alpha1",
		"cluster.x-k8s.io/v1beta1":  "v1alpha1",
	}},
	"talosconfigtemplates.bootstrap.cluster.x-k8s.io": {"bootstrap.cluster.x-k8s.io", "TalosConfigTemplate", map[string]string{
		"cluster.x-k8s.io/v1alpha3": "v1alpha3",
		"cluster.x-k8s.io/v1alpha4": "v1alpha3",
		"cluster.x-k8s.io/v1beta1":  "v1alpha3",
	}},
	"talosconfigs.bootstrap.cluster.x-k8s.io": {"bootstrap.cluster.x-k8s.io", "TalosConfig", map[string]string{
		"cluster.x-k8s.io/v1alpha3": "v1alpha3",
		"cluster.x-k8s.io/v1alpha4": "v1alpha3",
		"cluster.x-k8s.io/v1beta1":  "v1alpha3",
	}},
	"kairosconfigtemplates.bootstrap.cluster.x-k8s.io": {"bootstrap.cluster.x-k8s.io", "KairosConfigTemplate", map[string]string{
		"cluster.x-k8s.io/v1beta1": "v1beta2",
		"cluster.x-k8s.io/v1beta2": "v1beta2",
	}},
	"kairosconfigs.bootstrap.cluster.x-k8s.io": {"bootstrap.cluster.x-k8s.io", "KairosConfig", map[string]string{
		"cluster.x-k8s.io/v1beta1": "v1beta2",
		"cluster.x-k8s.io/v1beta2": "v1beta2",
	}},
	"kamajicontrolplanes.controlplane.cluster.x-k8s.io": {"controlplane.cluster.x-k8s.io", "KamajiControlPlane", map[string]string{
		"cluster.x-k8s.io/v1beta2": "v1alpha2",
	}},
	"proxmoxmachinetemplates.infrastructure.cluster.x-k8s.io": {"infrastructure.cluster.x-k8s.io", "ProxmoxMachineTemplate", map[string]string{
		"cluster.x-k8s.io/v1beta1": "v1alpha2",
		"cluster.x-k8s.io/v1beta2": "v1alpha2",
	}},
	"proxmoxclusters.infrastructure.cluster.x-k8s.io": {"infrastructure.cluster.x-k8s.io", "ProxmoxCluster", map[string]string{
		"cluster.x-k8s.io/v1beta1": "v1alpha2",
		"cluster.x-k8s.io/v1beta2": "v1alpha2",
	}},
}

func TestProviderCRDs(t *testing.T) {
	crds, err := ProviderCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != len(wantProviderCRDs) {
		t.Errorf("got %d CRDs, want %d", len(crds), len(wantProviderCRDs))
	}
	seen := map[string]bool{}
	for _, crd := range crds {
		want, ok := wantProviderCRDs[crd.Name]
		if !ok {
			t.Errorf("unexpected CRD %s", crd.Name)
			continue
		}
		seen[crd.Name] = true
		if crd.Spec.Group != want.group || crd.Spec.Names.Kind != want.kind {
			t.Errorf("%s: group/kind %s/%s, want %s/%s", crd.Name, crd.Spec.Group, crd.Spec.Names.Kind, want.group, want.kind)
		}
		for k, v := range want.labels {
			if got, ok := crd.Labels[k]; !ok || got != v {
				t.Errorf("%s: label %s=%q, want %q", crd.Name, k, got, v)
			}
		}
		if want.labels == nil {
			for k := range crd.Labels {
				if strings.HasPrefix(k, "cluster.x-k8s.io/") {
					t.Errorf("%s: core CRD got contract label %s", crd.Name, k)
				}
			}
		}
		if c := crd.Spec.Conversion; c != nil && (c.Strategy != apiextensionsv1.NoneConverter || c.Webhook != nil) {
			t.Errorf("%s: still has a conversion webhook: %+v", crd.Name, c)
		}
		if len(crd.Status.Conditions) > 0 || len(crd.Status.StoredVersions) > 0 || crd.Status.AcceptedNames.Kind != "" {
			t.Errorf("%s: status not dropped: %+v", crd.Name, crd.Status)
		}
	}
	for name := range wantProviderCRDs {
		if !seen[name] {
			t.Errorf("missing CRD %s", name)
		}
	}

	// Each call must return fresh objects: installing one fills in its resourceVersion.
	crds[0].ResourceVersion = "42"
	again, err := ProviderCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if again[0].ResourceVersion != "" {
		t.Error("ProviderCRDs returned the cached object itself, not a copy")
	}
}

// TestUpstreamSources pins the hard rule on where each CRD comes from: CAPI core and CAPK
// from their Go modules, everything else (capmox too) from a pinned raw GitHub URL.
func TestUpstreamSources(t *testing.T) {
	for _, u := range UpstreamCRDs() {
		_, group, _ := strings.Cut(u.Name, ".")
		switch group {
		case "cluster.x-k8s.io":
			if u.Module != "sigs.k8s.io/cluster-api" || u.Version != "v1.14.2" {
				t.Errorf("%s: from %s@%s, want the sigs.k8s.io/cluster-api@v1.14.2 module", u.Name, u.Module, u.Version)
			}
		case "infrastructure.cluster.x-k8s.io":
			if strings.HasPrefix(u.Name, "proxmox") {
				if u.Module != "" || u.Repo != "ionos-cloud/cluster-api-provider-proxmox" || u.Ref != "v0.9.0" {
					t.Errorf("%s: want a pinned download of capmox v0.9.0, got %+v", u.Name, u)
				}
				break
			}
			if u.Module != "sigs.k8s.io/cluster-api-provider-kubevirt" || u.Version != "v0.11.2" {
				t.Errorf("%s: from %s@%s, want the CAPK v0.11.2 module", u.Name, u.Module, u.Version)
			}
		default:
			if u.Module != "" || u.Repo == "" || u.Ref == "" {
				t.Errorf("%s: want a pinned GitHub download, got %+v", u.Name, u)
			}
			if got := u.URL(DefaultCRDBaseURL); !strings.HasPrefix(got, "https://raw.githubusercontent.com/"+u.Repo+"/"+u.Ref+"/config/crd/bases/") {
				t.Errorf("%s: URL %s", u.Name, got)
			}
		}
		if len(u.SHA256) != 64 {
			t.Errorf("%s: sha256 %q is not 64 hex digits", u.Name, u.SHA256)
		}
	}
}

// TestUpstreamSumsMatchMirror checks every pinned sum, module files included, against the
// byte-identical copies in the local mirror, when there is one.
func TestUpstreamSumsMatchMirror(t *testing.T) {
	mirror := defaultSource().mirror
	if mirror == "" {
		t.Skip("no local CRD mirror; the sums are checked against the sources in TestProviderCRDs")
	}
	for _, u := range UpstreamCRDs() {
		data, err := os.ReadFile(filepath.Join(mirror, filepath.FromSlash(u.Mirror)))
		if errors.Is(err, fs.ErrNotExist) && u.Module != "" {
			// The mirror holds what the renderer's objects are checked against; a module
			// file beyond it is verified against the module's go.sum-pinned zip instead.
			continue
		}
		if err != nil {
			t.Error(err)
			continue
		}
		if err := verifySHA256(u, u.Mirror, data); err != nil {
			t.Error(err)
		}
	}
}

// testCRD is a small CRD carrying everything decodeCRD must remove.
const testCRD = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names:
    kind: Widget
    listKind: WidgetList
    plural: widgets
    singular: widget
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: ["v1"]
      clientConfig:
        service:
          namespace: system
          name: webhook-service
          path: /convert
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
status:
  acceptedNames:
    kind: ""
    plural: ""
  conditions: []
  storedVersions: []
`

func testUpstream(content string) UpstreamCRD {
	sum := sha256.Sum256([]byte(content))
	return UpstreamCRD{
		Name:   "widgets.example.com",
		Repo:   "example/widgets",
		Ref:    "v1.0.0",
		Path:   "config/crd/bases/example.com_widgets.yaml",
		Mirror: "widgets/example.com_widgets.yaml",
		SHA256: hex.EncodeToString(sum[:]),
		Labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1"},
	}
}

func TestDecodeCRD(t *testing.T) {
	u := testUpstream(testCRD)
	crd, err := decodeCRD(u, []byte(testCRD))
	if err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Conversion != nil {
		t.Errorf("conversion webhook kept: %+v", crd.Spec.Conversion)
	}
	if crd.Labels["cluster.x-k8s.io/v1beta2"] != "v1" {
		t.Errorf("labels %v", crd.Labels)
	}
	if crd.Status.Conditions != nil || crd.Status.StoredVersions != nil {
		t.Errorf("status kept: %+v", crd.Status)
	}
	if crd.Spec.Names.Kind != "Widget" || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		t.Errorf("spec changed: %+v", crd.Spec)
	}

	u.Name = "gadgets.example.com"
	if _, err := decodeCRD(u, []byte(testCRD)); err == nil || !strings.Contains(err.Error(), "widgets.example.com") {
		t.Errorf("a file defining another CRD was accepted: %v", err)
	}
	unknown := strings.Replace(testCRD, "  scope: Namespaced\n", "  scope: Namespaced\n  frobnicate: true\n", 1)
	if _, err := decodeCRD(testUpstream(unknown), []byte(unknown)); err == nil {
		t.Error("an unknown field was silently dropped")
	}
}

// serveCRD serves content at the upstream URL path of u and counts the requests.
func serveCRD(t *testing.T, u UpstreamCRD, content string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+u.Repo+"/"+u.Ref+"/"+u.Path {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		_, _ = w.Write([]byte(content))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestDownloadAcceptsAndCachesGoodSum(t *testing.T) {
	u := testUpstream(testCRD)
	srv, hits := serveCRD(t, u, testCRD)
	s := &source{cacheDir: t.TempDir(), baseURL: srv.URL, client: srv.Client()}

	for i := range 2 {
		data, err := s.read(u)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != testCRD {
			t.Fatalf("read %d: got other content", i)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d downloads, want 1 (the second read must come from the cache)", n)
	}
	cached, err := os.ReadFile(filepath.Join(s.cacheDir, u.SHA256+".yaml"))
	if err != nil || string(cached) != testCRD {
		t.Errorf("cache file: %v", err)
	}

	// A damaged cache file is fetched again rather than used.
	if err := os.WriteFile(filepath.Join(s.cacheDir, u.SHA256+".yaml"), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := s.read(u); err != nil || string(data) != testCRD {
		t.Errorf("after cache damage: %v", err)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("%d downloads, want 2", n)
	}
}

func TestDownloadRefusesTamperedContent(t *testing.T) {
	u := testUpstream(testCRD)
	tampered := strings.Replace(testCRD, "type: object", "type: object\n        x-kubernetes-preserve-unknown-fields: true", 1)
	srv, _ := serveCRD(t, u, tampered)
	s := &source{cacheDir: t.TempDir(), baseURL: srv.URL, client: srv.Client()}

	_, err := s.read(u)
	if err == nil {
		t.Fatal("tampered download accepted")
	}
	sum := sha256.Sum256([]byte(tampered))
	for _, want := range []string{u.SHA256, hex.EncodeToString(sum[:]), u.Path, u.URL(srv.URL)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if entries, _ := os.ReadDir(s.cacheDir); len(entries) != 0 {
		t.Errorf("tampered download was cached: %v", entries)
	}
}

func TestMirrorRefusesTamperedContent(t *testing.T) {
	u := testUpstream(testCRD)
	mirror := t.TempDir()
	path := filepath.Join(mirror, filepath.FromSlash(u.Mirror))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(testCRD), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &source{mirror: mirror, baseURL: "http://127.0.0.1:1", client: http.DefaultClient}
	if data, err := s.read(u); err != nil || string(data) != testCRD {
		t.Fatalf("good mirror file: %v", err)
	}
	if err := os.WriteFile(path, []byte(testCRD+"# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := s.read(u)
	if err == nil || !strings.Contains(err.Error(), u.SHA256) || !strings.Contains(err.Error(), path) {
		t.Errorf("tampered mirror file: %v", err)
	}
}

// TestProviderCRDsEstablished installs the upstream CRDs, as patched here, into a real
// kube-apiserver: the proof that dropping the conversion stanza and adding labels leaves
// CRDs the server accepts and serves.
func TestProviderCRDsEstablished(t *testing.T) {
	crds, err := ProviderCRDs()
	if err != nil {
		t.Fatal(err)
	}
	env, err := Start(Options{CRDs: crds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, want := range wantProviderCRDs {
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if established(crd) {
				for k, v := range want.labels {
					if crd.Labels[k] != v {
						t.Errorf("%s: installed label %s=%q, want %q", name, k, crd.Labels[k], v)
					}
				}
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never became Established: %+v", name, crd.Status.Conditions)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
