package certs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook/certs"
)

var (
	env       *testenv.Env
	clientset kubernetes.Interface
)

func TestMain(m *testing.M) {
	testenv.Main(m, false, func(e *testenv.Env) error {
		env = e
		var err error
		clientset, err = kubernetes.NewForConfig(e.Config)
		return err
	})
}

// webhookConfiguration creates a ValidatingWebhookConfiguration of two webhooks, as the
// chart's, with no caBundle.
func webhookConfiguration(t *testing.T, name string) {
	t.Helper()
	url := "https://localhost:9443/validate"
	none := admissionregistrationv1.SideEffectClassNone
	hook := func(n string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: n, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			AdmissionReviewVersions: []string{"v1"}, SideEffects: &none,
		}
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook("a.nodegroup.io"), hook("b.nodegroup.io")},
	}
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })
}

// replica is one manager running until the test ends.
type replica struct {
	*certs.Manager
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, name string, m *certs.Manager) *replica {
	t.Helper()
	m.Client, m.Identity = clientset, name
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{Manager: m, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); _ = r.Start(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() { r.cancel(); <-r.done }

// serving is the fingerprint of the certificate the replica hands to a TLS client.
func (r *replica) serving(t *testing.T) (string, *x509.Certificate) {
	t.Helper()
	select {
	case <-r.Serving():
	case <-time.After(30 * time.Second):
		t.Fatalf("replica %s serves nothing after 30s", r.Identity)
	}
	tc, err := tlsCertificate(r.Manager)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tc.Raw)
	return hex.EncodeToString(sum[:]), tc
}

func tlsCertificate(m *certs.Manager) (*x509.Certificate, error) {
	cfg := tlsConfig(m)
	c, err := cfg.GetCertificate(nil)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(c.Certificate[0])
}

func secretAndConfig(t *testing.T, secret types.NamespacedName, cfgName string) (*corev1.Secret, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	ctx := context.Background()
	s, err := clientset.CoreV1().Secrets(secret.Namespace).Get(ctx, secret.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, cfgName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// manager is a replica's configuration; short makes the lifetimes and waits short.
func manager(secret types.NamespacedName, cfg string, short bool) *certs.Manager {
	m := &certs.Manager{
		Secret: secret, WebhookConfiguration: cfg, DNSNames: []string{"localhost"},
		CAValidity: 365 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour,
	}
	if short {
		m.CAValidity, m.CertValidity = 45*time.Second, 12*time.Second
		m.TrustSettle, m.ReportInterval = 2*time.Second, time.Second
	}
	return m
}

// TestReplicasAgreeAndARestartWritesNothing starts two replicas at once on a missing
// Secret: they settle on one CA and one pair (one create wins, the other reads it), the
// caBundle trusts it and both are ready. A replica started again with everything in
// place writes nothing.
func TestReplicasAgreeAndARestartWritesNothing(t *testing.T) {
	secret := types.NamespacedName{Namespace: "default", Name: "agree-certs"}
	webhookConfiguration(t, "agree")
	var replicas []*replica
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 2 {
		wg.Go(func() {
			r := start(t, fmt.Sprintf("replica-%d", i), manager(secret, "agree", false))
			mu.Lock()
			replicas = append(replicas, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	fp0, cert := replicas[0].serving(t)
	fp1, _ := replicas[1].serving(t)
	if fp0 != fp1 {
		t.Fatalf("the replicas serve different certificates: %s and %s", fp0, fp1)
	}
	eventually(t, 10*time.Second, func() error {
		for _, r := range replicas {
			if err := r.ReadyCheck(nil)(nil); err != nil {
				return fmt.Errorf("replica %s: %w", r.Identity, err)
			}
		}
		_, cfg := secretAndConfig(t, secret, "agree")
		return testenv.WebhooksTrust(cfg, cert, "localhost")
	})
	s, cfg := secretAndConfig(t, secret, "agree")
	if got := s.Labels["app.kubernetes.io/managed-by"]; got != "nodegroup-operator" {
		t.Errorf("the Secret's managed-by label is %q", got)
	}

	for _, r := range replicas {
		r.stop()
	}
	again := start(t, "replica-restarted", manager(secret, "agree", false))
	if fp, _ := again.serving(t); fp != fp0 {
		t.Fatal("the restarted replica serves another certificate")
	}
	time.Sleep(2 * time.Second)
	s2, cfg2 := secretAndConfig(t, secret, "agree")
	if s2.ResourceVersion != s.ResourceVersion || cfg2.ResourceVersion != cfg.ResourceVersion {
		t.Fatalf("a restart with the Secret in place wrote: Secret %s -> %s, configuration %s -> %s",
			s.ResourceVersion, s2.ResourceVersion, cfg.ResourceVersion, cfg2.ResourceVersion)
	}
}

// TestRotationsKeepEveryReplicaTrusted runs two replicas with lifetimes short enough to
// renew the serving certificate several times and the CA once, and checks every 20ms
// that each serves a certificate every webhook's caBundle trusts. It also checks that
// each new pair is served by both within 3s of its write (the watch, not a timer), that
// the old CA leaves the caBundle before it expires (the replicas' reports, not its
// expiry, end the rotation), and that the rotation ends with one CA and no reports
// left on the Secret.
func TestRotationsKeepEveryReplicaTrusted(t *testing.T) {
	secret := types.NamespacedName{Namespace: "default", Name: "rotate-certs"}
	webhookConfiguration(t, "rotate")
	replicas := []*replica{start(t, "r0", manager(secret, "rotate", true)), start(t, "r1", manager(secret, "rotate", true))}
	for _, r := range replicas {
		r.serving(t)
	}
	firstCA := caOf(t, secret)

	var lastLeaf string
	var lastChange, retired time.Time
	var maxCAs int
	written := map[string]bool{}
	deadline := time.Now().Add(50 * time.Second)
	for time.Now().Before(deadline) {
		before, cfg := secretAndConfig(t, secret, "rotate")
		cas := strings.Count(string(cfg.Webhooks[0].ClientConfig.CABundle), "BEGIN CERTIFICATE")
		maxCAs = max(maxCAs, cas)
		if maxCAs == 2 && cas == 1 && retired.IsZero() {
			retired = time.Now()
		}
		var fps []string
		for _, r := range replicas {
			fp, cert := r.serving(t)
			// A replica may already serve a pair written after cfg was read, but the
			// caBundle trusted its CA before that pair was written.
			if err := testenv.WebhooksTrust(cfg, cert, "localhost"); err != nil {
				t.Fatalf("replica %s serves a certificate the caBundle does not trust: %v", r.Identity, err)
			}
			fps = append(fps, fp)
		}
		after, _ := secretAndConfig(t, secret, "rotate")
		current := []string{fingerprintPEM(t, before.Data[certs.KeyTLSCert]), fingerprintPEM(t, after.Data[certs.KeyTLSCert])}
		if current[1] != lastLeaf {
			lastLeaf, lastChange = current[1], time.Now()
		}
		written[current[1]] = true
		for i, fp := range fps {
			if !slices.Contains(current, fp) && time.Since(lastChange) > 3*time.Second {
				t.Fatalf("replica %s does not serve the Secret's certificate %s after it was written", replicas[i].Identity, time.Since(lastChange).Round(time.Millisecond))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	// 12s certificates are renewed every 8s, and the CA rotation issues one more.
	if len(written) < 5 {
		t.Errorf("%d serving certificates in 50s, want at least 5", len(written))
	}
	if maxCAs != 2 {
		t.Errorf("the caBundle held at most %d CAs during the rotation, want 2", maxCAs)
	}
	if caOf(t, secret).Equal(firstCA) {
		t.Fatal("the CA was not rotated in 50s with a 45s lifetime")
	}
	if retired.IsZero() || !retired.Before(firstCA.NotAfter) {
		t.Fatalf("the old CA left the caBundle at %v, not before it expired at %s", retired, firstCA.NotAfter)
	}
	// The new CA is 20s old: its own rotation is 10s away.
	eventually(t, 5*time.Second, func() error {
		s, cfg := secretAndConfig(t, secret, "rotate")
		if rotatingNow(s) {
			return errors.New("the Secret is still rotating")
		}
		if n := strings.Count(string(cfg.Webhooks[0].ClientConfig.CABundle), "BEGIN CERTIFICATE"); n != 1 {
			return fmt.Errorf("the caBundle holds %d CAs after the rotation", n)
		}
		for k := range s.Annotations {
			if strings.HasPrefix(k, certs.ReportAnnotationPrefix) {
				return fmt.Errorf("report %s left on the Secret after the rotation", k)
			}
		}
		return nil
	})
}

// TestADeletedSecretComesBackAsServed deletes the Secret under a running replica: it
// creates it again with the CA and the pair it serves, so the caBundle never stops
// trusting what is served.
func TestADeletedSecretComesBackAsServed(t *testing.T) {
	secret := types.NamespacedName{Namespace: "default", Name: "deleted-certs"}
	webhookConfiguration(t, "deleted")
	r := start(t, "r0", manager(secret, "deleted", false))
	fp, _ := r.serving(t)
	old, _ := secretAndConfig(t, secret, "deleted")
	if err := clientset.CoreV1().Secrets(secret.Namespace).Delete(context.Background(), secret.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		s, err := clientset.CoreV1().Secrets(secret.Namespace).Get(context.Background(), secret.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.UID == old.UID {
			return errors.New("not deleted yet")
		}
		if !bytes.Equal(s.Data[certs.KeyCACert], old.Data[certs.KeyCACert]) || !bytes.Equal(s.Data[certs.KeyTLSCert], old.Data[certs.KeyTLSCert]) {
			return errors.New("the Secret came back with another CA or pair")
		}
		return nil
	})
	if now, _ := r.serving(t); now != fp {
		t.Fatal("the replica serves another pair after the Secret came back")
	}
}

func rotatingNow(s *corev1.Secret) bool {
	return len(s.Data[certs.KeyNextCACert]) > 0 || strings.Count(string(s.Data[certs.KeyCABundle]), "BEGIN CERTIFICATE") > 1
}

func caOf(t *testing.T, secret types.NamespacedName) *x509.Certificate {
	t.Helper()
	s, _ := secretAndConfig(t, secret, "rotate")
	return parsePEM(t, s.Data[certs.KeyCACert])
}

func fingerprintPEM(t *testing.T, p []byte) string {
	t.Helper()
	sum := sha256.Sum256(parsePEM(t, p).Raw)
	return hex.EncodeToString(sum[:])
}

func eventually(t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tlsConfig(m *certs.Manager) *tls.Config {
	c := &tls.Config{}
	m.TLSConfig(c)
	return c
}

func parsePEM(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(p)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestValidateRefusesLifetimesTooShortToRenew(t *testing.T) {
	secret := types.NamespacedName{Namespace: "default", Name: "x"}
	for name, tweak := range map[string]func(*certs.Manager){
		"zero serving validity": func(m *certs.Manager) { m.CertValidity = 0 },
		"zero CA validity":      func(m *certs.Manager) { m.CAValidity = 0 },
		"CA shorter than a rotation": func(m *certs.Manager) {
			m.CAValidity, m.CertValidity = time.Minute, 10*time.Second // a rotation's waits are 25s by default
		},
		"serving outlives the CA": func(m *certs.Manager) { m.CAValidity, m.CertValidity = time.Hour, 2*time.Hour },
		"no DNS name":             func(m *certs.Manager) { m.DNSNames = nil },
		"no replica name":         func(m *certs.Manager) { m.Identity = "" },
	} {
		m := manager(secret, "cfg", false)
		m.Identity = "r0"
		tweak(m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	m := manager(secret, "cfg", false)
	m.Identity = "r0"
	if err := m.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
