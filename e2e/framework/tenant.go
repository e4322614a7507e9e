package framework

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
)

// TenantServiceCIDR is the tenant API server's service range: the one the e2e Clusters
// declare (spec.clusterNetwork.services), as Kamaji passes it to the tenant's API server.
const TenantServiceCIDR = "10.95.0.0/16"

// Controller sets for TenantOptions.Controllers.
var (
	// AllControllers is a kubeadm cluster's kube-controller-manager: the defaults and the
	// two kubeadm turns on, bootstrapsigner (signs kube-public/cluster-info for token
	// discovery) and tokencleaner (deletes expired bootstrap tokens).
	AllControllers = []string{"*", "bootstrapsigner", "tokencleaner"}
	// JoinControllers are those a Node's TLS bootstrap needs and no more: approving and
	// signing its CSR, signing cluster-info, expiring tokens. Without node lifecycle a
	// Node keeps what it registered with, the not-ready taint among it.
	JoinControllers = []string{"csrapproving", "csrsigning", "bootstrapsigner", "tokencleaner"}
)

// TenantOptions say where a tenant lives and what runs beside its API server.
type TenantOptions struct {
	// Name names the tenant's folder, its processes' logs and its kubeconfig's cluster.
	Name string
	// Work is the folder that holds the tenant's data and certificates (<Work>/<Name>/)
	// and its processes' logs (<Work>/<Name>-<process>.log).
	Work string
	// Assets holds etcd and kube-apiserver, and kube-controller-manager and
	// kube-scheduler when they run (hack/testbin.sh --all).
	Assets string
	// Controllers are kube-controller-manager's --controllers; it runs only if set.
	Controllers []string
	// Scheduler runs kube-scheduler.
	Scheduler bool
	// Kwok is the folder of the e2e binaries (hack/e2ebin.sh); when set, kwok runs there
	// against the tenant and keeps the simulated Nodes Ready.
	Kwok string
	// Audit makes the API server log every write to Nodes (with the request body) and to
	// CertificateSigningRequests (metadata only) to Tenant.AuditLog, one JSON
	// audit.k8s.io/v1 Event a line: who registered a Node, with which fields.
	Audit bool
}

// Tenant is a tenant cluster's control plane, separate from the management cluster as a
// Kamaji tenant's is: its own etcd, kube-apiserver and CA, and what TenantOptions add.
// Nodes join it through a TLS bootstrap (bootstrap tokens, CSRs its controller-manager
// signs, the Node authorizer and NodeRestriction); Cluster API reaches it only through
// the <cluster>-kubeconfig Secret the simulated Kamaji writes from Kubeconfig.
type Tenant struct {
	Name string
	// Server is the API server's URL, https://127.0.0.1:<port>.
	Server string
	// Config and Client are the tenant's admin (system:masters); Client's scheme holds
	// the client-go kinds.
	Config *rest.Config
	Client client.Client
	// Kubeconfig is the admin kubeconfig (RotateAdminKubeconfig replaces it; read it
	// through Simulated). KubeconfigPath holds the first one, which the tenant's own
	// processes keep using.
	Kubeconfig     []byte
	KubeconfigPath string
	// CACert and CAKey are the tenant's Kubernetes CA (PEM): it signs the API server's
	// serving certificate, the admin's, and the kubelets' through the controller-manager.
	CACert, CAKey []byte
	// AuditLog is the API server's audit log when TenantOptions.Audit is set.
	AuditLog string

	opts TenantOptions
	dir  string
	// ca signs admin certificates again when the admin kubeconfig rotates.
	ca *authority

	mu sync.Mutex
	// apiserverArgs start kube-apiserver again on the same port, data and certificates.
	apiserverArgs []string
	etcd          *localrun.Process
	apiserver     *localrun.Process
	// others are the controller-manager, scheduler and kwok, in start order.
	others []*localrun.Process
}

