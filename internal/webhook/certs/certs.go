// Package certs gives the operator's admission webhook a serving certificate without
// cert-manager. The Secret is the one source of the CA and the serving pair: every
// replica watches it, serves its pair from memory (no files, so a new pair is served the
// moment the Secret changes), and keeps the webhook configuration's caBundle equal to
// the CAs it lists. Any replica may renew; writes carry the resourceVersion they read,
// so replicas racing to create or renew settle on one pair, the loser reading the
// winner's.
//
// The webhook fails closed, so a replica serving a certificate the API server does not
// trust blocks every pool's admission. A serving certificate is renewed under the same
// CA, which the caBundle already trusts. A CA is rotated in steps (see plan): the new CA
// is trusted before it signs anything, and the old one is dropped only once every live
// replica reports, in an annotation of the Secret, that it serves a certificate of the
// new one.
package certs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Defaults of the rotation's waits.
const (
	defaultTrustSettle    = 10 * time.Second
	defaultReportInterval = 5 * time.Second
	// maxWait bounds the wait between checks when nothing happens: renewals are timed
	// from the certificates, this only guards against a wall clock that jumps.
	maxWait = time.Hour
)

// Manager keeps the webhook's certificates. Start runs it; it must run on every
// replica, not only the leader, before the webhook server starts (Serving).
type Manager struct {
	// Client reads and writes the Secret and the webhook configuration.
	Client kubernetes.Interface
	// Secret holds the CA and the serving pair.
	Secret types.NamespacedName
	// WebhookConfiguration is the ValidatingWebhookConfiguration whose caBundle is kept;
	// empty keeps none.
	WebhookConfiguration string
	// DNSNames the serving certificate is valid for (the webhook Service's names).
	DNSNames []string
	// Identity names this replica in its reports (the Pod's name).
	Identity string
	// CAValidity and CertValidity are the lifetimes; each is renewed with a third left.
	CAValidity   time.Duration
	CertValidity time.Duration
	// TrustSettle is how long every webhook must have trusted a new CA before it signs
	// the serving certificate: the time the API servers take to see a changed caBundle.
	// 0 is 10s.
	TrustSettle time.Duration
	// ReportInterval is how often each replica reports what it serves during a CA
	// rotation; a report counts as live for three intervals. 0 is 5s.
	ReportInterval time.Duration
	// Now is the clock of the certificates' validity, for tests; nil is time.Now.
	Now func() time.Time

	served      atomic.Pointer[servedPair]
	servingOnce sync.Once
	serving     chan struct{}
	kick        chan struct{}
	secrets     cache.Store
	configs     cache.Store
	initOnce    sync.Once

	// What this replica has seen of a rotation; only the loop in Start touches them.
	nextTrusted      string // fingerprint of the next CA every webhook trusts, or ""
	nextTrustedSince time.Time
	leafSeen         string // fingerprint of the Secret's serving certificate
	leafSince        time.Time
	reports          map[string]report
	lastReport       time.Time
	lastData         map[string][]byte // of the Secret as last seen
}

func (m *Manager) init() {
	m.initOnce.Do(func() {
		m.serving = make(chan struct{})
		m.kick = make(chan struct{}, 1)
		m.reports = map[string]report{}
	})
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Manager) policy() policy {
	return policy{dnsNames: m.DNSNames, caValidity: m.CAValidity, certValidity: m.CertValidity}
}

func (m *Manager) trustSettle() time.Duration {
	if m.TrustSettle > 0 {
		return m.TrustSettle
	}
	return defaultTrustSettle
}

func (m *Manager) reportInterval() time.Duration {
	if m.ReportInterval > 0 {
		return m.ReportInterval
	}
	return defaultReportInterval
}

// Lower bounds of the lifetimes: a serving certificate renewed with a third left must
// live long enough for the replicas to pick it up, and a CA long enough for a rotation's
// waits.
const minCertValidity = 10 * time.Second

func (m *Manager) minCAValidity() time.Duration {
	return 3 * (m.trustSettle() + 3*m.reportInterval())
}

// Validate refuses lifetimes too short to renew within, and a configuration without the
// names it needs.
func (m *Manager) Validate() error {
	switch {
	case m.Secret.Name == "" || m.Secret.Namespace == "":
		return errors.New("the webhook certificate needs the Secret's namespace and name")
	case len(m.DNSNames) == 0 || m.DNSNames[0] == "":
		return errors.New("the webhook certificate needs at least one DNS name")
	case m.Identity == "":
		return errors.New("the webhook certificate manager needs this replica's name")
	case m.CertValidity < minCertValidity:
		return fmt.Errorf("the serving certificate's validity %s is below %s", m.CertValidity, minCertValidity)
	case m.CAValidity < m.minCAValidity():
		return fmt.Errorf("the CA's validity %s is below %s, the time a CA rotation takes three times over", m.CAValidity, m.minCAValidity())
	case m.CertValidity > m.CAValidity:
		return fmt.Errorf("the serving certificate's validity %s is longer than the CA's %s", m.CertValidity, m.CAValidity)
	}
	return nil
}

