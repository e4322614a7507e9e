package certs

import (
	"bytes"
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

var testPolicy = policy{dnsNames: []string{"svc.ns.svc", "localhost"}, caValidity: 90 * time.Hour, certValidity: 30 * time.Hour}

// step plans from data and fails unless the reason is want ("" for no change).
func step(t *testing.T, data map[string][]byte, pr progress, now time.Time, want string) map[string][]byte {
	t.Helper()
	out, reason, err := testPolicy.plan(data, pr, now)
	if err != nil {
		t.Fatal(err)
	}
	if reason != want {
		t.Fatalf("plan at %s: reason %q, want %q", now.Format(time.TimeOnly), reason, want)
	}
	return out
}

func certOf(t *testing.T, data map[string][]byte, certKey, keyKey string) *x509.Certificate {
	t.Helper()
	p, ok := parsePair(data[certKey], data[keyKey])
	if !ok {
		t.Fatalf("%s and %s are not a pair", certKey, keyKey)
	}
	return p.cert
}

// trusts fails unless the bundle in data verifies the serving certificate.
func trusts(t *testing.T, data map[string][]byte, now time.Time) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[KeyCABundle]) {
		t.Fatal("the bundle holds no certificate")
	}
	leaf := certOf(t, data, KeyTLSCert, KeyTLSKey)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "svc.ns.svc", CurrentTime: now}); err != nil {
		t.Fatalf("the bundle does not trust the serving certificate: %v", err)
	}
}

func TestPlanIssuesOnceAndKeepsWhatIsCurrent(t *testing.T) {
	now := time.Now()
	data := step(t, nil, progress{}, now, stepIssued)
	trusts(t, data, now)
	if n := len(parseCerts(data[KeyCABundle])); n != 1 {
		t.Fatalf("a new Secret's bundle holds %d CAs, want 1", n)
	}
	if rotating(data) {
		t.Fatal("a new Secret is rotating")
	}
	// Until two thirds of the serving certificate's lifetime, nothing changes.
	step(t, data, progress{}, now.Add(19*time.Hour), "")
	// A Secret from before the bundle key gets one, trusting its CA.
	legacy := map[string][]byte{KeyCACert: data[KeyCACert], KeyCAKey: data[KeyCAKey], KeyTLSCert: data[KeyTLSCert], KeyTLSKey: data[KeyTLSKey]}
	out := step(t, legacy, progress{}, now, stepBundle)
	if !bytes.Equal(out[KeyCABundle], data[KeyCACert]) {
		t.Fatal("the added bundle is not the CA")
	}
}

func TestPlanRenewsTheServingCertificateUnderTheSameCA(t *testing.T) {
	now := time.Now()
	data := step(t, nil, progress{}, now, stepIssued)
	later := now.Add(21 * time.Hour) // past two thirds of 30h
	renewed := step(t, data, progress{}, later, stepRenewCert)
	if !bytes.Equal(renewed[KeyCACert], data[KeyCACert]) || !bytes.Equal(renewed[KeyCABundle], data[KeyCABundle]) {
		t.Fatal("renewing the serving certificate changed the CA or the bundle")
	}
	if bytes.Equal(renewed[KeyTLSCert], data[KeyTLSCert]) {
		t.Fatal("the serving certificate was not renewed")
	}
	trusts(t, renewed, later)

}

// TestPlanRotatesTheCAWithoutAGap walks a CA rotation: at every step the bundle trusts
// both the serving certificate before the step and the one after it, so whichever a
// replica serves, the API server trusts it.
func TestPlanRotatesTheCAWithoutAGap(t *testing.T) {
	t0 := time.Now()
	data := step(t, nil, progress{}, t0, stepIssued)
	oldCA := certOf(t, data, KeyCACert, KeyCAKey)

	// Past two thirds of the CA's 90h, a new CA joins the bundle and signs nothing.
	t1 := t0.Add(61 * time.Hour)
	// The serving certificate (30h) is due too, and is renewed by the old CA.
	data = step(t, data, progress{}, t1, stepNextCA+"; "+stepRenewCert)
	if err := certOf(t, data, KeyTLSCert, KeyTLSKey).CheckSignatureFrom(oldCA); err != nil {
		t.Fatalf("the renewed serving certificate is not the old CA's: %v", err)
	}
	next := certOf(t, data, KeyNextCACert, KeyNextCAKey)
	if !certOf(t, data, KeyCACert, KeyCAKey).Equal(oldCA) {
		t.Fatal("the new CA signs before it is trusted")
	}
	if bundle := parseCerts(data[KeyCABundle]); len(bundle) != 2 || !containsCert(bundle, oldCA) || !containsCert(bundle, next) {
		t.Fatal("the bundle does not hold the old and the new CA")
	}
	trusts(t, data, t1)
	if !rotating(data) {
		t.Fatal("not rotating with a next CA")
	}

	// Until the webhooks have trusted it long enough, it waits; then the new CA signs.
	step(t, data, progress{}, t1, "")
	beforePromotion := data
	data = step(t, data, progress{nextCATrusted: true}, t1, stepPromote)
	if !certOf(t, data, KeyCACert, KeyCAKey).Equal(next) || len(data[KeyNextCACert]) != 0 {
		t.Fatal("the new CA was not promoted")
	}
	trusts(t, data, t1)
	trusts(t, map[string][]byte{KeyCABundle: data[KeyCABundle], KeyTLSCert: beforePromotion[KeyTLSCert], KeyTLSKey: beforePromotion[KeyTLSKey]}, t1)

	// The old CA stays until every replica serves the new certificate.
	step(t, data, progress{}, t1, "")
	data = step(t, data, progress{everyReplicaServes: true}, t1, stepRetire)
	if bundle := parseCerts(data[KeyCABundle]); len(bundle) != 1 || !bundle[0].Equal(next) {
		t.Fatal("the old CA was not dropped")
	}
	trusts(t, data, t1)
	if rotating(data) {
		t.Fatal("still rotating after the old CA left")
	}
	step(t, data, progress{everyReplicaServes: true}, t1, "")
}

