package framework

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
)

// Options tune the environment.
type Options struct {
	// Work is the folder for logs, certificates and kubeconfigs; empty makes a temporary
	// one, removed by Stop unless the run failed.
	Work string
	// Log receives one line per phase with its duration; nil discards them.
	Log func(format string, args ...any)
	// OperatorProxy puts a Proxy between the operator and the management API server
	// (Env.Proxy): the operator's kubeconfig names the proxy.
	OperatorProxy bool
}

// Env is a running end-to-end environment.
type Env struct {
	// Work holds every process's log, the kubeconfigs and Cluster API's webhook
	// certificate.
	Work string
	// Config and Client are the management cluster's admin.
	Config *rest.Config
	Client client.Client
	// Kubeconfig is the management admin kubeconfig's path, for kubectl and the bats
	// suite.
	Kubeconfig string
	// Bin holds the e2e binaries (hack/e2ebin.sh): kubectl among them.
	Bin string
	// Tenant is the tenant cluster every namespace's Clusters run on unless UseTenant
	// says otherwise: its own API server, controller-manager, scheduler and kwok, where
	// the Nodes are.
	Tenant *Tenant
	// Proxy is what the operator reaches the management API server through, when
	// Options.OperatorProxy is set.
	Proxy *Proxy

	opts   Options
	root   string
	assets string
	log    func(string, ...any)
	cp     *testenv.Env
	// cert is Cluster API's webhook certificate (the operator issues its own).
	cert  *servingCert
	procs []*localrun.Process
	// operator runs operatorBin with operatorCmd: the chart's Deployment, locally.
	operator    *localrun.Process
	operatorBin string
	operatorCmd *localrun.Command
	capiPort    int
	// inProcessLog receives controller-runtime's log of this process.
	inProcessLog *os.File
	// apiserver is the management API server once StopAPIServer has replaced envtest's
	// process with one of its own (apiserver.go).
	apiserver *managementAPIServer

	mu sync.Mutex
	// tenants are every tenant started, to stop; byNamespace the ones UseTenant assigned.
	tenants     []*Tenant
	byNamespace map[string]*Tenant
}

// Start brings the whole environment up, phase by phase, and stops what it started if a
// phase fails.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	e := &Env{root: testenv.RepoRoot(), log: opts.Log, Work: opts.Work, opts: opts}
	if e.log == nil {
		e.log = func(string, ...any) {}
	}
	if e.Work == "" {
		if e.Work, err = os.MkdirTemp("", "nodegroup-e2e-"); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (logs in %s)", err, e.Work)
			e.Stop()
		}
	}()
	// Everything that logs through controller-runtime in this process (envtest, the
	// simulator) writes to one file of the work folder.
	if e.inProcessLog, err = os.Create(filepath.Join(e.Work, "simulator.log")); err != nil {
		return nil, err
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(e.inProcessLog)))
	for _, phase := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"binaries (cached after the first build)", e.binaries},
		{"etcd and kube-apiserver with the provider CRDs", e.controlPlane},
		{"Cluster API manager with its webhooks", e.clusterAPI},
		{"kube-controller-manager", e.kubeControllers},
		{"the tenant: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok", e.tenant},
		{"the chart and the operator binary", e.operatorUp},
		{"the provider simulator", e.simulator},
	} {
		t := time.Now()
		if err := phase.run(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", phase.name, err)
		}
		e.log("e2e: %s ready in %s", phase.name, time.Since(t).Round(100*time.Millisecond))
	}
	return e, nil
}

// Stop stops every process and the control plane.
func (e *Env) Stop() {
	if e.operator != nil {
		e.operator.Stop(10 * time.Second)
	}
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].Stop(10 * time.Second)
	}
	e.mu.Lock()
	tenants := e.tenants
	e.mu.Unlock()
	for i := len(tenants) - 1; i >= 0; i-- {
		tenants[i].Stop()
	}
	if e.Proxy != nil {
		e.Proxy.Close()
	}
	e.stopRestartedAPIServer()
	if e.cp != nil {
		_ = e.cp.Stop()
	}
	if e.inProcessLog != nil {
		_ = e.inProcessLog.Close()
	}
}

// binaries builds (or finds cached) the control plane, the Cluster API manager, kwok,
// kubectl, and the operator from this tree.
func (e *Env) binaries(ctx context.Context) error {
	assets, err := e.script(ctx, "testbin.sh", "--all")
	if err != nil {
		return err
	}
	// testenv starts etcd and kube-apiserver from KUBEBUILDER_ASSETS.
	if err := os.Setenv("KUBEBUILDER_ASSETS", assets); err != nil {
		return err
	}
	e.assets = assets
	if e.Bin, err = e.script(ctx, "e2ebin.sh"); err != nil {
		return err
	}
	for _, b := range []string{"kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return fmt.Errorf("%s missing from %s: %w", b, assets, err)
		}
	}
	e.operatorBin = filepath.Join(e.Work, "nodegroup-operator")
	return localrun.BuildOperator(e.root, e.operatorBin)
}

