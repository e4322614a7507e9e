// Package localrun runs the operator binary beside a local control plane
// (internal/testenv) the way the chart deploys it, so every suite runs what ships: the
// chart rendered with the Helm Go SDK and installed but for its Deployment (Release),
// the binary started with the Deployment's own arguments and environment, changing only
// what a process outside a Pod cannot have (Command: listen addresses, the kubeconfig,
// folders), authenticated as the chart's ServiceAccount (so a local run proves the
// chart's RBAC is enough), with its webhook on and its certificate its own, called by
// the API server on loopback. The demo and the scale benchmark under hack/, and the
// end-to-end environment (e2e/framework), share it.
package localrun

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodegroup-io/nodegroup-operator/internal/gobuild"
	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
)

// The release the chart is installed as, and the release of the CRD chart installed
// before it (the chart's crds.enabled is false: the CRDs are a release of their own).
const (
	ReleaseName      = "nodegroup-operator"
	ReleaseNamespace = "nodegroup-system"
	ServiceAccount   = "nodegroup-operator"
	CRDReleaseName   = "nodegroup-operator-crds"
)

// OperatorUser is the user name the API server sees for the operator run with
// ServiceAccountKubeconfig, as audit events and RBAC name it.
const OperatorUser = "system:serviceaccount:" + ReleaseNamespace + ":" + ServiceAccount

// BuildOperator builds cmd/nodegroup-operator of the repository at root into out, for
// this machine, as the release builds the image's binary.
func BuildOperator(root, out string) error {
	if err := gobuild.Build(context.Background(), root, "./cmd/nodegroup-operator", gobuild.Host(), "", out); err != nil {
		return fmt.Errorf("building the operator: %w", err)
	}
	return nil
}

// chartObjects renders the chart charts/<chart> at root with the Helm Go SDK, as the
// release named release in ReleaseNamespace with values, and returns its objects in the
// order of the chart's files, each namespaced kind in ReleaseNamespace.
func chartObjects(root, chart, release string, values map[string]any) ([]*unstructured.Unstructured, error) {
	ch, err := loader.Load(filepath.Join(root, "charts", chart))
	if err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, values); err != nil {
		return nil, fmt.Errorf("chart dependencies: %w", err)
	}
	rv, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: release, Namespace: ReleaseNamespace, Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, helpers
		}
		docs, err := yamldocs.Objects([]byte(out[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, obj := range docs {
			if obj.GetNamespace() == "" && namespaced(obj.GetKind()) {
				obj.SetNamespace(ReleaseNamespace)
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// namespaced reports whether the chart's objects of kind live in a namespace.
func namespaced(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "NodeGroupClass", "Location", "Namespace",
		"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "CustomResourceDefinition",
		"FlowSchema", "PriorityLevelConfiguration":
		return false
	}
	return true
}

// Kubeconfig is a kubeconfig of cfg's server, CA and bearer token.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["user"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "user"
	return clientcmd.Write(*kc)
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the chart's
// ServiceAccount with a token valid for validity, so the operator runs with exactly the
// chart's RBAC.
func ServiceAccountKubeconfig(ctx context.Context, cfg *rest.Config, path string, validity time.Duration) error {
	token, err := ServiceAccountToken(ctx, cfg, ReleaseNamespace, ServiceAccount, validity)
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "operator", Namespace: ReleaseNamespace}
	kc.CurrentContext = "operator"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// ServiceAccountToken requests a token of the ServiceAccount namespace/name, valid for
// validity.
func ServiceAccountToken(ctx context.Context, cfg *rest.Config, namespace, name string, validity time.Duration) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	expiry := int64(validity / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for the ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// ServiceAccountConfig creates the ServiceAccount namespace/name, binds it to the
// ClusterRole clusterRole, and returns a client configuration that authenticates as it
// with a token valid for validity: another client that the API server authenticates and
// schedules like the operator.
func ServiceAccountConfig(ctx context.Context, cfg *rest.Config, namespace, name, clusterRole string, validity time.Duration) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + ":" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	token, err := ServiceAccountToken(ctx, cfg, namespace, name, validity)
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}, BearerToken: token}, nil
}
