// Command nodegroup-operator runs the controllers that turn tenant NodeGroups into
// Cluster API worker pools. Flags and manager wiring only; the work is in internal/.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	autoscalerctl "github.com/nodegroup-io/nodegroup-operator/internal/controller/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/inuse"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodelink"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/satellite"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
	"github.com/nodegroup-io/nodegroup-operator/internal/metricsauth"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
	admissionhooks "github.com/nodegroup-io/nodegroup-operator/internal/webhook"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook/certs"
)

func main() {
	var (
		metricsAddr, probeAddr   string
		metricsSecure            bool
		pprofAddr                string
		syncPeriod               time.Duration
		leaderElect              bool
		leaderElectionNamespace  string
		dnsNamespace, dnsService string
		dnsDomain                string
		concurrency              int
		webhookEnabled           bool
		manageCerts              bool
		webhookPort              int
		webhookCertDir           string
		webhookSecretNamespace   string
		webhookSecretName        string
		webhookConfiguration     string
		webhookDNSNames          string
		webhookCertValidity      time.Duration
		webhookCAValidity        time.Duration
		autoscalerSettings       string
		maxPoolsPerNamespace     int
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (0 disables it)")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients the API server authenticates and authorizes (get on /metrics); false: plain HTTP, to anyone")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "address of the Go profiling endpoints, /debug/pprof/ (empty: off)")
	flag.DurationVar(&syncPeriod, "sync-period", 10*time.Hour, "how often every watched object is delivered again, so every pool is reconciled without a change")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader, so only one replica reconciles at a time")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the leader election lease (default: POD_NAMESPACE, the pod's namespace)")
	flag.StringVar(&dnsNamespace, "management-dns-namespace", "kube-system", "namespace of the management cluster's DNS Service")
	flag.StringVar(&dnsService, "management-dns-service", "kube-dns", "name of the management cluster's DNS Service, the workers' nameserver (empty: none)")
	flag.StringVar(&dnsDomain, "management-dns-domain", "cluster.local", "DNS domain of the management cluster")
	flag.IntVar(&concurrency, "concurrency", nodegroup.DefaultConcurrency(), "pools reconciled in parallel")
	flag.BoolVar(&webhookEnabled, "enable-webhook", true, "serve the validating admission webhook")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "port of the admission webhook")
	flag.StringVar(&webhookCertDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"), "folder of the webhook's tls.crt and tls.key")
	flag.BoolVar(&manageCerts, "webhook-manage-certs", true, "issue and renew the webhook certificate and its caBundle (false: cert-manager does)")
	flag.StringVar(&webhookSecretNamespace, "webhook-secret-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Secret holding the webhook CA and certificate")
	flag.StringVar(&webhookSecretName, "webhook-secret-name", "nodegroup-operator-webhook-certs", "name of the Secret holding the webhook CA and certificate")
	flag.StringVar(&webhookConfiguration, "webhook-configuration", "nodegroup-operator", "ValidatingWebhookConfiguration whose caBundle is kept")
	flag.StringVar(&webhookDNSNames, "webhook-dns-names", "", "comma-separated DNS names of the webhook Service the certificate is issued for")
	flag.DurationVar(&webhookCertValidity, "webhook-cert-validity", 90*24*time.Hour, "lifetime of the webhook serving certificate; renewed with a third left")
	flag.StringVar(&autoscalerSettings, "autoscaler-settings", "", "the managed cluster-autoscaler's settings as JSON, the chart's autoscaler values (empty: upstream's defaults)")
	flag.DurationVar(&webhookCAValidity, "webhook-ca-validity", 5*365*24*time.Hour, "lifetime of the webhook CA; renewed with a third left, the old and the new CA trusted until every replica serves a certificate of the new one")
	flag.IntVar(&maxPoolsPerNamespace, "max-pools-per-namespace", 0, "the admission webhook refuses to create a pool in a namespace that holds this many (0: no limit)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	tuneMemory()

	restConfig := ctrl.GetConfigOrDie()
	ctx := ctrl.SetupSignalHandler()
	webhookOptions := webhook.Options{Port: webhookPort, CertDir: webhookCertDir}
	var certManager *certs.Manager
	if webhookEnabled && manageCerts {
		var err error
		if webhookSecretNamespace == "" || webhookDNSNames == "" {
			log.Error(nil, "--webhook-secret-namespace (or POD_NAMESPACE) and --webhook-dns-names are needed to manage the webhook certificate")
			os.Exit(1)
		}
		certManager, err = startCertManager(ctx, restConfig, &certs.Manager{
			Secret:               types.NamespacedName{Namespace: webhookSecretNamespace, Name: webhookSecretName},
			WebhookConfiguration: webhookConfiguration,
			DNSNames:             strings.Split(webhookDNSNames, ","),
			Identity:             replicaName(),
			CAValidity:           webhookCAValidity,
			CertValidity:         webhookCertValidity,
		})
		if err != nil {
			log.Error(err, "starting the webhook certificate manager")
			os.Exit(1)
		}
		// The pair is served from memory, the Secret's as the manager last saw it.
		webhookOptions.TLSOpts = []func(*tls.Config){certManager.TLSConfig}
	}

	settings, err := autoscaler.ParseSettings(autoscalerSettings)
	if err != nil {
		log.Error(err, "reading --autoscaler-settings")
		os.Exit(1)
	}
	// The manager's scheme, cache, client and field indexes are the operator's, decided
	// once in internal/operator for every controller below (and for the test suites).
	mgrOptions := operator.ManagerOptions()
	mgrOptions.Cache.SyncPeriod = &syncPeriod
	mgrOptions.Metrics = metricsOptions(metricsAddr, metricsSecure)
	mgrOptions.HealthProbeBindAddress = probeAddr
	mgrOptions.PprofBindAddress = pprofAddr
	mgrOptions.LeaderElection = leaderElect
	mgrOptions.LeaderElectionID = "nodegroup-operator.nodegroup.io"
	mgrOptions.LeaderElectionNamespace = leaderElectionNamespace
	// The process exits as soon as the manager stops, so the lease can be given up
	// then: a restarted or rolled operator takes over at once instead of waiting for
	// the lease to expire.
	mgrOptions.LeaderElectionReleaseOnCancel = true
	mgrOptions.WebhookServer = webhook.NewServer(webhookOptions)
	mgr, err := ctrl.NewManager(restConfig, mgrOptions)
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	if err := operator.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		log.Error(err, "registering the field indexes")
		os.Exit(1)
	}

	tenants := tenant.NewStatus()
	r := &nodegroup.Reconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Catalog:             catalog.Default(),
		ManagementDNS:       types.NamespacedName{Namespace: dnsNamespace, Name: dnsService},
		ManagementDNSDomain: dnsDomain,
		Tenants:             tenants,
	}
	if err := r.Register(mgr, concurrency); err != nil {
		log.Error(err, "registering the NodeGroup controller")
		os.Exit(1)
	}
	identity := &joinidentity.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Status: tenants}
	if err := identity.Register(mgr); err != nil {
		log.Error(err, "registering the Talos join identity controller")
		os.Exit(1)
	}
	scaler := &autoscalerctl.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Settings: settings, Catalog: catalog.Default(), Status: tenants}
	if err := scaler.Register(mgr); err != nil {
		log.Error(err, "registering the autoscaler controller")
		os.Exit(1)
	}
	scalerStatus := &autoscalerctl.StatusReader{Client: mgr.GetClient(), Status: tenants, Poll: settings.StatusInterval.Duration, ScanInterval: settings.ScanInterval.Duration}
	if err := scalerStatus.Register(mgr); err != nil {
		log.Error(err, "registering the autoscaler status reader")
		os.Exit(1)
	}
	dns := &controlplanedns.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := dns.Register(mgr); err != nil {
		log.Error(err, "registering the control-plane DNS controller")
		os.Exit(1)
	}
	satellites := &satellite.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := satellites.Register(mgr); err != nil {
		log.Error(err, "registering the satellite controller")
		os.Exit(1)
	}
	links := &nodelink.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := links.Register(mgr); err != nil {
		log.Error(err, "registering the node link controller")
		os.Exit(1)
	}
	inUse := &inuse.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := inUse.Register(mgr); err != nil {
		log.Error(err, "registering the in-use protection controllers")
		os.Exit(1)
	}
	// The operator's own metrics, beside controller-runtime's on the same endpoint.
	if err := metrics.Register(ctrlmetrics.Registry, &metrics.Collector{Pools: mgr.GetCache(), Tenants: tenants, Cause: nodegroup.Cause, Elected: mgr.Elected()}); err != nil {
		log.Error(err, "registering the metrics")
		os.Exit(1)
	}
	if webhookEnabled {
		admissionhooks.RegisterWith(mgr, catalog.Default(), maxPoolsPerNamespace)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	ready := healthz.Ping
	if webhookEnabled {
		// Ready only while the webhook serves, and (with a managed certificate) serves a
		// pair the webhook configuration's caBundle trusts.
		ready = mgr.GetWebhookServer().StartedChecker()
		if certManager != nil {
			ready = certManager.ReadyCheck(ready)
		}
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		log.Error(err, "adding the readiness check")
		os.Exit(1)
	}
	log.Info("starting", "catalog minors", catalog.Default().Minors())
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}