// StartTenant starts a tenant's etcd and kube-apiserver, then what opts add, each ready
// before the next starts; it stops what it started if one fails.
func StartTenant(ctx context.Context, opts TenantOptions) (_ *Tenant, err error) {
	if opts.Name == "" || strings.ContainsAny(opts.Name, "/ ") {
		return nil, fmt.Errorf("tenant name %q: want a plain, non-empty name", opts.Name)
	}
	t := &Tenant{Name: opts.Name, opts: opts, dir: filepath.Join(opts.Work, opts.Name)}
	if _, err := os.Stat(t.dir); err == nil {
		return nil, fmt.Errorf("tenant %q: %s already exists", opts.Name, t.dir)
	}
	defer func() {
		if err != nil {
			t.Stop()
			err = fmt.Errorf("tenant %q: %w", opts.Name, err)
		}
	}()
	port, err := localrun.FreePort()
	if err != nil {
		return nil, err
	}
	t.Server = fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := t.writePKI(); err != nil {
		return nil, err
	}
	etcdURL, err := t.startEtcd(ctx)
	if err != nil {
		return nil, err
	}
	t.apiserverArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + t.file("serving.crt"), "--tls-private-key-file=" + t.file("serving.key"),
		"--client-ca-file=" + t.file("ca.crt"),
		"--service-account-key-file=" + t.file("sa.pub"),
		"--service-account-signing-key-file=" + t.file("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + TenantServiceCIDR,
		// What a kubelet's join is checked against, as in a kubeadm or Kamaji cluster.
		"--enable-bootstrap-token-auth",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
	}
	if opts.Audit {
		t.AuditLog = t.file("audit.log")
		if err := writeFiles(t.dir, map[string][]byte{"audit-policy.yaml": []byte(auditPolicy)}); err != nil {
			return nil, err
		}
		t.apiserverArgs = append(t.apiserverArgs,
			"--audit-policy-file="+t.file("audit-policy.yaml"), "--audit-log-path="+t.AuditLog,
			// Written before the response, so a test reads what it just caused.
			"--audit-log-mode=blocking")
	}
	if err := t.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	if t.Client, err = client.New(t.Config, client.Options{Scheme: clientgoscheme.Scheme}); err != nil {
		return nil, err
	}
	if len(opts.Controllers) > 0 {
		if err := t.startControllerManager(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if err := t.startScheduler(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Kwok != "" {
		if err := t.startKwok(ctx); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// auditPolicy is the policy of TenantOptions.Audit.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  verbs: [create, update, patch]
  resources:
  - group: ""
    resources: [nodes, nodes/status]
- level: Metadata
  verbs: [create, update, patch]
  resources:
  - group: certificates.k8s.io
    resources: [certificatesigningrequests, certificatesigningrequests/approval, certificatesigningrequests/status]
- level: None
`

// Grace periods of the tenant's processes between SIGTERM and SIGKILL. A test fixture
// need not wait for a graceful drain, and the API server keeps no state of its own
// (etcd has it all). Measured here: with clients still watching it (the tenant's
// controller-manager, scheduler and kwok; Cluster API's cluster cache and the operator
// in the e2e environment), kube-apiserver stops listening at once but is still running
// 15 s after SIGTERM, waiting on those connections; with nothing watching it exits in
// about a second. So each process gets a short grace and is then killed (SIGKILL).
const (
	apiserverGrace = 3 * time.Second
	processGrace   = 5 * time.Second
)

// Stop stops every process of the tenant: kwok, the scheduler and the
// controller-manager first (their watches would hold the API server's shutdown), then
// the API server, then etcd. Its data stays in its folder. Stop may be called more than
// once.
func (t *Tenant) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.others) - 1; i >= 0; i-- {
		t.others[i].Stop(processGrace)
	}
	if t.apiserver != nil {
		t.apiserver.Stop(apiserverGrace)
	}
	if t.etcd != nil {
		t.etcd.Stop(processGrace)
	}
}

// StopAPIServer stops the tenant's kube-apiserver (SIGTERM, SIGKILL after
// apiserverGrace), leaving etcd and the other processes running: a tenant whose API
// server is down. It returns once the process has ended: nothing answers on
// Server until StartAPIServer.
func (t *Tenant) StopAPIServer() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.apiserver != nil {
		t.apiserver.Stop(apiserverGrace)
	}
}

// StartAPIServer starts the tenant's kube-apiserver (again, after StopAPIServer: same
// address, data and certificates) and waits until it is ready.
func (t *Tenant) StartAPIServer(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.apiserver != nil && t.apiserver.Running() {
		return nil
	}
	p, err := t.start("kube-apiserver", filepath.Join(t.opts.Assets, "kube-apiserver"), t.apiserverArgs...)
	if err != nil {
		return err
	}
	t.apiserver = p
	hc, err := rest.HTTPClientFor(t.Config)
	if err != nil {
		return err
	}
	return p.WaitReadyWith(ctx, hc, t.Server+"/readyz", readyTimeout)
}

// writePKI makes the tenant's CA, the serving certificate its processes share, the
// admin's client certificate and kubeconfig, and the service-account key pair.
func (t *Tenant) writePKI() error {
	ca, err := newAuthority(t.Name + "-ca")
	if err != nil {
		return err
	}
	servingCert, servingKey, err := ca.serving("kube-apiserver")
	if err != nil {
		return err
	}
	adminCert, adminKey, err := ca.client("kubernetes-admin", "system:masters")
	if err != nil {
		return err
	}
	saPriv, saPub, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	t.ca, t.CACert, t.CAKey = ca, ca.CertPEM, ca.KeyPEM
	if t.Kubeconfig, err = t.adminKubeconfig(adminCert, adminKey); err != nil {
		return err
	}
	if t.Config, err = clientcmd.RESTConfigFromKubeConfig(t.Kubeconfig); err != nil {
		return err
	}
	t.KubeconfigPath = t.file("kubeconfig")
	return writeFiles(t.dir, map[string][]byte{
		"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM,
		"serving.crt": servingCert, "serving.key": servingKey,
		"sa.key": saPriv, "sa.pub": saPub,
		"kubeconfig": t.Kubeconfig,
	})
}

// adminKubeconfig is the tenant's admin kubeconfig for a client certificate.
func (t *Tenant) adminKubeconfig(cert, key []byte) ([]byte, error) {
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{t.Name: {Server: t.Server, CertificateAuthorityData: t.ca.CertPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {ClientCertificateData: cert, ClientKeyData: key}},
		Contexts:       map[string]*clientcmdapi.Context{"admin@" + t.Name: {Cluster: t.Name, AuthInfo: "admin"}},
		CurrentContext: "admin@" + t.Name,
	})
}

// RotateAdminKubeconfig issues the admin a new client certificate, as Kamaji does when
// it rotates a tenant's admin kubeconfig, and returns the new kubeconfig: the simulated
// Kamaji writes it into <cluster>-kubeconfig at its next reconcile of the Cluster. The
// old certificate stays valid (Kubernetes cannot revoke one), as it does with Kamaji.
func (t *Tenant) RotateAdminKubeconfig() ([]byte, error) {
	cert, key, err := t.ca.client("kubernetes-admin", "system:masters")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := t.adminKubeconfig(cert, key)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Kubeconfig = kubeconfig
	return kubeconfig, nil
}

// serviceAccountKeys is the key pair the API server signs and checks service-account
// tokens with (and the controller-manager signs them with).
func serviceAccountKeys() (priv, pub []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if priv, err = keyPEM(key); err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return priv, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func (t *Tenant) startEtcd(ctx context.Context) (string, error) {
	clientPort, err := localrun.FreePort()
	if err != nil {
		return "", err
	}
	peerPort, err := localrun.FreePort()
	if err != nil {
		return "", err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	p, err := t.start("etcd", filepath.Join(t.opts.Assets, "etcd"),
		"--name="+t.Name, "--data-dir="+t.file("etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster="+t.Name+"="+peerURL,
		// A test's data need not survive a power cut.
		"--unsafe-no-fsync")
	if err != nil {
		return "", err
	}
	t.etcd = p
	return clientURL, p.WaitReady(ctx, clientURL+"/health", readyTimeout)
}

// startControllerManager starts kube-controller-manager as a kubeadm control plane runs
// it: the tenant CA signs the kubelets' client certificates, and its service-account key
// the tokens.
func (t *Tenant) startControllerManager(ctx context.Context) error {
	port, err := localrun.FreePort()
	if err != nil {
		return err
	}
	p, err := t.start("kube-controller-manager", filepath.Join(t.opts.Assets, "kube-controller-manager"),
		"--kubeconfig="+t.KubeconfigPath, "--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file="+t.file("serving.crt"), "--tls-private-key-file="+t.file("serving.key"),
		"--controllers="+strings.Join(t.opts.Controllers, ","),
		"--cluster-signing-cert-file="+t.file("ca.crt"), "--cluster-signing-key-file="+t.file("ca.key"),
		"--root-ca-file="+t.file("ca.crt"),
		"--service-account-private-key-file="+t.file("sa.key"),
		"--use-service-account-credentials=false",
		// A Node whose heartbeat stops is marked unknown after this long (default 40s).
		"--node-monitor-grace-period=20s")
	if err != nil {
		return err
	}
	return t.waitServing(ctx, p, port)
}

func (t *Tenant) startScheduler(ctx context.Context) error {
	port, err := localrun.FreePort()
	if err != nil {
		return err
	}
	p, err := t.start("kube-scheduler", filepath.Join(t.opts.Assets, "kube-scheduler"),
		"--kubeconfig="+t.KubeconfigPath, "--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file="+t.file("serving.crt"), "--tls-private-key-file="+t.file("serving.key"))
	if err != nil {
		return err
	}
	return t.waitServing(ctx, p, port)
}

// startKwok starts kwok, which heartbeats the Nodes the simulator registers (only those:
// they carry its annotation) and runs the Pods bound to them.
func (t *Tenant) startKwok(ctx context.Context) error {
	port, err := localrun.FreePort()
	if err != nil {
		return err
	}
	p, err := t.start("kwok", filepath.Join(t.opts.Kwok, "kwok"),
		"--kubeconfig", t.KubeconfigPath, "-c", filepath.Join(t.opts.Kwok, "kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector="+KwokAnnotation+"=fake",
		// A kubelet renews its Node's lease (40 s, its default); kwok's heartbeat stage
		// counts on it and updates the Node's status only every ten minutes or so. Without
		// the lease the controller-manager marks every Node unknown after its grace period
		// and kwok marks it ready again, over and over.
		"--node-lease-duration-seconds=40",
		"--server-address", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	return p.WaitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", port), readyTimeout)
}

// waitServing waits for a controller's /healthz, served under the tenant's certificate.
func (t *Tenant) waitServing(ctx context.Context, p *localrun.Process, port int) error {
	hc, err := rest.HTTPClientFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: t.CACert}})
	if err != nil {
		return err
	}
	return p.WaitReadyWith(ctx, hc, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), readyTimeout)
}

// start starts one of the tenant's processes, logging to <Work>/<Name>-<name>.log.
func (t *Tenant) start(name, bin string, args ...string) (*localrun.Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	full := t.Name + "-" + name
	p, err := localrun.StartProcess(full, filepath.Join(t.opts.Work, full+".log"), exec.Command(bin, args...))
	if err != nil {
		return nil, err
	}
	switch name {
	case "etcd", "kube-apiserver":
	default:
		t.others = append(t.others, p)
	}
	return p, nil
}

func (t *Tenant) file(name string) string { return filepath.Join(t.dir, name) }
