package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// authority is a CA this package makes, with its key, to sign the certificates of
// processes it starts on loopback.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM and KeyPEM are the CA's certificate and key, PEM.
	CertPEM, KeyPEM []byte
}

// certLifetime is long enough for any run, short enough that no one keeps these.
const certLifetime = 7 * 24 * time.Hour

func newAuthority(commonName string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, CertPEM: certPEM(der), KeyPEM: keyPEM}, nil
}

// serving issues a server certificate for 127.0.0.1 and localhost.
func (a *authority) serving(commonName string) (cert, key []byte, err error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// client issues a client certificate for user in groups, as an API server whose
// --client-ca-file is this CA authenticates it.
func (a *authority) client(user string, groups ...string) (cert, key []byte, err error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (a *authority) issue(tmpl *x509.Certificate) (cert, key []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(certLifetime)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &priv.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	if key, err = keyPEM(priv); err != nil {
		return nil, nil, err
	}
	return certPEM(der), key, nil
}

// serial is a random certificate serial number, so that two CAs of one run never issue
// two certificates a client could confuse.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return n
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// writeFiles writes each file (name to content) into dir, readable by this user only.
func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// servingCert is a CA and a certificate for 127.0.0.1 signed by it, written as tls.crt
// and tls.key into dir: the folder Cluster API's webhook server reads, so the API
// server can call it on loopback. (The operator issues its own, as it does in a
// cluster: Cluster API's manager is not our product.)
type servingCert struct {
	Dir    string
	CAData []byte
}

func newServingCert(dir string) (*servingCert, error) {
	ca, err := newAuthority("e2e-webhook-ca")
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.serving("127.0.0.1")
	if err != nil {
		return nil, err
	}
	if err := writeFiles(dir, map[string][]byte{"tls.crt": cert, "tls.key": key}); err != nil {
		return nil, err
	}
	return &servingCert{Dir: dir, CAData: ca.CertPEM}, nil
}
