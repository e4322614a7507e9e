package simulator

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The identities the simulated providers talk to tenant API servers as (the user agent
// names them in the tenant's audit log and managed fields).
const (
	agentKamaji = "kamaji (simulated)"
	agentCAPK   = "cluster-api-provider-kubevirt (simulated)"
	agentKairos = "cluster-api-provider-kairos (simulated)"
)

// remoteTimeout bounds every request to a tenant API server: one that is down must not
// hold a reconcile.
const remoteTimeout = 5 * time.Second

// remotes are clients to tenant API servers, one per kubeconfig and user agent, made
// when first needed and kept (a kubeconfig that changes makes a new one).
type remotes struct {
	mu      sync.Mutex
	clients map[[sha256.Size]byte]kubernetes.Interface
}

func (r *remotes) forKubeconfig(kubeconfig []byte, agent string) (kubernetes.Interface, error) {
	key := sha256.Sum256(append([]byte(agent+"\n"), kubeconfig...))
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[key]; c != nil {
		return c, nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(withAgent(cfg, agent))
	if err != nil {
		return nil, err
	}
	if r.clients == nil {
		r.clients = map[[sha256.Size]byte]kubernetes.Interface{}
	}
	r.clients[key] = c
	return c, nil
}

func withAgent(cfg *rest.Config, agent string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent, cfg.Timeout = agent, remoteTimeout
	return cfg
}

// workloadCluster is a provider's client to a Cluster's tenant, as Cluster API's
// providers make it: from the <cluster>-kubeconfig Secret. It is nil, without an error,
// while that Secret does not exist.
func (s *sim) workloadCluster(ctx context.Context, namespace, cluster, agent string) (kubernetes.Interface, error) {
	secret := &corev1.Secret{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster + kubeconfigSuffix}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	kubeconfig := secret.Data[dataKey]
	if len(kubeconfig) == 0 {
		return nil, fmt.Errorf("the Secret %s has no %q key", secret.Name, dataKey)
	}
	return s.remotes.forKubeconfig(kubeconfig, agent)
}
