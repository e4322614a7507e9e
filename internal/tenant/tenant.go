// Package tenant reaches tenant clusters the way Cluster API does: through the
// kubeconfig in the Cluster's <cluster>-kubeconfig Secret (key "value"), one connection
// per Cluster, opened when a controller first needs it and closed when it no longer
// does.
//
// A connection caches only the objects the operator keeps in a tenant cluster, each
// watched by its name: the bootstrap token Secrets in kube-system that the cluster's
// identity names (one, two during a rotation). Nothing cluster-wide (no Nodes, no other
// Secrets, nothing a tenant's admin can multiply) is cached, so a connection costs a
// watch or two and as many small objects, and thousands of tenants fit in the
// operator's memory.
package tenant

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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

	// RequestTimeout bounds every request to a tenant API server but the watches: one
	// that does not answer must not hold a reconcile (and other tenants behind it).
	// Callers bound their requests with a context of that deadline.
	RequestTimeout = 5 * time.Second
)

// Connections holds one connection per Cluster.
type Connections struct {
	// Secrets reads the kubeconfig Secrets in the management cluster.
	Secrets client.Reader
	// Versions, when set, is a cache that watches Secrets (as metadata at least): Get
	// then reuses the Cluster's open connection without reading its kubeconfig Secret
	// with Secrets when the cache holds the Secret at the version the connection was
	// made from, so a look at a cluster whose kubeconfig did not change sends no request
	// to the management API server. Otherwise (no connection, another Cluster UID,
	// another version, or the cache does not hold the Secret) Get reads it with Secrets.
	Versions client.Reader
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
	// memory for nothing. Bound its requests with RequestTimeout.
	Client corev1client.CoreV1Interface

	uid        types.UID
	kubeconfig string // the resourceVersion of the kubeconfig Secret it was made from
	ctx        context.Context
	stop       context.CancelFunc
	changed    func()
	// watcher is Client without a request timeout, for watches, which last minutes.
	watcher corev1client.CoreV1Interface

	mu      sync.Mutex
	watched map[string]*follower
	watchOK bool
	lastErr error
}

// follower follows one Secret by name.
type follower struct {
	stop   context.CancelFunc
	synced bool
	obj    *corev1.Secret // nil when it does not exist
}

// Get returns the connection to the Cluster's tenant, opening it (or opening it again,
// when the kubeconfig Secret changed) as needed. The connection's cache fills in the
// background: check HasSynced.
func (c *Connections) Get(ctx context.Context, cluster types.NamespacedName, uid types.UID) (*Conn, error) {
	key := types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name + KubeconfigSuffix}
	if conn := c.current(ctx, cluster, key, uid); conn != nil {
		return conn, nil
	}
	secret := &corev1.Secret{}
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

