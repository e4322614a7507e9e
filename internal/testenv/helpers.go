package testenv

import (
	"context"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Timeout is how long the controller suites wait for a controller to act.
const Timeout = 30 * time.Second

// Eventually polls cond every 100 ms until it holds, and fails the test after Timeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for: %s", what)
}

// WaitQuiet waits for a second in which count (writes, reconciles) does not move, and
// fails the test when there is none within Timeout.
func WaitQuiet[N comparable](t testing.TB, what string, count func() N) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	last, since := count(), time.Now()
	for time.Since(since) < time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("%s never stopped: no quiet second within %s", what, Timeout)
		}
		time.Sleep(100 * time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
}

// MustCreate creates obj with the environment's client and fails the test on any error.
func (e *Env) MustCreate(t testing.TB, obj client.Object) {
	t.Helper()
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// WebhooksTrust returns an error unless every webhook's caBundle in cfg verifies cert for
// the host name dnsName.
func WebhooksTrust(cfg *admissionregistrationv1.ValidatingWebhookConfiguration, cert *x509.Certificate, dnsName string) error {
	for _, w := range cfg.Webhooks {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(w.ClientConfig.CABundle)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: dnsName}); err != nil {
			return fmt.Errorf("webhook %s: %w", w.Name, err)
		}
	}
	return nil
}

// Reconciles is how many reconciles the named controller finished in this process (any
// result), from controller-runtime's own counter.
func Reconciles(controller string) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		panic(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
