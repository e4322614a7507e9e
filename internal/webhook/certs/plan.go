package certs

import (
	"bytes"
	"crypto/x509"
	"maps"
	"slices"
	"strings"
	"time"
)

// Keys of the Secret.
const (
	// KeyCACert and KeyCAKey are the CA that signs the serving certificate.
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
	// KeyTLSCert and KeyTLSKey are the serving certificate every replica serves.
	KeyTLSCert = "tls.crt"
	KeyTLSKey  = "tls.key"
	// KeyCABundle holds every CA the webhook configuration's caBundle must trust: the
	// current one and, during a rotation, the one before it or the one after it.
	KeyCABundle = "ca-bundle.crt"
	// KeyNextCACert and KeyNextCAKey are a new CA that the caBundle trusts already but
	// that signs nothing yet: the first step of a CA rotation.
	KeyNextCACert = "next-ca.crt"
	KeyNextCAKey  = "next-ca.key"
)

// policy is what the Secret must hold: a serving certificate for dnsNames, both it and
// its CA with more than a third of their lifetimes left.
type policy struct {
	dnsNames                 []string
	caValidity, certValidity time.Duration
}

// progress is what a replica has seen of a CA rotation that the Secret alone does not
// say: the rotation's two waits.
type progress struct {
	// nextCATrusted: every webhook of the configuration has trusted the next CA long
	// enough for the API servers to have seen it.
	nextCATrusted bool
	// everyReplicaServes: every live replica serves the Secret's serving certificate.
	everyReplicaServes bool
}

// Steps of the plan, as its reason says them.
const (
	stepIssued      = "issued the webhook CA and its serving certificate"
	stepNextCA      = "the CA has a third of its lifetime left: a new CA is trusted beside it, not yet signing"
	stepNextCANoKey = "the Secret has no usable CA key: a new CA is trusted beside the current one, not yet signing"
	stepPromote     = "the new CA has been trusted long enough: it signs a new serving certificate"
	stepRetire      = "every replica serves a certificate of the new CA: the old CA is no longer trusted"
	stepRenewCert   = "renewed the serving certificate"
	stepBundle      = "the CA bundle lists the current CAs"
)

