package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"time"
)

// backdate is how far before its issue a certificate is valid, for clocks a little
// behind the issuer's.
const backdate = 5 * time.Minute

// pair is a parsed certificate with its PEM and, when known, its key.
type pair struct {
	cert    *x509.Certificate
	certPEM []byte
	keyPEM  []byte
}

// parsePair parses a certificate and checks that key is its private key; ok is false
// for anything else (missing, garbage, a key of another certificate).
func parsePair(certPEM, keyPEM []byte) (pair, bool) {
	tc, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil || len(tc.Certificate) == 0 {
		return pair{}, false
	}
	cert, err := x509.ParseCertificate(tc.Certificate[0])
	if err != nil {
		return pair{}, false
	}
	return pair{cert: cert, certPEM: certPEM, keyPEM: keyPEM}, true
}

// parseCerts parses every CERTIFICATE block of a PEM bundle, skipping what does not parse.
func parseCerts(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// encodeCerts is the PEM bundle of certs, in order.
func encodeCerts(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	return slices.ContainsFunc(certs, func(x *x509.Certificate) bool { return x.Equal(c) })
}

// fingerprint names a certificate in the replicas' reports: the first 16 bytes of the
// SHA-256 of its DER, in hex.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:16])
}

// renewAt is when a certificate of the intended lifetime validity is renewed: with a
// third of its lifetime left. A certificate cut short (a serving certificate ends with
// its CA) counts its own, shorter lifetime.
func renewAt(c *x509.Certificate, validity time.Duration) time.Time {
	lifetime := c.NotAfter.Sub(c.NotBefore.Add(backdate))
	if validity > 0 && validity < lifetime {
		lifetime = validity
	}
	return c.NotAfter.Add(-lifetime / 3)
}

// newCA issues a self-signed CA valid for validity from now.
func newCA(now time.Time, validity time.Duration) (pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "nodegroup-operator-webhook-ca " + now.UTC().Format(time.RFC3339)},
		NotBefore: now.Add(-backdate), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return pair{}, err
	}
	return encode(der, key)
}

// newServingCert issues a serving certificate for dnsNames signed by ca, valid for
// validity from now but never past the CA.
func newServingCert(ca pair, dnsNames []string, now time.Time, validity time.Duration) (pair, error) {
	block, _ := pem.Decode(ca.keyPEM)
	if block == nil {
		return pair{}, errors.New("the CA key is not PEM")
	}
	caKey, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return pair{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pair{}, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		NotBefore: now.Add(-backdate), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, caKey)
	if err != nil {
		return pair{}, err
	}
	return encode(der, key)
}

func encode(der []byte, key *ecdsa.PrivateKey) (pair, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return pair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return pair{}, err
	}
	return pair{
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
