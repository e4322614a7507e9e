package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// Config is one run of the benchmark.
type Config struct {
	// Namespaces is the number of tenant namespaces; each gets PoolsPerNamespace pools.
	Namespaces, PoolsPerNamespace int
	// Concurrency is the operator's --concurrency and the bare client's parallelism;
	// 0 is the operator's default.
	Concurrency int
	// NoAPIPriority installs the chart without its FlowSchemas (apiPriority.enabled
	// false): the operator's requests then share workload-low with the churn's clients.
	NoAPIPriority bool
	// Steady is the steady-state window, holding Resyncs full resyncs.
	Steady  time.Duration
	Resyncs int
	// WaveFraction of the pools is changed in the change wave.
	WaveFraction float64
	// Churn is how long, after the steady state, an autoscaler-like client scales
	// ChurnFraction of the autoscaled pools, each every ChurnInterval, while Cluster
	// API-like status follows on their MachineDeployments; 0 runs no churn.
	Churn         time.Duration
	ChurnFraction float64
	ChurnInterval time.Duration
	// Timeout bounds each wait for a convergence.
	Timeout time.Duration
	// Quiet is how long the operator must send no write before a phase counts as over.
	Quiet time.Duration
	// Work is a folder for the operator binary, its log, kubeconfigs and the audit log.
	Work string
	// Profiles, when set, is a folder for the operator's pprof profiles.
	Profiles string
	// Log receives progress lines.
	Log io.Writer
}

func (c *Config) defaults() {
	if c.Namespaces <= 0 {
		c.Namespaces = 1000
	}
	if c.PoolsPerNamespace <= 0 {
		c.PoolsPerNamespace = 5
	}
	if c.Concurrency <= 0 {
		c.Concurrency = nodegroup.DefaultConcurrency()
	}
	if c.Steady <= 0 {
		c.Steady = 5 * time.Minute
	}
	if c.Resyncs <= 0 {
		c.Resyncs = 5
	}
	if c.WaveFraction <= 0 || c.WaveFraction > 1 {
		c.WaveFraction = 0.1
	}
	if c.ChurnFraction <= 0 || c.ChurnFraction > 1 {
		c.ChurnFraction = 0.1
	}
	if c.ChurnInterval <= 0 {
		c.ChurnInterval = 3 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Hour
	}
	if c.Quiet <= 0 {
		c.Quiet = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// harness holds what the phases of a run share.
type harness struct {
	cfg  Config
	res  *Result
	root string
	// churnStarted: the operator running is the one restarted for the churn.
	churnStarted bool

	env *testenv.Env
	// admin reads and prepares, as the control plane's admin, without a client-side
	// rate limit; bare is the bare client, a ServiceAccount like the operator.
	admin, bare client.Client
	// autoscaler and capi are the churn's clients (churnClients).
	autoscaler, capi client.Client
	// churnCounts are, per pool, the churn's changes and the operator's status writes.
	churnCounts map[*pool]*churnCount
	auditPath   string
	tail        *auditTail
	// apiserver and etcd are the control plane's process IDs, for their CPU seconds.
	apiserver, etcd int

	pools []*pool
	// jobs are the bare client's objects, pool by pool.
	jobs   []bareJob
	byKey  map[string]*pool
	tenant []string
	watch  *poolWatch
	op     *operator
	// operatorKubeconfig is the operator's credentials; webhookPort the port its
	// webhook configuration calls; webhookConfigs that configuration, applied just
	// before the cold start; metricsToken a scraper's bearer token.
	operatorKubeconfig string
	webhookPort        int
	webhookConfigs     []*unstructured.Unstructured
	metricsToken       string
	// tenantKubeconfig is every cluster's <cluster>-kubeconfig.
	tenantKubeconfig []byte
	// runs counts the operator processes started.
	runs int
	// profiles are the profiles being taken.
	profiles sync.WaitGroup

	// windows are the phases' time windows, for the audit log.
	mu      sync.Mutex
	windows []window
}

type window struct {
	name       string
	start, end time.Time
}

// Run runs the benchmark. The result is returned, partly filled, with an error too.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	if cfg.Work == "" {
		return nil, errors.New("Config.Work is required")
	}
	// The harness's own clients log nothing worth reading.
	ctrllog.SetLogger(logr.Discard())
	h := &harness{cfg: cfg, root: testenv.RepoRoot(), byKey: map[string]*pool{}}
	h.res = &Result{
		Date:              time.Now().UTC().Format(time.RFC3339),
		Commit:            gitCommit(h.root),
		Cores:             runtime.NumCPU(),
		Namespaces:        cfg.Namespaces,
		PoolsPerNamespace: cfg.PoolsPerNamespace,
		Pools:             cfg.Namespaces * cfg.PoolsPerNamespace,
		Concurrency:       cfg.Concurrency,
		APIPriority:       !cfg.NoAPIPriority,
	}
	defer h.close()
	type step struct {
		name string
		run  func(context.Context) error
	}
	steps := []step{
		{"building the operator", h.build},
		{"starting etcd and kube-apiserver with an audit log", h.startControlPlane},
		{"installing the chart (its webhook configuration at the cold start); identities of the operator, a metrics scraper and the bare client", h.identities},
		{fmt.Sprintf("creating %d tenant namespaces with %d pools each", cfg.Namespaces, cfg.PoolsPerNamespace), h.createFixtures},
		{"bare client: the pools' objects, created directly", h.runBare},
		{"operator: cold start until every pool is rendered", h.runCold},
		{fmt.Sprintf("change wave: %.0f%% of the pools", cfg.WaveFraction*100), h.runWave},
		{"operator restart: until every pool is reconciled and every controller idle", h.runRestart},
		{fmt.Sprintf("steady state: %s, %d full resyncs", cfg.Steady, cfg.Resyncs), h.runSteady},
	}
	if cfg.Churn > 0 {
		steps = append(steps, step{fmt.Sprintf("churn: %s, %.0f%% of the autoscaled pools scaled every %s", cfg.Churn, cfg.ChurnFraction*100, cfg.ChurnInterval), h.runChurn})
	}
	steps = append(steps, []step{
		{"stopping the operator", h.stopOperator},
		{"bare client again, after the operator's phases", h.runBareAgain},
		{"counting requests in the audit log", h.analyse},
	}...)
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return h.res, err
		}
		h.logf("==> %s", s.name)
		start := time.Now()
		if err := s.run(ctx); err != nil {
			return h.res, fmt.Errorf("%s: %w", s.name, err)
		}
		h.logf("    done in %s", time.Since(start).Round(100*time.Millisecond))
	}
	return h.res, nil
}