func TestPlanReplacesABrokenCA(t *testing.T) {
	now := time.Now()
	data := step(t, nil, progress{}, now, stepIssued)
	for name, broken := range map[string]map[string][]byte{
		"garbage":      {KeyCACert: []byte("not a certificate"), KeyCAKey: data[KeyCAKey]},
		"another key":  {KeyCACert: data[KeyCACert], KeyCAKey: step(t, nil, progress{}, now, stepIssued)[KeyCAKey]},
		"leaf as a CA": {KeyCACert: data[KeyTLSCert], KeyCAKey: data[KeyTLSKey]},
	} {
		t.Run(name, func(t *testing.T) {
			out := step(t, broken, progress{}, now, stepIssued)
			trusts(t, out, now)
		})
	}
	// An expired CA is replaced too: nothing it signed is trusted any more.
	step(t, data, progress{}, now.Add(91*time.Hour), stepIssued)
}

func TestRenewAtCountsACertificateCutShort(t *testing.T) {
	now := time.Now()
	ca, err := newCA(now, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// A 30h serving certificate signed by a CA with 3h left ends with the CA: it is
	// renewed with a third of its own 3h left, not of 30h (which would be at once, and
	// again at every check).
	leaf, err := newServingCert(ca, []string{"localhost"}, now, 30*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.cert.NotAfter.Equal(ca.cert.NotAfter) {
		t.Fatalf("the serving certificate outlives its CA: %s > %s", leaf.cert.NotAfter, ca.cert.NotAfter)
	}
	if got, want := renewAt(leaf.cert, 30*time.Hour), ca.cert.NotAfter.Add(-time.Hour); got.Sub(want).Abs() > time.Second {
		t.Fatalf("renewAt = %s, want %s", got, want)
	}
}

// TestPlanRotatesAwayFromACAWithoutItsKey: a Secret whose CA key is gone (cert-manager
// wrote it, or someone edited it) but whose serving certificate is good keeps serving
// that certificate while a new CA is trusted, then moves to the new CA, with no gap.
func TestPlanRotatesAwayFromACAWithoutItsKey(t *testing.T) {
	now := time.Now()
	data := step(t, nil, progress{}, now, stepIssued)
	delete(data, KeyCAKey)
	keyless := step(t, data, progress{}, now, stepNextCANoKey)
	if !bytes.Equal(keyless[KeyTLSCert], data[KeyTLSCert]) {
		t.Fatal("the serving certificate changed before a new CA was trusted")
	}
	trusts(t, keyless, now)
	// Even when the serving certificate is due, nothing can sign it until the new CA is
	// trusted: it waits.
	step(t, keyless, progress{}, now.Add(21*time.Hour), "")
	promoted := step(t, keyless, progress{nextCATrusted: true}, now, stepPromote)
	trusts(t, promoted, now)
	if _, ok := parsePair(promoted[KeyCACert], promoted[KeyCAKey]); !ok {
		t.Fatal("the promoted CA has no key")
	}
}

// TestPlanAgreesOnNamesDuringARollout: replicas of two versions that want different
// DNS names settle on one certificate with both, instead of reissuing each other's.
func TestPlanAgreesOnNamesDuringARollout(t *testing.T) {
	now := time.Now()
	data := step(t, nil, progress{}, now, stepIssued)
	other := testPolicy
	other.dnsNames = []string{"svc.ns.svc", "webhook.example.com"}
	both, reason, err := other.plan(data, progress{}, now)
	if err != nil || reason != stepRenewCert {
		t.Fatalf("new names: reason %q (%v), want %q", reason, err, stepRenewCert)
	}
	leaf := certOf(t, both, KeyTLSCert, KeyTLSKey)
	if !hasAll(leaf.DNSNames, testPolicy.dnsNames) || !hasAll(leaf.DNSNames, other.dnsNames) {
		t.Fatalf("the certificate names %v, want the names of both versions", leaf.DNSNames)
	}
	step(t, both, progress{}, now, "")
	if _, reason, _ := other.plan(both, progress{}, now); reason != "" {
		t.Fatalf("the new version reissues the shared certificate: %q", reason)
	}
	// Its next renewal drops the names no one asks for any more.
	renewed, reason, err := other.plan(both, progress{}, now.Add(21*time.Hour))
	if err != nil || reason != stepRenewCert {
		t.Fatalf("renewal: %q (%v)", reason, err)
	}
	if got := certOf(t, renewed, KeyTLSCert, KeyTLSKey).DNSNames; !slices.Equal(got, other.dnsNames) {
		t.Fatalf("the renewed certificate names %v, want %v", got, other.dnsNames)
	}
}
