package policy

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// Gather builds the rules' input of a pool whose class, location and control-plane
// version (empty when not known yet) the caller has resolved, reading the rest through
// r: the labels of the pool's namespace, and the pool's MachineDeployment. That it
// exists means the pool's machines run; the kind of its bootstrap template tells the OS
// they boot, which is OldClass, and its cluster the Cluster they run under. The reconciler, the webhook and the plugin's offline
// render all gather so, from the API server, the cache or the files given.
func Gather(ctx context.Context, r client.Reader, pool *v1.NodeGroup, class *v1.NodeGroupClassSpec, location *v1.LocationSpec, controlPlaneVersion string) (Input, error) {
	in := Input{Object: pool, Class: class, Location: location, ControlPlaneVersion: controlPlaneVersion,
		Cluster: names.MachineClusterName(pool.Spec.ClusterName, pool.Spec.LocationName, location.Provider.Satellite())}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: pool.Namespace}, ns); err != nil {
		return in, err
	}
	in.NamespaceLabels = ns.Labels
	md := &clusterv1.MachineDeployment{}
	err := r.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: names.MachineDeploymentName(pool.Spec.ClusterName, pool.Name)}, md)
	switch {
	case apierrors.IsNotFound(err):
		return in, nil
	case err != nil:
		return in, err
	}
	in.MachineDeploymentExists = true
	in.MachineCluster = md.Spec.ClusterName
	switch md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind {
	case "TalosConfigTemplate":
		in.OldClass = &v1.NodeGroupClassSpec{OS: v1.OSTalos}
	case "KairosConfigTemplate":
		in.OldClass = &v1.NodeGroupClassSpec{OS: v1.OSKairos}
	}
	return in, nil
}