func (e *Env) script(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(e.root, "hack", name)}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/%s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// capiGroups are the API groups whose CRDs the Cluster API core manager serves.
var capiGroups = map[string]bool{
	"cluster.x-k8s.io": true, "addons.cluster.x-k8s.io": true,
	"ipam.cluster.x-k8s.io": true, "runtime.cluster.x-k8s.io": true,
}

// controlPlane starts etcd and kube-apiserver with this project's CRDs, the provider CRDs
// the renderer's objects need, and every Cluster API core CRD (the manager watches them
// all), the latter converting through the manager's webhook.
func (e *Env) controlPlane(context.Context) error {
	var err error
	if e.cert, err = newServingCert(filepath.Join(e.Work, "webhook-certs")); err != nil {
		return err
	}
	capiPort, err := localrun.FreePort()
	if err != nil {
		return err
	}
	provider, err := testenv.ProviderCRDs()
	if err != nil {
		return err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range provider {
		if !capiGroups[crd.Spec.Group] {
			crds = append(crds, crd)
		}
		if crd.Name == "proxmoxmachinetemplates."+crd.Spec.Group {
			machine, err := proxmoxMachineCRD(crd)
			if err != nil {
				return err
			}
			crds = append(crds, machine)
		}
	}
	capi, err := e.capiCRDs(capiPort)
	if err != nil {
		return err
	}
	crds = append(crds, capi...)
	// This project's CRDs come with the chart, from their own chart (operatorUp).
	if e.cp, err = testenv.Start(testenv.Options{CRDs: crds, WithoutProjectCRDs: true}); err != nil {
		return err
	}
	e.Config, e.Client = e.cp.Config, e.cp.Client
	e.Kubeconfig = filepath.Join(e.Work, "kubeconfig")
	e.capiPort = capiPort
	return os.WriteFile(e.Kubeconfig, e.cp.KubeConfig(), 0o600)
}

// capiCRDs reads the Cluster API core CRDs shipped with the manager's build and points
// their conversion at the manager's webhook, as its kustomize patches do in a cluster.
func (e *Env) capiCRDs(port int) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(e.Bin, "capi-crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no Cluster API CRDs in %s/capi-crd", e.Bin)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		url := fmt.Sprintf("https://127.0.0.1:%d/convert", port)
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: e.cert.CAData},
				ConversionReviewVersions: []string{"v1", "v1beta1"},
			},
		}
		out = append(out, crd)
	}
	return out, nil
}

// clusterAPI registers the Cluster API admission webhooks on loopback and starts the
// manager serving them, then waits until it is ready.
func (e *Env) clusterAPI(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(e.Bin, "capi-webhook.yaml"))
	if err != nil {
		return err
	}
	hooks, err := yamldocs.Objects(data)
	if err != nil {
		return err
	}
	for _, h := range hooks {
		h.SetName("capi-" + h.GetName())
		if err := localrun.WebhooksOnLoopback(h, e.capiPort, e.cert.CAData); err != nil {
			return fmt.Errorf("%s: %w", h.GetName(), err)
		}
	}
	if err := localrun.Apply(ctx, e.Client, "e2e", hooks); err != nil {
		return err
	}
	health, err := localrun.FreePort()
	if err != nil {
		return err
	}
	diag, err := localrun.FreePort()
	if err != nil {
		return err
	}
	p, err := e.start("capi-manager", filepath.Join(e.Bin, "capi-manager"),
		"--kubeconfig", e.Kubeconfig, "--leader-elect=false",
		"--webhook-port", fmt.Sprint(e.capiPort), "--webhook-cert-dir", e.cert.Dir,
		"--health-addr", fmt.Sprintf("127.0.0.1:%d", health),
		"--diagnostics-address", fmt.Sprintf("127.0.0.1:%d", diag), "--insecure-diagnostics",
		// Template taints reach Nodes only behind this gate (DESIGN.md, provider facts).
		"--feature-gates=MachineTaintPropagation=true")
	if err != nil {
		return err
	}
	// Its readiness includes the webhook server's (controller-runtime's StartedChecker).
	return p.WaitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", health), readyTimeout)
}

// readyTimeout bounds each process's wait for readiness.
const readyTimeout = 2 * time.Minute

