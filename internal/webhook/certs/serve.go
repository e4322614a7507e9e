// Serving: the pair this replica hands out, from memory, and the readiness that keeps
// a replica the API server would not trust out of the Service.

package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

type servedPair struct {
	tls         *tls.Certificate
	leaf        *x509.Certificate
	fingerprint string
}

// Serving closes once this replica has a serving pair; the webhook server must not
// start before it.
func (m *Manager) Serving() <-chan struct{} {
	m.init()
	return m.serving
}

// TLSConfig makes the webhook server serve the Secret's pair from memory.
func (m *Manager) TLSConfig(c *tls.Config) { c.GetCertificate = m.getCertificate }

func (m *Manager) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s := m.served.Load()
	if s == nil {
		return nil, errors.New("no webhook serving certificate yet")
	}
	return s.tls, nil
}

// ReadyCheck is ready when started (the webhook server's StartedChecker) passes and
// every webhook's caBundle trusts the pair this replica serves: a replica the API server
// would refuse is kept out of the Service.
func (m *Manager) ReadyCheck(started healthz.Checker) healthz.Checker {
	return func(req *http.Request) error {
		s := m.served.Load()
		if s == nil {
			return errors.New("no webhook serving certificate yet")
		}
		if started != nil {
			if err := started(req); err != nil {
				return err
			}
		}
		if m.WebhookConfiguration == "" {
			return nil
		}
		cfg := m.config()
		if cfg == nil {
			return fmt.Errorf("the ValidatingWebhookConfiguration %s is not there yet", m.WebhookConfiguration)
		}
		for _, w := range cfg.Webhooks {
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(w.ClientConfig.CABundle)
			if _, err := s.leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: m.now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return fmt.Errorf("the caBundle of webhook %s does not trust the served certificate %s: %w", w.Name, s.fingerprint, err)
			}
		}
		return nil
	}
}

// serve makes the Secret's pair the one the webhook server hands out.
func (m *Manager) serve(ctx context.Context, data map[string][]byte) {
	p, ok := parsePair(data[KeyTLSCert], data[KeyTLSKey])
	if !ok {
		return
	}
	fp := fingerprint(p.cert)
	if cur := m.served.Load(); cur != nil && cur.fingerprint == fp {
		return
	}
	tc, err := tls.X509KeyPair(p.certPEM, p.keyPEM)
	if err != nil {
		return
	}
	tc.Leaf = p.cert
	m.served.Store(&servedPair{tls: &tc, leaf: p.cert, fingerprint: fp})
	log.FromContext(ctx).Info("serving the webhook certificate", "fingerprint", fp, "notAfter", p.cert.NotAfter.UTC().Format(time.RFC3339))
	m.servingOnce.Do(func() { close(m.serving) })
}