// current is the Cluster's open connection when Versions holds the kubeconfig Secret
// at the version the connection was made from, or nil.
func (c *Connections) current(ctx context.Context, cluster, key types.NamespacedName, uid types.UID) *Conn {
	if c.Versions == nil {
		return nil
	}
	c.mu.Lock()
	conn := c.conns[cluster]
	c.mu.Unlock()
	if conn == nil || conn.uid != uid {
		return nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.Versions.Get(ctx, key, m); err != nil || m.ResourceVersion != conn.kubeconfig {
		return nil
	}
	return conn
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

func (c *Connections) open(cluster types.NamespacedName, uid types.UID, secret *corev1.Secret) (*Conn, error) {
	data := secret.Data[KubeconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("the Secret %s/%s has no %q key", secret.Namespace, secret.Name, KubeconfigKey)
	}
	cfg, err := restConfig(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig in %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	cfg.UserAgent = c.UserAgent
	cfg.QPS, cfg.Burst = 5, 10
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	conn := &Conn{Client: core, watcher: core, uid: uid, kubeconfig: secret.ResourceVersion, ctx: ctx, stop: stop,
		watched: map[string]*follower{}, watchOK: true}
	conn.changed = func() {
		if ctx.Err() == nil && c.Changed != nil {
			c.Changed(cluster)
		}
	}
	return conn, nil
}

// restConfig reads a kubeconfig as Cluster API's does, but only what it holds inline:
// its server, CA, client certificate and key, or token. Anything that would make the
// operator run a command (exec, auth providers), read one of its own files (token,
// certificate or CA paths: its ServiceAccount token among them), go through a proxy or
// impersonate is refused: whoever can write a Cluster's kubeconfig Secret must not get
// the operator's own credentials or a shell in its Pod.
func restConfig(data []byte) (*rest.Config, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	ctxName := kc.CurrentContext
	kctx := kc.Contexts[ctxName]
	if kctx == nil {
		return nil, fmt.Errorf("no current context")
	}
	cluster, user := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	if cluster == nil || user == nil {
		return nil, fmt.Errorf("context %q names no cluster or no user", ctxName)
	}
	var refused []string
	for what, set := range map[string]bool{
		"certificate-authority (a file)": cluster.CertificateAuthority != "",
		"proxy-url":                      cluster.ProxyURL != "",
		"exec":                           user.Exec != nil,
		"auth-provider":                  user.AuthProvider != nil,
		"tokenFile":                      user.TokenFile != "",
		"client-certificate (a file)":    user.ClientCertificate != "",
		"client-key (a file)":            user.ClientKey != "",
		"as (impersonation)":             user.Impersonate != "" || user.ImpersonateUID != "" || len(user.ImpersonateGroups) > 0 || len(user.ImpersonateUserExtra) > 0,
		"username and password":          user.Username != "" || user.Password != "",
	} {
		if set {
			refused = append(refused, what)
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return nil, fmt.Errorf("it uses %s: only a server, a CA, a client certificate and key and a token given inline are accepted", strings.Join(refused, ", "))
	}
	return &rest.Config{
		Host: cluster.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: cluster.CertificateAuthorityData, CertData: user.ClientCertificateData, KeyData: user.ClientKeyData,
			ServerName: cluster.TLSServerName, Insecure: cluster.InsecureSkipTLSVerify,
		},
		BearerToken: user.Token,
	}, nil
}

// CleanKubeconfig is the kubeconfig in data reduced to what restConfig accepts (a
// server, a CA, a client certificate and key or a token, all inline), written anew: what
// the operator hands on to a process of its own making (a cluster's autoscaler), so a
// kubeconfig Secret's writer cannot make that process run a command, read its
// ServiceAccount token from a file or send it through a proxy. A kubeconfig restConfig
// refuses is refused here with the same error.
func CleanKubeconfig(data []byte) ([]byte, error) {
	cfg, err := restConfig(data)
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["tenant"] = &clientcmdapi.Cluster{
		Server: cfg.Host, CertificateAuthorityData: cfg.CAData, TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure,
	}
	kc.AuthInfos["tenant"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["tenant"] = &clientcmdapi.Context{Cluster: "tenant", AuthInfo: "tenant"}
	kc.CurrentContext = "tenant"
	return clientcmd.Write(*kc)
}

// Follow makes the connection watch exactly the token Secrets of these names in the
// tenant's kube-system, starting and stopping watches as the set changes.
func (c *Conn) Follow(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
		if c.watched[n] == nil {
			ctx, stop := context.WithCancel(c.ctx)
			f := &follower{stop: stop}
			c.watched[n] = f
			go c.follow(ctx, n, f)
		}
	}
	for n, f := range c.watched {
		if !want[n] {
			f.stop()
			delete(c.watched, n)
		}
	}
}

// HasSynced tells whether every followed Secret has been read once.
func (c *Conn) HasSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.watched {
		if !f.synced {
			return false
		}
	}
	return true
}

// Token is the cached Secret of that name, nil when it does not exist or is not
// followed.
func (c *Conn) Token(name string) *corev1.Secret {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.watched[name]; f != nil {
		return f.obj
	}
	return nil
}

// follow reads the Secret name, then watches it from the version read, again and again
// until ctx ends: after a watch ends it watches on from the last version seen, and
// reads again when that version is gone. A failure, and a watch that ends at once
// without an event (what a tenant that resets connections gives), is reported and
// waited out with a backoff that grows to 30 s. Each change and each failure is told
// to changed.
func (c *Conn) follow(ctx context.Context, name string, f *follower) {
	secrets := c.watcher.Secrets(metav1.NamespaceSystem)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 6, Cap: 30 * time.Second}
	}
	backoff := newBackoff()
	fail := func(err error) {
		if ctx.Err() != nil {
			return
		}
		c.failed(err)
		c.changed()
		select {
		case <-ctx.Done():
		case <-time.After(backoff.Step()):
		}
	}
	version := ""
	for ctx.Err() == nil {
		if version == "" {
			reqCtx, cancel := context.WithTimeout(ctx, RequestTimeout)
			list, err := secrets.List(reqCtx, metav1.ListOptions{FieldSelector: selector})
			cancel()
			if err != nil {
				fail(err)
				continue
			}
			var obj *corev1.Secret
			if len(list.Items) == 1 {
				obj = &list.Items[0]
			}
			c.store(f, obj, true)
			version = list.ResourceVersion
		}
		// The server ends a watch after its timeout, randomized as client-go's
		// reflector does, so the watches of thousands of tenants do not renew together.
		timeout := int64(300 + rand.IntN(300))
		started := time.Now()
		w, err := secrets.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: version,
			AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			version = ""
			continue
		}
		if err != nil {
			fail(err)
			continue
		}
		var events int
		version, events = c.drain(w, f, version)
		switch {
		case version == "":
			// Gone: read again at once.
		case events == 0 && time.Since(started) < 10*time.Second:
			fail(fmt.Errorf("the watch of the Secret %s ended at once", name))
		default:
			backoff = newBackoff()
		}
	}
}

// drain applies a watch's events until it ends, and returns the version to watch on
// from (empty when the watch said the version is gone) and how many events it gave.
func (c *Conn) drain(w watch.Interface, f *follower, version string) (string, int) {
	defer w.Stop()
	events := 0
	for ev := range w.ResultChan() {
		events++
		switch ev.Type {
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return "", events
			}
			c.failed(err)
			c.changed()
			return version, 0 // counts as a watch that ended at once: backed off
		case watch.Bookmark, watch.Added, watch.Modified, watch.Deleted:
			s, ok := ev.Object.(*corev1.Secret)
			if !ok {
				continue
			}
			version = s.ResourceVersion
			switch ev.Type {
			case watch.Bookmark:
				c.recovered()
			case watch.Deleted:
				c.store(f, nil, false)
			default:
				c.store(f, s, false)
			}
		}
	}
	return version, events
}

// store records what a follower read and tells changed.
func (c *Conn) store(f *follower, obj *corev1.Secret, listed bool) {
	c.mu.Lock()
	f.obj = obj
	if listed {
		f.synced = true
	}
	c.watchOK, c.lastErr = true, nil
	c.mu.Unlock()
	c.changed()
}

// Wrote records a Secret the controller just wrote (nil: deleted), so the next
// reconcile, which may come before the watch's event, does not write it again.
func (c *Conn) Wrote(name string, obj *corev1.Secret) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.watched[name]; f != nil {
		f.obj = obj
	}
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

// Probe asks the tenant API server for at most one object, to tell whether it answers
// now: a watch reports a failure only when it next reconnects.
func (c *Conn) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
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
