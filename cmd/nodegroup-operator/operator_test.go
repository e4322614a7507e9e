package main_test

// The operator binary as the chart runs it, against a real kube-apiserver: the chart
// rendered with the Helm SDK and installed (but for its Deployment), and the binary
// started with the Deployment's arguments and environment (internal/localrun), with the
// webhook on and managing its own certificate, called by the API server on loopback.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook/certs"
)

var (
	env *testenv.Env
	bin string
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		dir, err := os.MkdirTemp("", "nodegroup-operator-bin-")
		if err != nil {
			return err
		}
		bin = filepath.Join(dir, "nodegroup-operator")
		return localrun.BuildOperator(testenv.RepoRoot(), bin)
	})
}

const (
	secretName = "nodegroup-operator-webhook-certs"
	configName = "nodegroup-operator"
)

// install renders the chart with values (plus the loopback name the API server calls the
// webhook by), installs it with the webhook at webhookPort and no caBundle, removes a
// webhook Secret an earlier test left, and returns the release.
func install(t *testing.T, webhookPort int, values map[string]any) *localrun.Release {
	t.Helper()
	ctx := context.Background()
	rel, err := localrun.Render(testenv.RepoRoot(), localrun.LoopbackValues(values))
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: localrun.ReleaseNamespace, Name: secretName}}
	if err := env.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	// A fresh configuration, as a first install has: no caBundle.
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: configName}}
	if err := env.Client.Delete(ctx, cfg); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := rel.Install(ctx, env.Client, webhookPort); err != nil {
		t.Fatal(err)
	}
	return rel
}

// replica starts one operator process of rel as pod name, listening for the webhook on
// port, and stops it when the test ends. It returns without waiting for readiness.
func replica(t *testing.T, rel *localrun.Release, name string, port int) (*localrun.Command, *localrun.Process) {
	t.Helper()
	cmd := command(t, rel, name, port)
	return cmd, run(t, cmd, name)
}

// command is the command line of one replica, with its own folder and kubeconfig.
func command(t *testing.T, rel *localrun.Release, name string, port int) *localrun.Command {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := localrun.ServiceAccountKubeconfig(context.Background(), env.Config, kubeconfig, time.Hour); err != nil {
		t.Fatal(err)
	}
	cmd, err := rel.Command(localrun.Local{Kubeconfig: kubeconfig, PodName: name, Dir: dir, WebhookPort: port})
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// run starts cmd as the replica name and stops it when the test ends.
func run(t *testing.T, cmd *localrun.Command, name string) *localrun.Process {
	t.Helper()
	return runCmd(t, cmd, cmd.Cmd(bin), name)
}

// runCmd starts c, the process of cmd, as the replica name and stops it when the test
// ends.
func runCmd(t *testing.T, cmd *localrun.Command, c *exec.Cmd, name string) *localrun.Process {
	t.Helper()
	p, err := localrun.StartProcess(name, filepath.Join(cmd.Dir, "operator.log"), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("the end of %s's log:\n%s", name, p.Tail())
		}
	})
	return p
}