// gitCommit is the short commit checked out in root, with "+dirty" when the work tree
// has changes; empty when git cannot tell.
func gitCommit(root string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	commit, err := git("rev-parse", "--short", "HEAD")
	if err != nil || commit == "" {
		return ""
	}
	if status, err := git("status", "--porcelain"); err == nil && status != "" {
		commit += "+dirty"
	}
	return commit
}

func (h *harness) logf(format string, args ...any) { fmt.Fprintf(h.cfg.Log, format+"\n", args...) }

func (h *harness) mark(name string, start, end time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.windows = append(h.windows, window{name, start, end})
}

func (h *harness) close() {
	h.profiles.Wait()
	if h.op != nil {
		h.op.Kill()
	}
	if h.watch != nil {
		h.watch.stop()
	}
	if h.env != nil {
		if err := h.env.Stop(); err != nil {
			h.logf("stopping the control plane: %v", err)
		}
	}
}

func (h *harness) build(context.Context) error {
	return localrun.BuildOperator(h.root, filepath.Join(h.cfg.Work, "nodegroup-operator"))
}

// auditPolicy logs, without bodies, every request of the operator and every write of
// anyone else (the bare client's, the harness's), so both clients' writes cost the API
// server the same audit work.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Metadata
    users: ["` + localrun.OperatorUser + `"]
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: None
`

func (h *harness) startControlPlane(ctx context.Context) error {
	policy := filepath.Join(h.cfg.Work, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	h.auditPath = filepath.Join(h.cfg.Work, "audit.log")
	h.tail = &auditTail{path: h.auditPath}
	crds, err := testenv.ProviderCRDs()
	if err != nil {
		return err
	}
	// This project's CRDs come with the chart, from their own chart (identities).
	env, err := testenv.Start(testenv.Options{CRDs: crds, WithoutProjectCRDs: true, APIServerArgs: map[string][]string{
		"audit-policy-file": {policy},
		"audit-log-path":    {h.auditPath},
		// Never rotated (the default rotates at 100 MB): the phases read it whole.
		"audit-log-maxsize": {"1000000"},
		// One Service per tenant: envtest's /24 holds 254.
		"service-cluster-ip-range": {"10.0.0.0/16"},
		// CPU profiles of the API server (-pprof).
		"profiling": {"true"},
	}})
	if err != nil {
		return err
	}
	h.env = env
	if h.res.APIServer, err = env.ServerVersion(ctx); err != nil {
		return err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1 // no client-side rate limit: the API server is what is measured
	if h.admin, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return err
	}
	h.apiserver, h.etcd = childPID("kube-apiserver"), childPID("etcd")
	if h.apiserver == 0 || h.etcd == 0 {
		return fmt.Errorf("kube-apiserver (pid %d) or etcd (pid %d) not found among this process's children", h.apiserver, h.etcd)
	}
	return nil
}

// bareServiceAccount is the bare client's identity: a ServiceAccount like the
// operator's, so the API server authenticates and schedules (API priority and fairness)
// both clients' requests alike.
const bareServiceAccount = "scale-bare"

// tenantServiceAccount is the identity in every cluster's <cluster>-kubeconfig: the
// tenant clusters are this API server, and the operator's requests to them are told
// apart from its own by this user.
const tenantServiceAccount = "scale-tenant"

// metricsServiceAccount scrapes the operator's metrics, bound to the chart's reader role
// as a platform binds its Prometheus.
const metricsServiceAccount = "scale-metrics"

// identities installs the chart as a local run does, but for its webhook configuration:
// the pools are created before any operator runs, as on a cluster whose operator is
// being upgraded, where they were admitted long before; with the configuration in place
// the API server would refuse them (failurePolicy Fail) for want of a webhook server.
// runCold applies it just before the operator starts, which then admits the change
// wave's edits.
func (h *harness) identities(ctx context.Context) error {
	rel, err := localrun.Render(h.root, h.values(0))
	if err != nil {
		return err
	}
	if h.webhookPort, err = localrun.FreePort(); err != nil {
		return err
	}
	objs, err := rel.LocalObjects(h.webhookPort)
	if err != nil {
		return err
	}
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			h.webhookConfigs = append(h.webhookConfigs, o)
			return true
		}
		return false
	})
	if err := localrun.CreateNamespace(ctx, h.admin); err != nil {
		return err
	}
	if err := localrun.Apply(ctx, h.admin, "helm", objs); err != nil {
		return err
	}
	h.operatorKubeconfig = filepath.Join(h.cfg.Work, "operator.kubeconfig")
	if err := localrun.ServiceAccountKubeconfig(ctx, h.env.Config, h.operatorKubeconfig, 24*time.Hour); err != nil {
		return err
	}
	scraper, err := localrun.ServiceAccountConfig(ctx, h.env.Config, localrun.ReleaseNamespace, metricsServiceAccount,
		localrun.ReleaseName+"-metrics-reader", 24*time.Hour)
	if err != nil {
		return err
	}
	h.metricsToken = scraper.BearerToken
	cfg, err := localrun.ServiceAccountConfig(ctx, h.env.Config, localrun.ReleaseNamespace, bareServiceAccount, "cluster-admin", 24*time.Hour)
	if err != nil {
		return err
	}
	cfg.QPS = -1
	if h.bare, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return err
	}
	tenantCfg, err := localrun.ServiceAccountConfig(ctx, h.env.Config, localrun.ReleaseNamespace, tenantServiceAccount, "cluster-admin", 24*time.Hour)
	if err != nil {
		return err
	}
	if h.tenantKubeconfig, err = localrun.Kubeconfig(tenantCfg); err != nil {
		return err
	}
	if h.cfg.Churn > 0 {
		return h.churnClients(ctx)
	}
	return nil
}

// profileWindow is how long a CPU profile of a phase's start runs: the same for the
// bare client's phase and the operator's, so their profiles compare.
const profileWindow = 20 * time.Second

// profile saves, when profiles are asked for, a CPU profile of the first
// profileWindow of a phase from the API server and, once it runs, the operator, in
// the background; wait with h.profiles.Wait.
func (h *harness) profile(ctx context.Context, phase string) {
	if h.cfg.Profiles == "" {
		return
	}
	path := fmt.Sprintf("profile?seconds=%d", int(profileWindow/time.Second))
	h.profiles.Go(func() {
		hc, err := rest.HTTPClientFor(h.env.Config)
		if err == nil {
			err = saveProfile(ctx, hc, strings.TrimSuffix(h.env.Config.Host, "/"), path, filepath.Join(h.cfg.Profiles, phase+"-apiserver-cpu.pprof"))
		}
		if err != nil {
			h.logf("    API server CPU profile: %v", err)
		}
	})
	if h.op != nil && h.op.Alive() == nil {
		h.profiles.Go(func() {
			time.Sleep(time.Second) // the pprof endpoint starts with the manager
			if err := h.op.profile(ctx, path, filepath.Join(h.cfg.Profiles, phase+"-operator-cpu.pprof")); err != nil {
				h.logf("    operator CPU profile: %v", err)
			}
		})
	}
}

// cpu is the CPU seconds of the operator, the API server and etcd at one moment.
type cpu struct{ operator, apiserver, etcd float64 }

func (h *harness) cpuNow() cpu {
	c := cpu{apiserver: cpuSeconds(h.apiserver), etcd: cpuSeconds(h.etcd)}
	if h.op != nil {
		c.operator = cpuSeconds(h.op.Pid())
	}
	return c
}

func (c cpu) since(before cpu) CPU {
	return CPU{Operator: c.operator - before.operator, APIServer: c.apiserver - before.apiserver, Etcd: c.etcd - before.etcd}
}
