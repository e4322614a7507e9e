package main

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
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