// startCertManager starts m and waits until it serves a pair: the webhook server must
// not start before, or it has nothing to serve. m keeps running until ctx ends, on
// every replica (it is not the leader's work).
func startCertManager(ctx context.Context, cfg *rest.Config, m *certs.Manager) (*certs.Manager, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	m.Client = cs
	if err := m.Validate(); err != nil {
		return nil, err
	}
	ctx = ctrllog.IntoContext(ctx, ctrl.Log)
	// A replica started while the API server is away (restarted after it lost its lease
	// in an outage, say) waits for it first: the minute below is for the Secret, and
	// the certificate's informers then list at once instead of after their backoff.
	if err := waitForAPIServer(ctx, cs.Discovery().RESTClient(), time.Second); err != nil {
		return nil, err
	}
	go func() { _ = m.Start(ctx) }()
	// Once the API server answers, within the chart's liveness budget (15s, then three
	// 20s probes), so this error, not a probe, ends a replica that reaches the API server
	// but not its Secret. No probe is served before: one that never reaches the API
	// server is ended by the kubelet's.
	select {
	case <-m.Serving():
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("no webhook serving certificate after 1m: the Secret %s could not be read or written (see the errors above)", m.Secret)
	}
}

// waitForAPIServer returns once the API server answers GET /version, asking every
// interval, or when ctx ends.
func waitForAPIServer(ctx context.Context, c rest.Interface, interval time.Duration) error {
	logged := false
	return wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		reqCtx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		err := c.Get().AbsPath("/version").Do(reqCtx).Error()
		if err != nil && !logged {
			ctrl.Log.WithName("setup").Info("waiting for the API server", "error", err.Error())
			logged = true
		}
		return err == nil, nil
	})
}

