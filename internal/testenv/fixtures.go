package testenv

import (
	"context"
	"os"
	"path/filepath"

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

// CreateTenant creates a namespace with what a Talos pool needs to render: a Cluster
// (services 10.95.0.0/16) with a KamajiControlPlane at v1.35.4 and a KubevirtCluster, the
// tenant API server's Service and the cluster's Talos secrets; and, once per control plane, the built-in
// location (admitting every namespace) and the management DNS Service.
func CreateTenant(ctx context.Context, c client.Client, ns string, nsLabels map[string]string) error {
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
	secret, err := TalosSecret(ns)
	if err != nil {
		return err
	}
	once := []client.Object{
		&v1.Location{ObjectMeta: metav1.ObjectMeta{Name: v1.BuiltinLocation}, Spec: v1.LocationSpec{
			Provider:          v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
			AllowedNamespaces: &metav1.LabelSelector{},
		}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}},
	}
	for _, obj := range once {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: nsLabels}},
		cp,
		infra,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TenantCluster},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 6443}}}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TenantCluster}, Spec: clusterv1.ClusterSpec{
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: TenantCluster + "." + ns + ".svc", Port: 6443},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.95.0.0/16"}},
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
			},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KamajiControlPlane", Name: TenantCluster},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtCluster", Name: TenantCluster},
		}},
		secret,
	} {
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
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