func waitReady(t *testing.T, cmd *localrun.Command, p *localrun.Process) {
	t.Helper()
	if err := p.WaitReady(context.Background(), cmd.ReadyURL(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

var tenants atomic.Int32

func tenant(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("op-tenant-%d", tenants.Add(1))
	if err := testenv.CreateTenant(context.Background(), env.Client, ns, testenv.TenantOptions{Kubeconfig: env.KubeConfig()}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func pool(ns, name, class string) *v1.NodeGroup {
	return &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
		ClusterName: testenv.TenantCluster, NodeGroupClassName: class, LocationName: v1.BuiltinLocation, MinReplicas: 1, MaxReplicas: 3,
		Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
	}}
}

// admits fails unless the API server admits a good pool and the webhook refuses a bad
// one, through the operator.
func admits(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, pool(ns, "good", "talos"), client.DryRunAll); err != nil {
		t.Fatalf("a good pool was refused: %v", err)
	}
	err := env.Client.Create(ctx, pool(ns, "bad", "no-such-class"), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), `admission webhook "nodegroups.validate.nodegroup.io" denied the request`) ||
		!strings.Contains(err.Error(), `NodeGroupClass "no-such-class" does not exist`) {
		t.Fatalf("a pool naming a missing class: %v, want refused by the operator's webhook", err)
	}
}

// served is the certificate the server at addr presents.
func served(addr string) (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads what is served; trust is checked by the caller
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func webhookConfig(t *testing.T) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: configName}, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDefaultInstallServesItsWebhook starts the binary with the chart's default values
// and no Secret: it issues its certificate, becomes ready, and the API server admits a
// good pool and refuses a bad one through it. A scrape of its metrics without a token
// is refused; one with a token of a ServiceAccount bound to the chart's metrics-reader
// role gets them: controller-runtime's and the operator's own, which counted the two
// admissions.
func TestDefaultInstallServesItsWebhook(t *testing.T) {
	port, err := localrun.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	rel := install(t, port, map[string]any{})
	start := time.Now()
	cmd, p := replica(t, rel, "nodegroup-operator-0", port)
	waitReady(t, cmd, p)
	t.Logf("from process start to ready, with no certificate anywhere: %s", time.Since(start).Round(time.Millisecond))
	admits(t, tenant(t))

	t.Run("metrics need a token the API server authorizes", func(t *testing.T) {
		if !cmd.MetricsSecure || !strings.HasPrefix(cmd.MetricsURL(), "https://") {
			t.Fatalf("the chart's default metrics endpoint is %s (secure %v), want HTTPS", cmd.MetricsURL(), cmd.MetricsSecure)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			// controller-runtime serves metrics with a self-signed certificate.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // authentication is the token's
		}}
		get := func(token string) (int, string) {
			req, err := http.NewRequest(http.MethodGet, cmd.MetricsURL(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		// Ready means the webhook serves; the metrics server may bind a moment later.
		testenv.Eventually(t, "the metrics endpoint accepts connections", func() bool {
			u, err := url.Parse(cmd.MetricsURL())
			if err != nil {
				t.Fatal(err)
			}
			conn, err := net.DialTimeout("tcp", u.Host, time.Second)
			if err == nil {
				_ = conn.Close()
			}
			return err == nil
		})
		if code, _ := get(""); code != http.StatusUnauthorized {
			t.Errorf("a scrape without a token: HTTP %d, want 401", code)
		}
		ctx := context.Background()
		unbound, err := localrun.ServiceAccountConfig(ctx, env.Config, "default", "not-a-scraper", "view", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := get(unbound.BearerToken); code != http.StatusForbidden {
			t.Errorf("a scrape with a token not granted get on /metrics: HTTP %d, want 403", code)
		}
		scraper, err := localrun.ServiceAccountConfig(ctx, env.Config, "default", "scraper", "nodegroup-operator-metrics-reader", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"controller_runtime_reconcile_total",
			`nodegroup_operator_admissions_total{resource="nodegroup",rule="",verdict="allowed"} `,
			`nodegroup_operator_admissions_total{resource="nodegroup",rule="ClassNotFound",verdict="denied"} `,
			// Served once the replica leads. The count is not asserted: the tenants an
			// earlier test of this package left (TestHostileTenants' victim has Talos
			// pools and no kubeconfig) count as unreachable once this replica tries them.
			`nodegroup_operator_tenant_clusters{reachable="false"} `,
		}
		// The binding reaches the authorizer's cache, and the replica leads (the operator's own
		// gauges are served then): a replica an earlier test killed holds the lease until it
		// expires.
		deadline := time.Now().Add(90 * time.Second)
		for {
			code, body := get(scraper.BearerToken)
			missing := slices.IndexFunc(want, func(s string) bool { return !strings.Contains(body, s) })
			if code == http.StatusOK && missing < 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a scrape with the metrics-reader role: HTTP %d, want 200 with the controller and operator metrics (missing %q)", code, want[max(missing, 0)])
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// TestArbitraryUID runs the operator as OpenShift's restricted-v2 runs a Pod of the
// chart rendered with the fixed IDs nulled (podSecurityContext and securityContext
// without runAsUser, runAsGroup, fsGroup): as a UID from the namespace's range, which
// no file of the image or the test belongs to, with the root group. Its folder, TMPDIR
// included, is read-only to it, as a read-only root filesystem is: the operator issues
// its certificate, becomes ready and serves the webhook without writing a file.
func TestArbitraryUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a process as another UID needs root")
	}
	port, err := localrun.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	rel := install(t, port, map[string]any{
		"podSecurityContext": map[string]any{"runAsUser": nil, "runAsGroup": nil, "fsGroup": nil},
		"securityContext":    map[string]any{"runAsUser": nil, "runAsGroup": nil},
	})
	deploy, err := rel.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	if pod := deploy.Spec.Template.Spec; pod.SecurityContext.RunAsUser != nil || pod.SecurityContext.FSGroup != nil || pod.Containers[0].SecurityContext.RunAsUser != nil {
		t.Fatalf("the render still fixes an ID: %+v %+v", pod.SecurityContext, pod.Containers[0].SecurityContext)
	}
	const uid = 1000650000 // the first UID of a namespace's range on OpenShift
	cmd := command(t, rel, "nodegroup-operator-0", port)
	// The root group may read and enter (not write) what it needs: the binary, the
	// kubeconfig (a Pod's token is mounted so), and the folders above them.
	for _, path := range []string{bin, filepath.Dir(bin), cmd.Dir, filepath.Join(cmd.Dir, "kubeconfig"), filepath.Join(cmd.Dir, "tmp")} {
		mode := os.FileMode(0o750)
		if path == filepath.Join(cmd.Dir, "kubeconfig") {
			mode = 0o640
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	for dir := filepath.Dir(cmd.Dir); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	c := cmd.Cmd(bin)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: 0}}
	p := runCmd(t, cmd, c, "nodegroup-operator-0")
	waitReady(t, cmd, p)
	admits(t, tenant(t))
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if want := fmt.Sprintf("\nUid:\t%d\t", uid); err != nil || !strings.Contains(string(status), want) {
		t.Errorf("the operator's /proc status (%v) does not say %q:\n%s", err, want, status)
	}
}

// TestTwoReplicasStartTogether starts two replicas at once on a missing Secret: one CA,
// one pair, both serve it, both are ready, and a restart with the Secret in place writes
// nothing.
func TestTwoReplicasStartTogether(t *testing.T) {
	ports := freePorts(t, 2)
	rel := install(t, ports[0], map[string]any{})
	// Both command lines first (each asks for a token), then both processes back to
	// back, so both look for the missing Secret at once.
	var cmds [2]*localrun.Command
	var procs [2]*localrun.Process
	for i := range 2 {
		cmds[i] = command(t, rel, fmt.Sprintf("nodegroup-operator-%d", i), ports[i])
	}
	for i := range 2 {
		procs[i] = run(t, cmds[i], fmt.Sprintf("nodegroup-operator-%d", i))
	}
	for i := range 2 {
		waitReady(t, cmds[i], procs[i])
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: localrun.ReleaseNamespace, Name: secretName}, secret); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(secret.Data[certs.KeyCABundle]), "BEGIN CERTIFICATE"); n != 1 {
		t.Fatalf("the Secret's bundle holds %d CAs, want 1", n)
	}
	cfg := webhookConfig(t)
	var certsServed []*x509.Certificate
	for i := range 2 {
		c, err := served(fmt.Sprintf("127.0.0.1:%d", ports[i]))
		if err != nil {
			t.Fatal(err)
		}
		if err := testenv.WebhooksTrust(cfg, c, localrun.LoopbackHost); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		certsServed = append(certsServed, c)
	}
	if !certsServed[0].Equal(certsServed[1]) {
		t.Fatal("the two replicas serve different certificates")
	}
	admits(t, tenant(t))

	// Both stop; one starts again with the Secret in place and writes nothing to it or to
	// the configuration.
	for i := range 2 {
		procs[i].Stop(10 * time.Second)
	}
	cmd, p := replica(t, rel, "nodegroup-operator-2", ports[0])
	waitReady(t, cmd, p)
	time.Sleep(2 * time.Second)
	after := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(secret), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != secret.ResourceVersion || webhookConfig(t).ResourceVersion != cfg.ResourceVersion {
		t.Fatal("a replica restarted with the Secret in place wrote the Secret or the webhook configuration")
	}
}

// TestRotationNeverRefusesAdmission runs two replicas behind a round-robin TCP proxy (the
// webhook Service) with a 20s serving certificate and a 90s CA, so that within two
// minutes the pair is renewed several times and the CA rotates once, while a client
// creates pools through the webhook, one at a time. After each answer the proxy closes
// the connection, so the API server opens a new one, with a new TLS handshake, for every
// request: a replica serving a pair the caBundle does not trust fails the next request. No
// request may fail. Meanwhile the test itself checks every 50ms that each replica serves
// a pair the caBundle trusts.
func TestRotationNeverRefusesAdmission(t *testing.T) {
	ports := freePorts(t, 3) // the proxy, then the two replicas
	rel := install(t, ports[0], map[string]any{"webhook": map[string]any{
		"certificate": map[string]any{"validity": "20s", "caValidity": "90s"},
	}})
	proxy := startProxy(t, ports[0], ports[1:])
	var cmds [2]*localrun.Command
	var procs [2]*localrun.Process
	for i := range 2 {
		cmds[i], procs[i] = replica(t, rel, fmt.Sprintf("nodegroup-operator-%d", i), ports[1+i])
	}
	for i := range 2 {
		waitReady(t, cmds[i], procs[i])
	}
	ns := tenant(t)
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	secretKey := types.NamespacedName{Namespace: localrun.ReleaseNamespace, Name: secretName}
	firstCA := caOf(t, secretKey)

	var requests, failures atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			requests.Add(1)
			if err := env.Client.Create(context.Background(), pool(ns, fmt.Sprintf("p%d", i), "talos"), client.DryRunAll); err != nil {
				failures.Add(1)
				t.Errorf("request %d: %v", i, err)
			}
			// Nothing is in flight now (the test's requests are the only ones through the
			// webhook): the connection closes, and the API server's transport has time
			// to see it before the next request opens a new one.
			proxy.closeAll()
			time.Sleep(100 * time.Millisecond)
		}
	})
	var maxCAs, checks int
	var retired time.Time
	var problem error
	leaves := map[string]bool{}
	for ctx.Err() == nil && problem == nil {
		cfg := webhookConfig(t)
		cas := strings.Count(string(cfg.Webhooks[0].ClientConfig.CABundle), "BEGIN CERTIFICATE")
		maxCAs = max(maxCAs, cas)
		if maxCAs == 2 && cas == 1 && retired.IsZero() {
			retired = time.Now()
		}
		for i := range 2 {
			c, err := served(fmt.Sprintf("127.0.0.1:%d", ports[1+i]))
			if err != nil {
				problem = fmt.Errorf("replica %d: %w", i, err)
				break
			}
			// A pair written after cfg was read is signed by a CA the caBundle trusted
			// before it was written.
			if err := testenv.WebhooksTrust(cfg, c, localrun.LoopbackHost); err != nil {
				problem = fmt.Errorf("replica %d serves a certificate the caBundle does not trust: %w", i, err)
				break
			}
			leaves[string(c.Raw)] = true
		}
		checks++
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if problem != nil {
		t.Fatal(problem)
	}
	t.Logf("%d admission requests through the webhook during the rotations, %d failed; %d connections opened by the API server; %d serving certificates seen; %d checks of both replicas",
		requests.Load(), failures.Load(), proxy.connections.Load(), len(leaves), checks)
	if failures.Load() > 0 {
		t.Fatalf("%d of %d admission requests failed", failures.Load(), requests.Load())
	}
	if retired.IsZero() || !retired.Before(firstCA.NotAfter) {
		t.Errorf("the old CA left the caBundle at %v, not before it expired at %s", retired, firstCA.NotAfter)
	}
	if caOf(t, secretKey).Equal(firstCA) {
		t.Fatal("the CA was not rotated within 110s of a 90s lifetime")
	}
	if maxCAs != 2 {
		t.Errorf("the caBundle held at most %d CAs, want 2 during the rotation", maxCAs)
	}
	if len(leaves) < 5 {
		t.Errorf("%d serving certificates served, want at least 5 (renewals every ~13s and the rotation)", len(leaves))
	}
	if proxy.connections.Load() < requests.Load()/2 {
		t.Errorf("the API server opened %d connections for %d requests: too few new handshakes to tell", proxy.connections.Load(), requests.Load())
	}
}

func caOf(t *testing.T, key types.NamespacedName) *x509.Certificate {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	tc, err := tls.X509KeyPair(s.Data[certs.KeyCACert], s.Data[certs.KeyCAKey])
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(tc.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// freePorts is n distinct free loopback ports: each is held until all are found.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// proxy stands in for the webhook Service: it hands each new connection to the next
// backend in turn. closeAll closes every connection, for the API server to open a new
// one, with a new TLS handshake, for its next request.
type proxy struct {
	connections atomic.Int32
	mu          sync.Mutex
	open        map[net.Conn]bool
}

func startProxy(t *testing.T, port int, backends []int) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &proxy{open: map[net.Conn]bool{}}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := p.connections.Add(1)
			go p.relay(c, fmt.Sprintf("127.0.0.1:%d", backends[int(n)%len(backends)]))
		}
	}()
	return p
}

func (p *proxy) relay(front net.Conn, backend string) {
	back, err := net.Dial("tcp", backend)
	if err != nil {
		front.Close()
		return
	}
	p.mu.Lock()
	p.open[front], p.open[back] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(back, front); done <- struct{}{} }()
	go func() { _, _ = io.Copy(front, back); done <- struct{}{} }()
	<-done
	p.mu.Lock()
	delete(p.open, front)
	delete(p.open, back)
	p.mu.Unlock()
	front.Close()
	back.Close()
}

// closeAll closes every open connection; called only while no request is in flight.
func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.open {
		c.Close()
	}
}