// kubeControllers starts the management cluster's kube-controller-manager, whose garbage
// collector cascades owner references. (Nodes, and so the scheduler and kwok, are the
// tenant's.)
func (e *Env) kubeControllers(context.Context) error {
	port, err := localrun.FreePort()
	if err != nil {
		return err
	}
	_, err = e.start("kube-controller-manager", filepath.Join(e.assets, "kube-controller-manager"),
		"--kubeconfig", e.Kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--controllers=*", "--use-service-account-credentials=false")
	return err
}

// KwokAnnotation marks the Nodes kwok keeps alive; the simulator sets it on the Nodes it
// registers, and a scenario removes it to make a Node stop heartbeating.
const KwokAnnotation = "kwok.x-k8s.io/node"

// Values are the chart values the suites install the operator with: the chart's
// defaults but for the autoscaler's timings, which are shortened so a scale-up and a
// scale-down fit in a scenario: a scan every 2 s, scale-down considered 10 s after a
// scale-up, a node unneeded for 15 s removed, and a node found unremovable while its
// pod ran looked at again after 10 s.
func Values() map[string]any {
	return map[string]any{"autoscaler": map[string]any{
		"scanInterval": "2s", "scaleDownDelayAfterAdd": "10s", "scaleDownUnneededTime": "15s", "unremovableNodeRecheckTimeout": "10s", "statusInterval": "3s",
	}}
}

// operatorUp installs the chart as a local run does (every object but the Deployment,
// the webhook configuration on loopback) and starts the operator binary with the
// Deployment's arguments and environment, as the chart's ServiceAccount.
func (e *Env) operatorUp(ctx context.Context) error {
	rel, local, err := localrun.Deploy(ctx, e.Config, e.Client, e.root, e.Work, Values(), 6*time.Hour)
	if err != nil {
		return err
	}
	local.PodName = ReleaseName + "-0"
	if e.opts.OperatorProxy {
		if e.Proxy, err = startProxy(e.Config, e.cert); err != nil {
			return err
		}
		if err := pointKubeconfig(local.Kubeconfig, e.Proxy.URL, e.Proxy.CAData); err != nil {
			return err
		}
	}
	if e.operatorCmd, err = rel.Command(local); err != nil {
		return err
	}
	return e.StartOperator(ctx)
}

// StartOperator starts the operator binary (again, after StopOperator, as a container
// restarts: same name and addresses) and waits until it is ready, which it is once its
// webhook serves a certificate the webhook configuration trusts.
func (e *Env) StartOperator(ctx context.Context) error {
	p, err := e.operatorCmd.Start(ctx, "nodegroup-operator", e.operatorBin, e.OperatorLog(), readyTimeout)
	if err != nil {
		return err
	}
	e.operator = p
	return nil
}

// StopOperator stops the operator binary the way a rollout stops a Pod (SIGTERM).
func (e *Env) StopOperator() {
	if e.operator != nil {
		e.operator.Stop(15 * time.Second)
	}
}

// KillOperator ends the operator binary at once (SIGKILL), as an OOM kill or a node's
// failure would, and waits until it has ended.
func (e *Env) KillOperator() {
	if e.operator != nil {
		e.operator.Kill()
	}
}

// OperatorReady fails unless the operator binary runs and its readiness endpoint
// answers 200.
func (e *Env) OperatorReady(ctx context.Context) error {
	if !e.OperatorRunning() {
		return fmt.Errorf("the operator is not running")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.operatorCmd.ReadyURL(), nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the operator is not ready: %s", resp.Status)
	}
	return nil
}

// OperatorRunning reports whether the operator binary is running.
func (e *Env) OperatorRunning() bool { return e.operator != nil && e.operator.Running() }

// OperatorMetrics reads the operator's metrics endpoint as a scraper holding token does
// (localrun.Command.ScrapeMetrics) and returns the exposition text.
func (e *Env) OperatorMetrics(ctx context.Context, token string) (string, error) {
	return e.operatorCmd.ScrapeMetrics(ctx, token)
}

// OperatorLog is the operator's log file.
func (e *Env) OperatorLog() string { return filepath.Join(e.Work, "nodegroup-operator.log") }

func (e *Env) start(name, bin string, args ...string) (*localrun.Process, error) {
	p, err := localrun.StartProcess(name, filepath.Join(e.Work, name+".log"), exec.Command(bin, args...))
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}

// Apply creates or updates obj by server-side apply as manager, taking ownership.
func (e *Env) Apply(ctx context.Context, manager string, obj *unstructured.Unstructured) error {
	if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(manager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}