// replicaName names this replica: the Pod's name, else the host's and the process's.
func replicaName() string {
	if name := os.Getenv("POD_NAME"); name != "" {
		return name
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// tuneMemory sets how the Go runtime collects, unless GOGC or GOMEMLIMIT say otherwise.
// The operator's memory is mostly its informer caches, which live as long as it does,
// while what a reconcile allocates dies with it: Go's default lets the heap grow to
// twice the caches before a collection, so half the heap would be headroom. It
// collects at 1.25 times instead; the collections this adds come with bursts of
// reconciles, which wait on the API server anyway (hack/scale measures both). Within
// a container memory limit it also collects harder as the limit nears, at 90% of it,
// rather than be killed: the chart's Deployment passes the limit in bytes as
// CONTAINER_MEMORY_LIMIT (Downward API, resourceFieldRef limits.memory).
func tuneMemory() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if limit, ok := memoryLimit(os.Getenv("CONTAINER_MEMORY_LIMIT")); ok {
		debug.SetMemoryLimit(limit)
	}
}

// memoryLimit is the Go runtime's soft memory limit for a container memory limit of
// containerLimit bytes: 90% of it. ok is false when containerLimit is not a positive
// number of bytes (unset outside the chart's Pod).
func memoryLimit(containerLimit string) (limit int64, ok bool) {
	n, err := strconv.ParseInt(containerLimit, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n / 10 * 9, true
}

// metricsOptions serve the metrics at addr. Secure, as Cluster API serves them, over
// HTTPS (a self-signed certificate: the server is given no certificate folder) and only
// to a client whose bearer token the API server accepts (TokenReview) and who may get
// the URL (SubjectAccessReview): the chart's ClusterRole nodegroup-operator-metrics-reader
// grants that, and nodegroup-operator-metrics-auth lets the operator ask.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: metricsauth.Filter,
	}
}
