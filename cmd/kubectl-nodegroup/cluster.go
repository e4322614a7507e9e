package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// clusterFlags are kubectl's flags to reach a cluster (--kubeconfig, --context, -n, --as
// and the rest), read as kubectl reads them: KUBECONFIG, then ~/.kube/config.
type clusterFlags struct{ *genericclioptions.ConfigFlags }

func addClusterFlags(cmd *cobra.Command) clusterFlags {
	f := genericclioptions.NewConfigFlags(false)
	f.AddFlags(cmd.Flags())
	return clusterFlags{f}
}

// addNamespaceFlags adds, for the commands that read files and no cluster, the three of
// kubectl's flags that name a namespace: -n, else the namespace of the context
// (--context, else the current one) of the kubeconfig (--kubeconfig, KUBECONFIG,
// ~/.kube/config). The kubeconfig is read only when a file names no namespace.
func addNamespaceFlags(cmd *cobra.Command) clusterFlags {
	f := &genericclioptions.ConfigFlags{KubeConfig: ptr.To(""), Context: ptr.To(""), Namespace: ptr.To("")}
	f.AddFlags(cmd.Flags())
	return clusterFlags{f}
}

// setNamespace gives an object of path that names no namespace the flags' namespace, as
// `kubectl apply -f` does; one that names another namespace than -n is refused, as
// kubectl refuses it.
func (f clusterFlags) setNamespace(path string, u *unstructured.Unstructured) error {
	explicit := ptr.Deref(f.Namespace, "")
	if u.GetNamespace() != "" {
		if explicit != "" && explicit != u.GetNamespace() {
			return fmt.Errorf("%s: the namespace of %s %q is %q, not %q (-n)", path, u.GetKind(), u.GetName(), u.GetNamespace(), explicit)
		}
		return nil
	}
	ns := explicit
	if ns == "" {
		var err error
		if ns, err = f.namespace(); err != nil {
			return fmt.Errorf("%s names no namespace, and the kubeconfig cannot be read for one: %w", path, err)
		}
	}
	u.SetNamespace(ns)
	return nil
}

// client is a client of the cluster the flags name.
func (f clusterFlags) client() (client.Client, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// namespace is -n, else the namespace of the kubeconfig's context, else "default".
func (f clusterFlags) namespace() (string, error) {
	ns, _, err := f.ToRawKubeConfigLoader().Namespace()
	return ns, err
}
