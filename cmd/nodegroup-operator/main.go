// Command nodegroup-operator runs the controllers that turn tenant NodeGroups into
// Cluster API worker pools. Flags and manager wiring only; the work is in internal/.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

func main() {
	var (
		metricsAddr, probeAddr   string
		leaderElect              bool
		leaderElectionNamespace  string
		dnsNamespace, dnsService string
		dnsDomain                string
		concurrency              int
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader, so only one replica reconciles at a time")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	flag.StringVar(&dnsNamespace, "management-dns-namespace", "kube-system", "namespace of the management cluster's DNS Service")
	flag.StringVar(&dnsService, "management-dns-service", "kube-dns", "name of the management cluster's DNS Service, the workers' nameserver (empty: none)")
	flag.StringVar(&dnsDomain, "management-dns-domain", "cluster.local", "DNS domain of the management cluster")
	flag.IntVar(&concurrency, "concurrency", 4, "pools reconciled in parallel")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "nodegroup-operator.nodegroup.io",
		LeaderElectionNamespace: leaderElectionNamespace,
		Cache:                   nodegroup.CacheOptions(),
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
