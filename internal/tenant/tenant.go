// Package tenant reaches tenant clusters the way Cluster API does: through the
// kubeconfig in the Cluster's <cluster>-kubeconfig Secret (key "value"), one connection
// per Cluster, opened when a controller first needs it and closed when it no longer
// does.
//
// A connection caches only what the operator keeps in a tenant cluster: the bootstrap
// token Secrets in kube-system that carry the Cluster's label. Nothing cluster-wide (no
// Nodes, no other Secrets) is cached, so a connection costs one watch and a handful of
// small objects, and thousands of tenants fit in the operator's memory.
package tenant

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// KubeconfigSuffix names a Cluster's kubeconfig Secret (<cluster>-kubeconfig), and
	// KubeconfigKey its key, as Cluster API writes and reads them.
	KubeconfigSuffix = "-kubeconfig"
	KubeconfigKey    = "value"
	// LabelCluster marks, in a tenant cluster, what the operator keeps there for one
	// management Cluster: its value is the Cluster's UID, so two Clusters that share an
	// API server (a test's, never a platform's) never touch each other's objects.
	LabelCluster = "nodegroup.io/cluster-uid"

	// requestTimeout bounds every request to a tenant API server: one that does not
	// answer must not hold a reconcile (and the pools of other tenants behind it).
	requestTimeout = 10 * time.Second
)

// Connections holds one connection per Cluster.
type Connections struct {
	// Secrets reads the kubeconfig Secrets in the management cluster.
	Secrets client.Reader
	// Changed is called with a Cluster's key when what its connection caches changes,
	// and when its watch fails: the controller that keeps those objects then looks again.
	Changed func(cluster types.NamespacedName)
	// UserAgent names the operator to tenant API servers.
	UserAgent string

	mu    sync.Mutex
	conns map[types.NamespacedName]*Conn
}

// Conn is a connection to one tenant cluster.
type Conn struct {
	// Client talks to the tenant API server, uncached. Only the core group: a full
	// clientset builds a client for every API group, which thousands of tenants pay in
	// memory for nothing.
	Client corev1client.CoreV1Interface

	uid        types.UID
	kubeconfig string // the resourceVersion of the kubeconfig Secret it was made from
	stop       context.CancelFunc

	mu      sync.Mutex
	synced  bool
	tokens  map[string]*corev1.Secret
	watchOK bool
	lastErr error
}

// Get returns the connection to the Cluster's tenant, opening it (or opening it again,
// when the kubeconfig Secret changed) as needed. The connection's cache fills in the
// background: check HasSynced.
func (c *Connections) Get(ctx context.Context, cluster types.NamespacedName, uid types.UID) (*Conn, error) {
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name + KubeconfigSuffix}
	if err := c.Secrets.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the Secret %s with the tenant cluster's kubeconfig does not exist yet (the control-plane provider writes it)", key)
		}
		return nil, fmt.Errorf("reading the Secret %s: %w", key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn := c.conns[cluster]; conn != nil {
		if conn.kubeconfig == secret.ResourceVersion && conn.uid == uid {
			return conn, nil
		}
		conn.stop()
		delete(c.conns, cluster)
	}
	conn, err := c.open(cluster, uid, secret)
	if err != nil {
		return nil, err
	}
	if c.conns == nil {
		c.conns = map[types.NamespacedName]*Conn{}
	}
	c.conns[cluster] = conn
	return conn, nil
}

// Close closes the Cluster's connection, if it has one.
func (c *Connections) Close(cluster types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn := c.conns[cluster]; conn != nil {
		conn.stop()
		delete(c.conns, cluster)
	}
}

// Open is how many connections are open.
func (c *Connections) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

