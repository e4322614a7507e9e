package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// TenantCluster is the name of the Cluster, its KamajiControlPlane and its API server
// Service in a namespace made by CreateTenant.
const TenantCluster = "tenant"

// TenantOptions shape the tenant CreateTenant makes.
type TenantOptions struct {
	// Labels are the namespace's labels.
	Labels map[string]string
	// ProviderEndpoint leaves the Cluster's control-plane endpoint to its control-plane
	// provider (the e2e simulator's Kamaji), instead of the Service's DNS name.
	ProviderEndpoint bool
	// Kubeconfig, when set, is written as the Kamaji control-plane provider writes it
	// (<cluster>-kubeconfig), with a fresh tenant CA in <cluster>-ca: the operator mints
	// the cluster's Talos identity from them and keeps its bootstrap token in the cluster
	// the kubeconfig names.
	Kubeconfig []byte
	// TalosSecret adds a platform-made <cluster>-talos with the checked-in test CAs, for
	// suites that run the pool reconciler without the identity controller.
	TalosSecret bool
}

// CreateTenant creates a namespace as the platform prepares a tenant: a Cluster
// (services 10.95.0.0/16) with a KamajiControlPlane at v1.35.4 and a KubevirtCluster,
// and the tenant API server's Service; what opts adds; and, once per control plane, the
// built-in location (admitting every namespace) and the management DNS Service.
func CreateTenant(ctx context.Context, c client.Client, ns string, opts TenantOptions) error {
	once, objs, err := TenantObjects(ns, opts)
	if err != nil {
		return err
	}
	for _, obj := range once {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// TenantObjects are the objects CreateTenant creates: once, those of the control plane
// (the built-in location, the management DNS Service), and objs, the tenant's. The
// Services have no ClusterIP: the API server gives them one.
func TenantObjects(ns string, opts TenantOptions) (once, objs []client.Object, err error) {
	cp := &unstructured.Unstructured{}
	cp.SetAPIVersion("controlplane.cluster.x-k8s.io/v1alpha2")
	cp.SetKind("KamajiControlPlane")
	cp.SetNamespace(ns)
	cp.SetName(TenantCluster)
	_ = unstructured.SetNestedField(cp.Object, "v1.35.4", "spec", "version")
	// Cluster API counts a Cluster's infrastructure as ready only through its
	// infrastructureRef; a machine health check never remediates without it.
	infra := &unstructured.Unstructured{}
	infra.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	infra.SetKind("KubevirtCluster")
	infra.SetNamespace(ns)
	infra.SetName(TenantCluster)
	once = []client.Object{
		&v1.Location{ObjectMeta: metav1.ObjectMeta{Name: v1.BuiltinLocation}, Spec: v1.LocationSpec{
			Provider:          v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
			AllowedNamespaces: &metav1.LabelSelector{},
		}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}},
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TenantCluster}, Spec: clusterv1.ClusterSpec{
		ClusterNetwork: clusterv1.ClusterNetwork{
			Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.95.0.0/16"}},
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
		},
		ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KamajiControlPlane", Name: TenantCluster},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtCluster", Name: TenantCluster},
	}}
	if !opts.ProviderEndpoint {
		cluster.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: TenantCluster + "." + ns + ".svc", Port: 6443}
	}
	objs = []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: opts.Labels}},
		cp,
		infra,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TenantCluster},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 6443}}}},
		cluster,
	}
	if opts.Kubeconfig != nil {
		kamaji, err := KamajiSecrets(ns, TenantCluster, opts.Kubeconfig)
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, kamaji...)
	}
	if opts.TalosSecret {
		secret, err := TalosSecret(ns)
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, secret)
	}
	return once, objs, nil
}

// KamajiSecrets are the Secrets the Kamaji control-plane provider writes for a Cluster
// that Cluster API and the operator read: <cluster>-ca (a fresh tenant CA, tls.crt and
// tls.key) and <cluster>-kubeconfig (kubeconfig under "value"), both of type
// cluster.x-k8s.io/secret and labelled with the cluster's name.
func KamajiSecrets(ns, cluster string, kubeconfig []byte) ([]client.Object, error) {
	ca, key, err := NewCA(cluster + "-ca")
	if err != nil {
		return nil, err
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}}
	}
	return []client.Object{
		&corev1.Secret{ObjectMeta: meta(cluster + "-ca"), Type: clusterv1.ClusterSecretType,
			Data: map[string][]byte{corev1.TLSCertKey: ca, corev1.TLSPrivateKeyKey: key}},
		&corev1.Secret{ObjectMeta: meta(cluster + "-kubeconfig"), Type: clusterv1.ClusterSecretType,
			Data: map[string][]byte{"value": kubeconfig}},
	}, nil
}

// NewCA is a fresh self-signed CA certificate and its key, both PEM.
func NewCA(commonName string) (cert, key []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// TalosSecret is the tenant cluster's Talos secrets, with the checked-in test CAs.
func TalosSecret(ns string) (*corev1.Secret, error) {
	read := func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join(RepoRoot(), "internal", "render", "testdata", name))
	}
	machineCA, err := read("machine-ca.crt")
	if err != nil {
		return nil, err
	}
	clusterCA, err := read("cluster-ca.crt")
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TenantCluster + resolve.TalosSecretSuffix}, Data: map[string][]byte{
		resolve.TalosKeyMachineToken:   []byte("w7ysn3.2ti4qmz2k6ajb9nt"),
		resolve.TalosKeyMachineCACert:  machineCA,
		resolve.TalosKeyClusterCACert:  clusterCA,
		resolve.TalosKeyClusterID:      []byte("Nhx0p0XcSPVpeFbSiGrMbT6cVTuqc1UwIuJ0jZ_6rzI="),
		resolve.TalosKeyClusterSecret:  []byte("bx4j3zGGpZ1lx1D0dw4XzVLHzJ8lwnhc0eMdQ+k6sF0="),
		resolve.TalosKeyBootstrapToken: []byte("abcdef.0123456789abcdef"),
	}}, nil
}
