package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const (
	releaseName      = "nodegroup-operator"
	releaseNamespace = "nodegroup-system"
	serviceAccount   = "nodegroup-operator"
)

// installChart renders the platform chart with the Helm Go SDK and applies what it
// renders: RBAC, the built-in classes and location, the Deployment (inert here: the demo
// runs no kubelet). The CRDs are already installed with the control plane. The webhook
// is off: this API server cannot call back into a local process by Service name.
func installChart(ctx context.Context, c client.Client, root string) error {
	ch, err := loader.Load(filepath.Join(root, "charts", "nodegroup-operator"))
	if err != nil {
		return err
	}
	vals := map[string]any{"webhook": map[string]any{"enabled": false}}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		return fmt.Errorf("chart values: %w", err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return fmt.Errorf("rendering the chart: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out[name])))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if obj.GetNamespace() == "" && namespaced(obj.GetKind()) {
				obj.SetNamespace(releaseNamespace)
			}
			if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner("helm"), client.ForceOwnership); err != nil {
				return fmt.Errorf("%s: applying %s %s: %w", name, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

func namespaced(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "NodeGroupClass", "Location", "ValidatingWebhookConfiguration", "Namespace":
		return false
	}
	return true
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the chart's
// ServiceAccount, so the operator runs with exactly the chart's RBAC.
func serviceAccountKubeconfig(ctx context.Context, cfg *rest.Config, path string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(releaseNamespace).CreateToken(ctx, serviceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token for the chart's ServiceAccount: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["demo"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: "operator", Namespace: releaseNamespace}
	kc.CurrentContext = "operator"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