func (c *Connections) open(cluster types.NamespacedName, uid types.UID, secret *corev1.Secret) (*Conn, error) {
	data := secret.Data[KubeconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("the Secret %s/%s has no %q key", secret.Namespace, secret.Name, KubeconfigKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig in %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	cfg.Timeout = requestTimeout
	cfg.UserAgent = c.UserAgent
	cfg.QPS, cfg.Burst = 5, 10
	return c.connect(cluster, uid, secret.ResourceVersion, cfg)
}

func (c *Connections) connect(cluster types.NamespacedName, uid types.UID, version string, cfg *rest.Config) (*Conn, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	conn := &Conn{Client: core, uid: uid, kubeconfig: version}
	ctx, stop := context.WithCancel(context.Background())
	conn.stop = stop
	go conn.follow(ctx, func() {
		if c.Changed != nil {
			c.Changed(cluster)
		}
	})
	return conn, nil
}

// HasSynced tells whether the connection's cache has been filled once.
func (c *Conn) HasSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// Token is the cached bootstrap token Secret of that name, nil when there is none.
func (c *Conn) Token(name string) *corev1.Secret {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens[name]
}

// Tokens are the cached bootstrap token Secrets of the Cluster.
func (c *Conn) Tokens() []*corev1.Secret {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*corev1.Secret, 0, len(c.tokens))
	for _, s := range c.tokens {
		out = append(out, s)
	}
	return out
}

// follow lists the Cluster's token Secrets, then watches them from the list's version,
// again and again until ctx ends: after a watch ends it watches on from the last version
// seen, and lists again when that version is gone. A failure waits a backoff that grows
// to 30 s. Each change, and each failure, is told to changed.
//
// This is a reflector without an informer: a tenant's cache is a handful of Secrets
// behind one watch, and an informer's queues and buffers, per tenant, would be most
// of what thousands of tenants cost.
func (c *Conn) follow(ctx context.Context, changed func()) {
	opts := metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{LabelCluster: string(c.uid)}).String(),
		FieldSelector: fields.OneTermEqualSelector("type", string(bootstrapapi.SecretTypeBootstrapToken)).String(),
	}
	secrets := c.Client.Secrets(metav1.NamespaceSystem)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 6, Cap: 30 * time.Second}
	fail := func(err error) {
		c.failed(err)
		changed()
		select {
		case <-ctx.Done():
		case <-time.After(backoff.Step()):
		}
	}
	version := ""
	for ctx.Err() == nil {
		if version == "" {
			list, err := secrets.List(ctx, opts)
			if err != nil {
				fail(err)
				continue
			}
			c.replace(list.Items)
			version = list.ResourceVersion
			changed()
		}
		w, err := secrets.Watch(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector,
			ResourceVersion: version, AllowWatchBookmarks: true})
		if err != nil {
			fail(err)
			continue
		}
		backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 6, Cap: 30 * time.Second}
		version = c.drain(w, version, changed)
	}
}

// drain applies a watch's events to the cache until it ends, and returns the version
// to watch on from: empty when the watch said the version is gone.
func (c *Conn) drain(w watch.Interface, version string, changed func()) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			if status, ok := ev.Object.(*metav1.Status); ok && status.Code == http.StatusGone {
				return ""
			}
			c.failed(apierrors.FromObject(ev.Object))
			changed()
			return version
		case watch.Bookmark, watch.Added, watch.Modified, watch.Deleted:
			s, ok := ev.Object.(*corev1.Secret)
			if !ok {
				continue
			}
			version = s.ResourceVersion
			if ev.Type == watch.Bookmark {
				continue
			}
			c.set(s, ev.Type == watch.Deleted)
			changed()
		}
	}
	return version
}

func (c *Conn) replace(items []corev1.Secret) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens = make(map[string]*corev1.Secret, len(items))
	for i := range items {
		c.tokens[items[i].Name] = &items[i]
	}
	c.synced, c.watchOK, c.lastErr = true, true, nil
}

func (c *Conn) set(s *corev1.Secret, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if deleted {
		delete(c.tokens, s.Name)
	} else {
		c.tokens[s.Name] = s
	}
	c.watchOK, c.lastErr = true, nil
}

// Err is the last error of the connection's watch, nil while it is healthy.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchOK {
		return nil
	}
	return c.lastErr
}

func (c *Conn) failed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchOK, c.lastErr = false, err
}

func (c *Conn) recovered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchOK, c.lastErr = true, nil
}

// Probe asks the tenant API server for one object, to tell whether it answers now: the
// cache's watch reports a failure only when it next reconnects.
func (c *Conn) Probe(ctx context.Context) error {
	_, err := c.Client.Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{LabelCluster: string(c.uid)}).String(), Limit: 1,
	})
	if err != nil {
		c.failed(err)
		return err
	}
	c.recovered()
	return nil
}