// plan is the Secret data that data moves to, and why; an empty reason means data is
// current and must not be written. A CA is rotated in three writes, so that the
// caBundle always trusts whatever any replica serves:
//
//  1. a new CA is added to the bundle (KeyNextCACert), signing nothing;
//  2. once every webhook has trusted it long enough (progress.nextCATrusted), it
//     becomes the CA and signs a new serving certificate, which replicas pick up;
//  3. once every replica serves that certificate (progress.everyReplicaServes), the old
//     CA leaves the bundle.
//
// A CA whose key is missing or broken (a Secret cert-manager wrote, one edited by hand)
// is rotated the same way while its serving certificate is still good: replicas serve
// that certificate until the new CA signs one. Only when nothing in the Secret can be
// served (no CA certificate, an expired one, no serving certificate it signed) are a new
// CA and serving certificate issued at once.
func (p policy) plan(data map[string][]byte, pr progress, now time.Time) (map[string][]byte, string, error) {
	cas := parseCerts(data[KeyCACert])
	if len(cas) == 0 || !cas[0].IsCA || !now.Before(cas[0].NotAfter) {
		return p.fresh(now)
	}
	ca, canSign := parsePair(data[KeyCACert], data[KeyCAKey])
	if !canSign {
		ca = pair{cert: cas[0], certPEM: data[KeyCACert]}
	}
	leaf, leafOK := parsePair(data[KeyTLSCert], data[KeyTLSKey])
	leafOK = leafOK && leaf.cert.CheckSignatureFrom(ca.cert) == nil && now.Before(leaf.cert.NotAfter)
	if !canSign && !leafOK {
		return p.fresh(now)
	}
	out := maps.Clone(data)
	var reasons []string
	// The bundle keeps the CAs that have not expired, and always the current one.
	bundle := slices.DeleteFunc(parseCerts(data[KeyCABundle]), func(c *x509.Certificate) bool { return !now.Before(c.NotAfter) })
	if !containsCert(bundle, ca.cert) {
		bundle = append(bundle, ca.cert)
	}
	next, hasNext := parsePair(data[KeyNextCACert], data[KeyNextCAKey])
	if hasNext && (!next.cert.IsCA || !now.Before(next.cert.NotAfter)) {
		hasNext = false
	}
	if !hasNext {
		delete(out, KeyNextCACert)
		delete(out, KeyNextCAKey)
	}
	var issued pair
	switch {
	case !hasNext && (!canSign || !now.Before(renewAt(ca.cert, p.caValidity))):
		n, err := newCA(now, p.caValidity)
		if err != nil {
			return nil, "", err
		}
		out[KeyNextCACert], out[KeyNextCAKey] = n.certPEM, n.keyPEM
		bundle = append(bundle, n.cert)
		if canSign {
			reasons = append(reasons, stepNextCA)
		} else {
			reasons = append(reasons, stepNextCANoKey)
		}
	case hasNext && pr.nextCATrusted:
		ca, canSign = next, true
		delete(out, KeyNextCACert)
		delete(out, KeyNextCAKey)
		out[KeyCACert], out[KeyCAKey] = ca.certPEM, ca.keyPEM
		l, err := newServingCert(ca, p.dnsNames, now, p.certValidity)
		if err != nil {
			return nil, "", err
		}
		issued = l
		reasons = append(reasons, stepPromote)
	case !hasNext && len(bundle) > 1 && pr.everyReplicaServes:
		bundle = []*x509.Certificate{ca.cert}
		reasons = append(reasons, stepRetire)
	}
	if hasNext && !containsCert(bundle, next.cert) {
		bundle = append(bundle, next.cert)
	}
	// The serving certificate is renewed when it is broken or due, with the names asked
	// for. One that lacks a name asked for gets one with its names and those: while a
	// rollout changes the names, the old and the new replicas then agree on one.
	if issued.cert == nil && canSign {
		names := p.dnsNames
		due := !leafOK || !now.Before(renewAt(leaf.cert, p.certValidity))
		if !due && !hasAll(leaf.cert.DNSNames, p.dnsNames) {
			names = union(leaf.cert.DNSNames, p.dnsNames)
			due = true
		}
		if due {
			l, err := newServingCert(ca, names, now, p.certValidity)
			if err != nil {
				return nil, "", err
			}
			issued = l
			reasons = append(reasons, stepRenewCert)
		}
	}
	if issued.cert != nil {
		out[KeyTLSCert], out[KeyTLSKey] = issued.certPEM, issued.keyPEM
	}
	out[KeyCABundle] = encodeCerts(bundle)
	if len(reasons) == 0 && !bytes.Equal(out[KeyCABundle], data[KeyCABundle]) {
		reasons = append(reasons, stepBundle)
	}
	return out, strings.Join(reasons, "; "), nil
}

func hasAll(have, want []string) bool {
	return !slices.ContainsFunc(want, func(n string) bool { return !slices.Contains(have, n) })
}

// union is want followed by the names of have it lacks.
func union(have, want []string) []string {
	out := slices.Clone(want)
	for _, n := range have {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// rotating says whether the Secret is in a CA rotation: a next CA, or an old CA still
// trusted. Replicas report what they serve only then.
func rotating(data map[string][]byte) bool {
	return len(data[KeyNextCACert]) > 0 || len(parseCerts(data[KeyCABundle])) > 1
}

// fresh is a new CA and serving certificate, the CA alone in the bundle.
func (p policy) fresh(now time.Time) (map[string][]byte, string, error) {
	ca, err := newCA(now, p.caValidity)
	if err != nil {
		return nil, "", err
	}
	leaf, err := newServingCert(ca, p.dnsNames, now, p.certValidity)
	if err != nil {
		return nil, "", err
	}
	return map[string][]byte{
		KeyCACert: ca.certPEM, KeyCAKey: ca.keyPEM, KeyTLSCert: leaf.certPEM, KeyTLSKey: leaf.keyPEM,
		KeyCABundle: ca.certPEM,
	}, stepIssued, nil
}
