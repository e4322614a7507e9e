package simulator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

const (
	// certificateWait is how long one reconcile waits for the controller-manager to sign
	// the kubelet's CSR; then it requeues, after certificatePoll, and waits again.
	certificateWait = 2 * time.Second
	certificatePoll = 500 * time.Millisecond
	// certificateTimeout gives up on a CSR nothing signs: the kubelet asks again.
	certificateTimeout = time.Minute
	// discoveryGrace is how long a kubeadm join waits quietly for bootstrapsigner to sign
	// cluster-info with a new token before it reports the wait as a failure.
	discoveryGrace = 30 * time.Second
)

// kubeletClientUsages are the usages a kubelet asks for its client certificate with an
// ECDSA key, which the csrapproving controller approves for a node client.
var kubeletClientUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

// joinCredentials are what a kubelet's TLS bootstrap starts from: the API server, the CA
// it trusts it by (PEM), and a bootstrap token.
type joinCredentials struct {
	server string
	caPEM  []byte
	token  string
}

// tokenDiscovery is kubeadm's bootstrap-token discovery: where to read cluster-info, the
// token that signs it, and the pins of the CA it must carry.
type tokenDiscovery struct {
	token, apiServerEndpoint string
	caCertHashes             []string
}

// joinState is a kubelet's TLS bootstrap in progress: its key (the kubelet keeps it on
// disk across restarts) and the CSR it is waiting on.
type joinState struct {
	key *ecdsa.PrivateKey
	// csrName and csrUID name the pending CSR; requested is when it was sent.
	csrName   string
	csrUID    types.UID
	requested time.Time
	// cert, once issued, is the kubelet's client certificate (PEM).
	cert []byte
	// started is the first attempt, failures the failed attempts since, for backoff.
	started  time.Time
	failures int
}

// pendingError is a step of the join that is not done yet rather than failed.
type pendingError struct{ error }

// joinState is the TLS bootstrap of the kubelet of the infrastructure machine id.
func (s *sim) joinState(id types.UID) (*joinState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.joins[id]; st != nil {
		return st, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	st := &joinState{key: key, started: time.Now()}
	s.joins[id] = st
	return st, nil
}

// joined forgets a finished TLS bootstrap.
func (s *sim) joined(id types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.joins, id)
}

// tlsBootstrap is the kubelet's TLS bootstrap: authenticated by the bootstrap token, it
// asks the tenant for a client certificate for system:node:<name> and waits, briefly,
// for the controller-manager to approve and sign it. It returns the kubelet's own
// credentials, or nil while the certificate is not issued yet.
func (s *sim) tlsBootstrap(ctx context.Context, st *joinState, k *kubelet) (*rest.Config, error) {
	creds := k.bootstrap
	if creds == nil {
		var err error
		if creds, err = discover(ctx, k.discovery, k.userAgent()); err != nil {
			return nil, err
		}
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(st.key)
	if err != nil {
		return nil, err
	}
	nodeConfig := &rest.Config{
		Host: creds.server, UserAgent: k.userAgent(), Timeout: remoteTimeout,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.caPEM, CertData: st.cert, KeyData: keyPEM},
	}
	if st.cert != nil {
		return nodeConfig, nil
	}
	bootstrap, err := kubernetes.NewForConfig(&rest.Config{
		Host: creds.server, BearerToken: creds.token, UserAgent: k.userAgent(), Timeout: remoteTimeout,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.caPEM},
	})
	if err != nil {
		return nil, err
	}
	if st.csrName == "" {
		subject := &pkix.Name{CommonName: "system:node:" + k.nodeName, Organization: []string{nodesGroup}}
		request, err := certutil.MakeCSR(st.key, subject, nil, nil)
		if err != nil {
			return nil, err
		}
		name, err := csrName(st.key, subject)
		if err != nil {
			return nil, err
		}
		if st.csrName, st.csrUID, err = csr.RequestCertificateWithContext(ctx, bootstrap, request, name,
			certificatesv1.KubeAPIServerClientKubeletSignerName, nil, kubeletClientUsages, st.key); err != nil {
			return nil, err
		}
		st.requested = time.Now()
	}
	wait, cancel := context.WithTimeout(ctx, certificateWait)
	defer cancel()
	cert, err := csr.WaitForCertificate(wait, bootstrap, st.csrName, st.csrUID)
	if err == nil {
		st.cert = cert
		nodeConfig.CertData = cert
		return nodeConfig, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	name := st.csrName
	if wait.Err() != nil {
		if time.Since(st.requested) < certificateTimeout {
			return nil, nil // not signed yet: look again soon
		}
		err = fmt.Errorf("no certificate was issued in %s", certificateTimeout)
	}
	// Denied, failed or never signed: the kubelet starts over with a new key, and so a
	// new CSR, on its next attempt.
	key, keyErr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if keyErr != nil {
		return nil, keyErr
	}
	st.key, st.csrName, st.csrUID = key, "", ""
	return nil, fmt.Errorf("the CSR %s: %w", name, err)
}

// csrName names the kubelet's CSR after its key and subject, as the kubelet does, so a
// retry finds the CSR it already sent.
func csrName(key *ecdsa.PrivateKey, subject *pkix.Name) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(der)
	h.Write([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		h.Write([]byte(o))
	}
	return "node-csr-" + hex.EncodeToString(h.Sum(nil))[:32], nil
}