// Start watches the Secret and the webhook configuration and keeps both current until
// ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	m.init()
	if err := m.Validate(); err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithName("webhook-certs")
	ctx = log.IntoContext(ctx, logger)
	secrets := m.informer(&corev1.Secret{}, m.Secret.Name,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return m.Client.CoreV1().Secrets(m.Secret.Namespace).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return m.Client.CoreV1().Secrets(m.Secret.Namespace).Watch(ctx, o)
		})
	m.secrets = secrets.GetStore()
	informers := []cache.SharedIndexInformer{secrets}
	if m.WebhookConfiguration != "" {
		configs := m.informer(&admissionregistrationv1.ValidatingWebhookConfiguration{}, m.WebhookConfiguration,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return m.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return m.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Watch(ctx, o)
			})
		m.configs = configs.GetStore()
		informers = append(informers, configs)
	}
	for _, inf := range informers {
		go inf.RunWithContext(ctx)
	}
	for _, inf := range informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil // ctx ended
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.kick:
		case <-timer.C:
		}
		wait, err := m.sync(ctx)
		if err != nil {
			failures++
			wait = min(time.Duration(1<<min(failures, 5))*time.Second, 30*time.Second)
			logger.Error(err, "keeping the webhook certificate", "retry in", wait)
		} else {
			failures = 0
		}
		timer.Reset(wait)
	}
}

// sync moves the Secret one step, serves its pair and keeps the caBundle; it returns
// how long to wait before the next check when nothing changes.
func (m *Manager) sync(ctx context.Context) (time.Duration, error) {
	logger := log.FromContext(ctx)
	now := m.now()
	secret := m.secret()
	if secret == nil {
		// A Secret deleted under running replicas comes back with what they serve, so
		// the caBundle keeps trusting it; only a first start issues anew.
		data, reason := m.lastData, "the Secret was deleted: recreated it with the CA and the pair this replica serves"
		if data == nil {
			var err error
			if data, reason, err = m.policy().plan(nil, progress{}, now); err != nil {
				return 0, err
			}
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.Secret.Namespace, Name: m.Secret.Name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "nodegroup-operator"}},
			Type: corev1.SecretTypeTLS, Data: data,
		}
		_, err := m.Client.CoreV1().Secrets(m.Secret.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			logger.Info("another replica created the webhook certificate Secret first; serving its pair")
			return time.Second, nil // the watch brings the winner's Secret
		}
		if err != nil {
			return 0, fmt.Errorf("creating the Secret %s: %w", m.Secret, err)
		}
		logger.Info(reason, "secret", m.Secret.String())
		return time.Second, nil
	}
	m.lastData = secret.Data
	m.serve(ctx, secret.Data)
	m.observe(secret, now)
	data, reason, err := m.policy().plan(secret.Data, m.progress(now), now)
	if err != nil {
		return 0, err
	}
	if reason != "" {
		updated := secret.DeepCopy()
		updated.Data = data
		if !rotating(data) {
			for k := range updated.Annotations {
				if strings.HasPrefix(k, ReportAnnotationPrefix) {
					delete(updated.Annotations, k)
				}
			}
		}
		// The update carries the resourceVersion read: a replica that wrote first wins,
		// the others get a conflict and take its Secret from the watch.
		_, err := m.Client.CoreV1().Secrets(m.Secret.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return time.Second, nil
		}
		if err != nil {
			return 0, fmt.Errorf("updating the Secret %s: %w", m.Secret, err)
		}
		logger.Info(reason, "secret", m.Secret.String())
		return time.Second, nil
	}
	if err := m.injectCABundle(ctx, secret.Data[KeyCABundle]); err != nil {
		return 0, err
	}
	if rotating(secret.Data) {
		if now.Sub(m.lastReport) >= m.reportInterval() {
			if err := m.reportServing(ctx); err != nil {
				return 0, err
			}
		}
		return m.reportInterval(), nil
	}
	return m.untilRenewal(secret.Data, now), nil
}

// untilRenewal is the wait until the serving certificate or the CA is due for renewal.
func (m *Manager) untilRenewal(data map[string][]byte, now time.Time) time.Duration {
	wait := maxWait
	if leaf, ok := parsePair(data[KeyTLSCert], data[KeyTLSKey]); ok {
		wait = min(wait, renewAt(leaf.cert, m.CertValidity).Sub(now))
	}
	if ca, ok := parsePair(data[KeyCACert], data[KeyCAKey]); ok {
		wait = min(wait, renewAt(ca.cert, m.CAValidity).Sub(now))
	}
	return max(wait, time.Second)
}
