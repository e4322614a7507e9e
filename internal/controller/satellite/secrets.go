package satellite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

// LabelSource is on every Secret the controller copies: a digest of where the copy
// came from (the source Secret and its resourceVersion, and for a kubeconfig the
// server written into it). The cache holds Secrets as metadata, so a copy whose label
// matches its source's cached version is current without reading either.
const LabelSource = "nodegroup.io/copied-from"

// KubeconfigKey is the key of a Cluster API kubeconfig Secret.
const KubeconfigKey = "value"

// credentials keeps the operator's copy of the location's credentials Secret in the
// tenant namespace, with the satellite among its owners: one copy per namespace and
// location, shared by the satellites of the namespace's Clusters there, removed by the
// garbage collector with the last of them. capmox adds its own owner and finalizer to
// the copy it reads, which is why the platform's Secret itself is never handed over.
func (r *Reconciler) credentials(ctx context.Context, sat *clusterv1.Cluster, loc string, src v1.SecretReference) error {
	name := names.ProxmoxCredentialsName(loc)
	srcMeta, err := r.secretMeta(ctx, src.Namespace, src.Name)
	if err != nil {
		return err
	}
	if srcMeta == nil {
		return fmt.Errorf("location %q: its credentials Secret %s/%s does not exist", loc, src.Namespace, src.Name)
	}
	source := sourceDigest(src.Namespace, src.Name, srcMeta.ResourceVersion, "")
	if cur, err := r.secretMeta(ctx, sat.Namespace, name); err == nil && cur != nil && cur.Labels[LabelSource] == source &&
		cur.Labels[names.LabelManagedBy] == names.ManagedByValue && ownedBy(cur, sat) {
		return nil
	}

	var from corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Name}, &from); err != nil {
		return fmt.Errorf("location %q: reading its credentials Secret %s/%s: %w", loc, src.Namespace, src.Name, err)
	}
	labels := map[string]string{
		names.LabelManagedBy: names.ManagedByValue, names.LabelLocation: names.LabelValue(loc),
		LabelSource: sourceDigest(src.Namespace, src.Name, from.ResourceVersion, ""),
	}
	return r.keepSecret(ctx, sat.Namespace, name, labels, from.Data, func(s *corev1.Secret) error {
		if ownedBy(s, sat) {
			return nil
		}
		return controllerutil.SetOwnerReference(sat, s, r.Client.Scheme())
	})
}

// kubeconfig keeps <satellite>-kubeconfig: the tenant's <cluster>-kubeconfig (which
// Kamaji's provider writes from its admin kubeconfig and rewrites when it rotates),
// cleaned to what it holds inline, with the server the location's workers reach,
// controlled by the satellite's control plane, as Cluster API's bootstrap providers
// check. The TLS server name stays the tenant's own address, so the tenant's serving
// certificate needs no name of the location's.
func (r *Reconciler) kubeconfig(ctx context.Context, c *clusterv1.Cluster, scp *cpv1.SatelliteControlPlane) error {
	srcName := c.Name + "-kubeconfig"
	srcMeta, err := r.secretMeta(ctx, c.Namespace, srcName)
	if err != nil {
		return err
	}
	if srcMeta == nil {
		return nil // Kamaji has not written it yet: its creation brings the cluster back
	}
	ep := scp.Spec.ControlPlaneEndpoint
	if ep.Host == "" || ep.Port == 0 {
		return nil
	}
	server := "https://" + net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
	name := scp.Name + "-kubeconfig"
	source := sourceDigest(c.Namespace, srcName, srcMeta.ResourceVersion, server)
	if cur, err := r.secretMeta(ctx, c.Namespace, name); err == nil && cur != nil && cur.Labels[LabelSource] == source &&
		cur.Labels[names.LabelManagedBy] == names.ManagedByValue && metav1.IsControlledBy(cur, scp) {
		return nil
	}

	var from corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: srcName}, &from); err != nil {
		return client.IgnoreNotFound(err)
	}
	data, err := rewriteServer(from.Data[KubeconfigKey], server)
	if err != nil {
		return fmt.Errorf("the kubeconfig in %s/%s: %w", c.Namespace, srcName, err)
	}
	labels := map[string]string{
		names.LabelManagedBy: names.ManagedByValue, clusterv1.ClusterNameLabel: scp.Name,
		LabelSource: sourceDigest(c.Namespace, srcName, from.ResourceVersion, server),
	}
	return r.keepSecret(ctx, c.Namespace, name, labels, map[string][]byte{KubeconfigKey: data}, func(s *corev1.Secret) error {
		s.Type = clusterv1.ClusterSecretType
		return controllerutil.SetControllerReference(scp, s, r.Client.Scheme())
	})
}

// rewriteServer is kubeconfig reduced to what it holds inline (tenant.CleanKubeconfig)
// with every cluster's server set to server, and its TLS server name to the host it
// named before, unless it names one already.
func rewriteServer(kubeconfig []byte, server string) ([]byte, error) {
	clean, err := tenant.CleanKubeconfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.Load(clean)
	if err != nil {
		return nil, err
	}
	for _, cl := range kc.Clusters {
		if u, err := url.Parse(cl.Server); err == nil && cl.TLSServerName == "" {
			cl.TLSServerName = u.Hostname()
		}
		cl.Server = server
	}
	return clientcmd.Write(*kc)
}

// keepSecret creates the Secret namespace/name with labels and data, or brings the one
// there to them; own adds the owner references. A Secret of that name the operator did
// not make is left alone, with an error.
func (r *Reconciler) keepSecret(ctx context.Context, namespace, name string, labels map[string]string, data map[string][]byte, own func(*corev1.Secret) error) error {
	var cur corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cur)
	if apierrors.IsNotFound(err) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}, Type: corev1.SecretTypeOpaque, Data: data}
		if err := own(s); err != nil {
			return err
		}
		return r.Client.Create(ctx, s)
	}
	if err != nil {
		return err
	}
	if cur.Labels[names.LabelManagedBy] != names.ManagedByValue {
		return fmt.Errorf("Secret %s/%s exists and is not managed by %s: the operator does not overwrite it", namespace, name, names.ManagedByValue)
	}
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	for k, v := range labels {
		cur.Labels[k] = v
	}
	cur.Data = data
	if err := own(&cur); err != nil {
		return err
	}
	return r.Client.Update(ctx, &cur)
}

// secretMeta is the cached metadata of a Secret; nil when there is none.
func (r *Reconciler) secretMeta(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return m, nil
}

func ownedBy(obj metav1.Object, owner metav1.Object) bool {
	return slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == owner.GetUID() })
}

// sourceDigest is LabelSource's value: 16 hex digits of the source's identity.
func sourceDigest(namespace, name, resourceVersion, server string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name + "@" + resourceVersion + " " + server))
	return hex.EncodeToString(sum[:8])
}
