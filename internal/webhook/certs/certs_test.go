package certs_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook/certs"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, false, func(e *testenv.Env) error { env = e; return nil })
}

func TestCertificatesIssuedInjectedAndRenewed(t *testing.T) {
	ctx := context.Background()
	url := "https://localhost:9443/validate"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "certs-test"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "nodegroups.nodegroup.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			AdmissionReviewVersions: []string{"v1"}, SideEffects: ptr(admissionregistrationv1.SideEffectClassNone),
		}},
	}
	if err := env.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	dir := t.TempDir()
	m := &certs.Manager{
		Client: env.Client, Secret: types.NamespacedName{Namespace: "default", Name: "webhook-certs"},
		WebhookConfiguration: cfg.Name, DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		CertDir: dir, CAValidity: 365 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour,
		Now: func() time.Time { return now },
	}

	issued, err := m.Ensure(ctx)
	if err != nil || !issued {
		t.Fatalf("first Ensure: issued=%v err=%v", issued, err)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, m.Secret, secret); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: cfg.Name}, cfg); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cfg.Webhooks[0].ClientConfig.CABundle, secret.Data[certs.KeyCACert]) {
		t.Fatal("caBundle is not the Secret's CA")
	}
	first := verify(t, dir, secret.Data[certs.KeyCACert])

	// Nothing to do while the certificate is fresh.
	rv := secret.ResourceVersion
	if issued, err := m.Ensure(ctx); err != nil || issued {
		t.Fatalf("second Ensure: issued=%v err=%v", issued, err)
	}
	if err := env.Client.Get(ctx, m.Secret, secret); err != nil || secret.ResourceVersion != rv {
		t.Fatalf("the Secret was written on a no-op check (%v)", err)
	}

	// Past two thirds of its lifetime, the serving certificate is renewed under the same CA.
	now = now.Add(21 * 24 * time.Hour)
	if issued, err := m.Ensure(ctx); err != nil || !issued {
		t.Fatalf("Ensure after 21 days: issued=%v err=%v", issued, err)
	}
	if err := env.Client.Get(ctx, m.Secret, secret); err != nil {
		t.Fatal(err)
	}
	second := verify(t, dir, secret.Data[certs.KeyCACert])
	if first.SerialNumber.Cmp(second.SerialNumber) == 0 {
		t.Fatal("the renewed certificate has the old serial")
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: cfg.Name}, cfg); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cfg.Webhooks[0].ClientConfig.CABundle, secret.Data[certs.KeyCACert]) {
		t.Fatal("caBundle does not follow the CA")
	}
}

// verify checks the files on disk form a pair the CA signed for localhost and 127.0.0.1.
func verify(t *testing.T, dir string, caPEM []byte) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, name := range []string{"localhost", "127.0.0.1"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: cert.NotBefore.Add(2 * time.Hour)}); err != nil {
			t.Errorf("certificate for %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tls.key.tmp")); err == nil {
		t.Error("a temporary file was left behind")
	}
	return cert
}

func ptr[T any](v T) *T { return &v }
