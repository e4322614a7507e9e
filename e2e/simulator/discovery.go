package simulator

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// discover is kubeadm's bootstrap-token discovery (discovery/token): read cluster-info
// without trusting the server, check that the token signed it (bootstrapsigner's JWS)
// and that its CA matches a pin, read it again trusting that CA, and join the server it
// names.
func discover(ctx context.Context, d *tokenDiscovery, agent string) (*joinCredentials, error) {
	if d == nil {
		return nil, errors.New("kubeadm: the join configuration has no discovery.bootstrapToken")
	}
	parts := bootstraputil.BootstrapTokenRegexp.FindStringSubmatch(d.token)
	if len(parts) != 3 {
		return nil, fmt.Errorf("kubeadm: the discovery token is not of the form %q", bootstrapapi.BootstrapTokenPattern)
	}
	id, secret := parts[1], parts[2]
	if len(d.caCertHashes) == 0 {
		return nil, errors.New("kubeadm: discovery.bootstrapToken.caCertHashes is empty and unsafeSkipCAVerification is not set")
	}
	endpoint := "https://" + d.apiServerEndpoint
	insecure, err := clusterInfo(ctx, &rest.Config{Host: endpoint, UserAgent: agent, Timeout: remoteTimeout,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		return nil, err
	}
	kubeconfig := insecure[bootstrapapi.KubeConfigKey]
	signature, ok := insecure[bootstrapapi.JWSSignatureKeyPrefix+id]
	if !ok {
		return nil, pendingError{fmt.Errorf("kubeadm: there is no JWS signed token in the cluster-info ConfigMap: the token id %q is invalid for this cluster or it has expired", id)}
	}
	if !detachedTokenIsValid(signature, kubeconfig, id, secret) {
		return nil, errors.New("kubeadm: failed to verify the JWS signature of the cluster-info ConfigMap: this API server cannot be trusted")
	}
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil || len(cfg.Clusters) != 1 {
		return nil, fmt.Errorf("kubeadm: the cluster-info kubeconfig holds no single cluster (%v)", err)
	}
	var server string
	var ca []byte
	for _, c := range cfg.Clusters {
		server, ca = c.Server, c.CertificateAuthorityData
	}
	if err := checkPins(ca, d.caCertHashes); err != nil {
		return nil, err
	}
	// Read again trusting that CA: a server in the middle of the first read cannot
	// answer the second.
	secure, err := clusterInfo(ctx, &rest.Config{Host: endpoint, UserAgent: agent, Timeout: remoteTimeout,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		return nil, err
	}
	if secure[bootstrapapi.KubeConfigKey] != kubeconfig {
		return nil, errors.New("kubeadm: the cluster-info read with the pinned CA differs from the first read")
	}
	return &joinCredentials{server: server, caPEM: ca, token: d.token}, nil
}

// clusterInfo reads kube-public/cluster-info anonymously.
func clusterInfo(ctx context.Context, cfg *rest.Config) (map[string]string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubeadm: reading the cluster-info ConfigMap from %s: %w", cfg.Host, err)
	}
	return cm.Data, nil
}

// caCertHashes are kubeadm's pins of a CA bundle: sha256:<hex> of each certificate's
// Subject Public Key Info (pubkeypin.Hash).
func caCertHashes(caPEM []byte) ([]string, error) {
	certs, err := certutil.ParseCertsPEM(caPEM)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(certs))
	for i, c := range certs {
		sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		out[i] = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out, nil
}

// checkPins is kubeadm's pubkeypin.Set.CheckAny: some certificate of the CA bundle must
// match a pin.
func checkPins(caPEM []byte, pins []string) error {
	hashes, err := caCertHashes(caPEM)
	if err != nil {
		return fmt.Errorf("kubeadm: the cluster-info CA: %w", err)
	}
	for _, p := range pins {
		if slices.Contains(hashes, strings.ToLower(p)) {
			return nil
		}
	}
	return fmt.Errorf("kubeadm: the cluster CA found in the cluster-info ConfigMap is invalid: none of the public keys %v are pinned", hashes)
}

// detachedTokenIsValid checks bootstrapsigner's signature of content: a JWS (RFC 7515)
// in compact form with the content left out (Appendix F), HS256 with the token secret
// as key and the token id as kid. It verifies what k8s.io/cluster-bootstrap's
// jws.DetachedTokenIsValid does, without the JOSE library that package needs.
func detachedTokenIsValid(detached, content, tokenID, tokenSecret string) bool {
	header, empty, signature, ok := cut3(detached)
	if !ok || empty != "" {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return false
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if json.Unmarshal(raw, &h) != nil || h.Alg != "HS256" || h.Kid != tokenID {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(signature)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(tokenSecret))
	mac.Write([]byte(header + "." + base64.RawURLEncoding.EncodeToString([]byte(content))))
	return hmac.Equal(got, mac.Sum(nil))
}

// cut3 splits a compact JWS into its three parts.
func cut3(s string) (a, b, c string, ok bool) {
	a, rest, ok1 := strings.Cut(s, ".")
	b, c, ok2 := strings.Cut(rest, ".")
	return a, b, c, ok1 && ok2 && !strings.Contains(c, ".")
}
