// Package certs gives the operator's admission webhook a serving certificate without
// cert-manager: it keeps a CA and a serving certificate in a Secret, renews them before
// they expire, writes them where the webhook server reads them (it reloads changed
// files), and writes the CA into the webhook configuration's caBundle.
//
// Every replica runs it: each must serve with the current certificate. Writes to the
// Secret use optimistic concurrency, so replicas racing to renew settle on one pair.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Keys of the Secret.
const (
	KeyCACert  = "ca.crt"
	KeyCAKey   = "ca.key"
	KeyTLSCert = "tls.crt"
	KeyTLSKey  = "tls.key"
)

// Manager keeps the webhook's certificates.
type Manager struct {
	// Client writes the Secret and the webhook configuration.
	Client client.Client
	// Secret holds the CA and the serving certificate.
	Secret types.NamespacedName
	// WebhookConfiguration is the ValidatingWebhookConfiguration whose caBundle is kept.
	WebhookConfiguration string
	// DNSNames and IPs the serving certificate is valid for (the webhook Service's names).
	DNSNames []string
	IPs      []net.IP
	// CertDir is where tls.crt and tls.key are written for the webhook server.
	CertDir string
	// CAValidity and CertValidity are the lifetimes; a certificate is renewed when less
	// than a third of its lifetime is left.
	CAValidity   time.Duration
	CertValidity time.Duration
	// CheckInterval is how often Start checks; 0 means an hour.
	CheckInterval time.Duration
	// Now is the clock, for tests; nil is time.Now.
	Now func() time.Time
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Start checks once, then every CheckInterval until ctx ends. It implements
// manager.Runnable; it must run on every replica, not only the leader.
func (m *Manager) Start(ctx context.Context) error {
	interval := m.CheckInterval
	if interval == 0 {
		interval = time.Hour
	}
	logger := log.FromContext(ctx).WithName("webhook-certs")
	for {
		if _, err := m.Ensure(ctx); err != nil {
			logger.Error(err, "keeping the webhook certificate")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// NeedLeaderElection is false: every replica serves the webhook.
func (m *Manager) NeedLeaderElection() bool { return false }

// Ensure makes the Secret, the files and the caBundle current. It reports whether it
// issued a new serving certificate.
func (m *Manager) Ensure(ctx context.Context) (bool, error) {
	secret := &corev1.Secret{}
	err := m.Client.Get(ctx, m.Secret, secret)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	data := secret.Data
	issued := false
	if !m.valid(data[KeyCACert], data[KeyCAKey], m.CAValidity) {
		caCert, caKey, err := m.newCA()
		if err != nil {
			return false, err
		}
		data = map[string][]byte{KeyCACert: caCert, KeyCAKey: caKey}
	}
	if !m.valid(data[KeyTLSCert], data[KeyTLSKey], m.CertValidity) || !signedBy(data[KeyTLSCert], data[KeyCACert]) {
		cert, key, err := m.newServingCert(data[KeyCACert], data[KeyCAKey])
		if err != nil {
			return false, err
		}
		data[KeyTLSCert], data[KeyTLSKey] = cert, key
		issued = true
	}
	if issued {
		if err := m.writeSecret(ctx, secret, exists, data); err != nil {
			return false, err
		}
	}
	if err := m.writeFiles(data); err != nil {
		return issued, err
	}
	return issued, m.injectCABundle(ctx, data[KeyCACert])
}

func (m *Manager) writeSecret(ctx context.Context, secret *corev1.Secret, exists bool, data map[string][]byte) error {
	if !exists {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.Secret.Namespace, Name: m.Secret.Name},
			Type:       corev1.SecretTypeTLS, Data: data,
		}
		return m.Client.Create(ctx, secret)
	}
	secret.Data = data
	// The update carries the resourceVersion read: a replica that renewed first wins,
	// the others get a conflict and take its pair on their next check.
	return m.Client.Update(ctx, secret)
}

// writeFiles writes the pair for the webhook server, only when it changed, each file
// replaced atomically so the server never reads half a certificate.
func (m *Manager) writeFiles(data map[string][]byte) error {
	if m.CertDir == "" {
		return nil
	}
	if err := os.MkdirAll(m.CertDir, 0o700); err != nil {
		return err
	}
	for name, content := range map[string][]byte{KeyTLSKey: data[KeyTLSKey], KeyTLSCert: data[KeyTLSCert]} {
		path := filepath.Join(m.CertDir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, content, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) injectCABundle(ctx context.Context, ca []byte) error {
	if m.WebhookConfiguration == "" {
		return nil
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: m.WebhookConfiguration}, cfg); err != nil {
		return fmt.Errorf("reading the webhook configuration %s: %w", m.WebhookConfiguration, err)
	}
	patch := client.MergeFromWithOptions(cfg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	changed := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, ca) {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return m.Client.Patch(ctx, cfg, patch)
}

// valid says whether a PEM pair parses and has more than a third of its lifetime left.
func (m *Manager) valid(certPEM, keyPEM []byte, lifetime time.Duration) bool {
	cert, err := parseCert(certPEM)
	if err != nil || len(keyPEM) == 0 {
		return false
	}
	return m.now().Add(lifetime / 3).Before(cert.NotAfter)
}

func signedBy(certPEM, caPEM []byte) bool {
	cert, err1 := parseCert(certPEM)
	ca, err2 := parseCert(caPEM)
	return err1 == nil && err2 == nil && cert.CheckSignatureFrom(ca) == nil
}

func parseCert(p []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(p)
	if block == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func (m *Manager) newCA() ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := m.now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "nodegroup-operator-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(m.CAValidity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

func (m *Manager) newServingCert(caPEM, caKeyPEM []byte) ([]byte, []byte, error) {
	ca, err := parseCert(caPEM)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(caKeyPEM)
	if block == nil {
		return nil, nil, errors.New("CA key is not PEM")
	}
	caKey, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := m.now()
	notAfter := now.Add(m.CertValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	cn := "nodegroup-operator-webhook"
	if len(m.DNSNames) > 0 {
		cn = m.DNSNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		DNSNames: m.DNSNames, IPAddresses: m.IPs,
		NotBefore: now.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

func encode(der []byte, key *ecdsa.PrivateKey) ([]byte, []byte, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
