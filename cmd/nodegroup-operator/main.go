// Command nodegroup-operator runs the controllers that turn tenant NodeGroups into
// Cluster API worker pools. Flags and manager wiring only; the work is in internal/.
package main

import (
	"flag"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/inuse"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	admissionhooks "github.com/nodegroup-io/nodegroup-operator/internal/webhook"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook/certs"
)

func main() {
	var (
		metricsAddr, probeAddr   string
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
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "address of the Go profiling endpoints, /debug/pprof/ (empty: off)")
	flag.DurationVar(&syncPeriod, "sync-period", 10*time.Hour, "how often every watched object is delivered again, so every pool is reconciled without a change")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader, so only one replica reconciles at a time")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
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
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	tuneMemory()

	cacheOptions := nodegroup.CacheOptions()
	cacheOptions.SyncPeriod = &syncPeriod
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "nodegroup-operator.nodegroup.io",
		LeaderElectionNamespace: leaderElectionNamespace,
		// The process exits as soon as the manager stops, so the lease can be given up
		// then: a restarted or rolled operator takes over at once instead of waiting
		// for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOptions,
		// Secrets and webhook configurations are read one by one, by name: an informer
		// would hold every Secret of the management cluster in memory.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{
			&corev1.Secret{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
		}}},
		WebhookServer: webhook.NewServer(webhook.Options{Port: webhookPort, CertDir: webhookCertDir}),
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}

	r := &nodegroup.Reconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Catalog:             catalog.Default(),
		ManagementDNS:       types.NamespacedName{Namespace: dnsNamespace, Name: dnsService},
		ManagementDNSDomain: dnsDomain,
	}
	if err := r.Register(mgr, concurrency); err != nil {
		log.Error(err, "registering the NodeGroup controller")
		os.Exit(1)
	}
	dns := &controlplanedns.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := dns.Register(mgr); err != nil {
		log.Error(err, "registering the control-plane DNS controller")
		os.Exit(1)
	}
	inUse := &inuse.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := inUse.Register(mgr); err != nil { // after the nodegroup controller: it reuses its indexes
		log.Error(err, "registering the in-use protection controllers")
		os.Exit(1)
	}
	if webhookEnabled {
		if manageCerts {
			if webhookSecretNamespace == "" || webhookDNSNames == "" {
				log.Error(nil, "--webhook-secret-namespace (or POD_NAMESPACE) and --webhook-dns-names are needed to manage the webhook certificate")
				os.Exit(1)
			}
			if err := mgr.Add(&certs.Manager{
				Client:               mgr.GetClient(),
				Secret:               types.NamespacedName{Namespace: webhookSecretNamespace, Name: webhookSecretName},
				WebhookConfiguration: webhookConfiguration,
				DNSNames:             strings.Split(webhookDNSNames, ","),
				CertDir:              webhookCertDir,
				CAValidity:           5 * 365 * 24 * time.Hour,
				CertValidity:         90 * 24 * time.Hour,
			}); err != nil {
				log.Error(err, "adding the webhook certificate manager")
				os.Exit(1)
			}
		}
		resolver := &resolve.Resolver{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(), Catalog: catalog.Default()}
		admissionhooks.Register(mgr.GetWebhookServer(), mgr.GetClient(), resolver, admission.NewDecoder(mgr.GetScheme()))
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding the readiness check")
		os.Exit(1)
	}
	log.Info("starting", "catalog minors", catalog.Default().Minors())
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}

// tuneMemory sets how the Go runtime collects, unless GOGC or GOMEMLIMIT say otherwise.
// The operator's memory is mostly its informer caches, which live as long as it does,
// while what a reconcile allocates dies with it: Go's default lets the heap grow to
// twice the caches before a collection, so half the heap would be headroom. It
// collects at 1.25 times instead; the collections this adds come with bursts of
// reconciles, which wait on the API server anyway (hack/scale measures both). Within
// a container memory limit it also collects harder as the limit nears, at 90% of it,
// rather than be killed.
func tuneMemory() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if limit, ok := containerMemoryLimit(cgroupMemoryFiles); ok {
		debug.SetMemoryLimit(limit / 10 * 9)
	}
}

// cgroupMemoryFiles hold a container's memory limit: cgroup v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// containerMemoryLimit is the memory limit in bytes of the first of files that exists;
// ok is false when it says there is none ("max", or cgroup v1's huge "no limit").
func containerMemoryLimit(files []string) (limit int64, ok bool) {
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return limit, err == nil && limit > 0 && limit < 1<<50
	}
	return 0, false
}
