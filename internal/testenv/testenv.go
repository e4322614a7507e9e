// Package testenv starts a real kube-apiserver and etcd for tests (controller-runtime's
// envtest), with this project's CRDs installed, so CEL rules, defaulting, server-side
// apply and strict field validation are exercised by the real API server.
//
// The binaries come from hack/testbin.sh, which builds them from the Go module proxy and
// caches them outside the clone. KUBEBUILDER_ASSETS, when set, names a folder that
// already holds them. A failure to build or start is a test failure, never a skip.
package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
)

// RepoRoot is the root of this repository, found from this file's location so tests work
// from any package folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	assetsOnce sync.Once
	assetsDir  string
	assetsErr  error
)

// Assets returns the folder holding etcd and kube-apiserver, building them when needed.
func Assets() (string, error) {
	assetsOnce.Do(func() {
		if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
			assetsDir = dir
			return
		}
		cmd := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "testbin.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			assetsErr = fmt.Errorf("building the test control plane with hack/testbin.sh: %w", err)
			return
		}
		assetsDir = strings.TrimSpace(string(out))
	})
	return assetsDir, assetsErr
}

// Scheme holds the operator's kinds (internal/scheme) and the CRD kind.
func Scheme() *k8sruntime.Scheme {
	s := scheme.New()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment

	beforeStop []func()
}

// Options say what to install besides this project's CRDs.
type Options struct {
	// CRDPaths are extra files or folders of CRDs to install.
	CRDPaths []string
	// CRDs are extra CRD objects to install (for example upstream CRDs with labels added).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// WithoutProjectCRDs leaves this project's CRDs out, for a caller that installs them
	// through their chart (internal/localrun, a Helm install).
	WithoutProjectCRDs bool
	// APIServerArgs are kube-apiserver flags, each replacing envtest's value of that flag
	// (for example an audit log, or a service range wider than envtest's /24).
	APIServerArgs map[string][]string
}

// CRDDir is the folder of this project's CRDs: the templates of the chart
// nodegroup-operator-crds, which `make generate` writes as plain YAML (no template
// directives), so they are installed here as they are.
func CRDDir() string {
	return filepath.Join(RepoRoot(), "charts", "nodegroup-operator-crds", "templates")
}

// Start starts etcd and kube-apiserver and installs the CRDs.
func Start(opts Options) (*Env, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     opts.CRDPaths,
		CRDs:                  opts.CRDs,
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	if !opts.WithoutProjectCRDs {
		env.CRDDirectoryPaths = append([]string{CRDDir()}, opts.CRDPaths...)
	}
	for flag, values := range opts.APIServerArgs {
		env.ControlPlane.GetAPIServer().Configure().Set(flag, values...)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, env: env}, nil
}

// BeforeStop registers f to run before the control plane stops, such as cancelling a
// manager that talks to it (a client still watching slows the API server's shutdown).
func (e *Env) BeforeStop(f func()) { e.beforeStop = append(e.beforeStop, f) }

// Stop stops the control plane.
func (e *Env) Stop() error {
	for _, f := range e.beforeStop {
		f()
	}
	return e.env.Stop()
}

// ServerVersion reports the API server's gitVersion, proving which server answered.
func (e *Env) ServerVersion(ctx context.Context) (string, error) {
	rc, err := rest.RESTClientFor(restConfigForDiscovery(e.Config))
	if err != nil {
		return "", err
	}
	body, err := rc.Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return "", err
	}
	var info struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return "", err
	}
	return info.GitVersion, nil
}

func restConfigForDiscovery(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return c
}

// KubeConfig is a kubeconfig for the control plane's admin user, for processes started
// beside it (the operator binary, kubectl).
func (e *Env) KubeConfig() []byte { return e.env.KubeConfig }

// Main is a test package's TestMain: it starts the control plane (with the upstream
// provider CRDs when withProviders), hands it to started, runs the tests and stops it.
// A control plane that cannot start fails the package; it never skips.
func Main(m *testing.M, withProviders bool, started func(*Env) error) {
	// Controllers under test log through controller-runtime; keep their output out of
	// the test log unless a test fails loudly on its own.
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	var opts Options
	if withProviders {
		crds, err := ProviderCRDs()
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: upstream provider CRDs:", err)
			os.Exit(1)
		}
		opts.CRDs = crds
	}
	env, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: no test API server:", err)
		os.Exit(1)
	}
	v, err := env.ServerVersion(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the test API server does not answer /version:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "API server under test: kube-apiserver", v)
	if started != nil {
		if err := started(env); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: setting up the test package:", err)
			_ = env.Stop()
			os.Exit(1)
		}
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test API server:", err)
	}
	os.Exit(code)
}
