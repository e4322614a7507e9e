package satellite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

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

// credentials keeps the operator's copy of the location's credentials Secret for c's
// satellite on loc, in the tenant namespace: the platform's own Secret is never handed
// to capmox, which makes the ProxmoxCluster an owner of the Secret it reads and adds a
// finalizer. The copy carries no owner of the operator's (capmox removes its finalizer
// only from a Secret it is the last owner of); cleanCredentials deletes it once the
// satellite Cluster is gone. ok is false while the platform's Secret does not exist: a
// Warning event says so, and its creation brings the cluster back.
func (r *Reconciler) credentials(ctx context.Context, c *clusterv1.Cluster, loc string, src v1.SecretReference) (ok bool, err error) {
	name := names.SatelliteCredentialsName(c.Name, loc)
	srcMeta, err := r.secretMeta(ctx, src.Namespace, src.Name)
	if err != nil {
		return false, err
	}
	if srcMeta == nil {
		r.event(c, corev1.EventTypeWarning, ReasonSatelliteWaiting, "satellite on location %s: the location's credentials Secret %s/%s does not exist",
			loc, src.Namespace, src.Name)
		return false, nil
	}
	source := sourceDigest(src.Namespace, src.Name, srcMeta.ResourceVersion, "")
	if cur, err := r.secretMeta(ctx, c.Namespace, name); err == nil && cur != nil && cur.Labels[LabelSource] == source &&
		cur.Labels[names.LabelManagedBy] == names.ManagedByValue {
		return true, nil
	}

	var from corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Name}, &from); err != nil {
		return false, fmt.Errorf("reading the location's credentials Secret %s/%s: %w", src.Namespace, src.Name, err)
	}
	labels := map[string]string{
		names.LabelManagedBy: names.ManagedByValue, names.LabelLocation: names.LabelValue(loc),
		names.LabelTenantCluster: names.LabelValue(c.Name),
		LabelSource:              sourceDigest(src.Namespace, src.Name, from.ResourceVersion, ""),
	}
	return true, r.keepSecret(ctx, c.Namespace, name, labels, from.Data, func(*corev1.Secret) error { return nil })
}

// cleanCredentials deletes the credentials copies of tenant's satellites whose
// satellite Cluster is gone: Cluster API deletes a Cluster after its InfraCluster, and
// capmox, the copy's last owner then, has removed its finalizer. A satellite the cache
// does not hold is looked up live first, so a copy made moments ago stays.
func (r *Reconciler) cleanCredentials(ctx context.Context, namespace, tenant string) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.HasLabels{names.LabelLocation},
		client.MatchingLabels{names.LabelManagedBy: names.ManagedByValue, names.LabelTenantCluster: names.LabelValue(tenant)}); err != nil {
		return err
	}
	for i := range list.Items {
		copy := &list.Items[i]
		sat, ok := strings.CutSuffix(copy.Name, "-credentials")
		if !ok || !copy.DeletionTimestamp.IsZero() {
			continue
		}
		key := client.ObjectKey{Namespace: namespace, Name: sat}
		if err := r.Client.Get(ctx, key, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			continue // there, or the cache cannot tell
		}
		if err := r.APIReader.Get(ctx, key, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			continue
		}
		uid := copy.UID
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: copy.Name}}
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return err
		}
		log.FromContext(ctx).Info("deleted the credentials copy of a satellite that is gone", "secret", copy.Name)
	}
	return nil
}

// kubeconfig keeps <satellite>-kubeconfig: the tenant's <cluster>-kubeconfig (which
// Kamaji's provider writes from its admin kubeconfig and rewrites when it rotates),
// reduced to what it holds inline, with the server the location's workers reach (ep),
// controlled by the satellite's control plane, as Cluster API's bootstrap providers
// check. The tenant's serving certificate must name that host (docs/locations.md).
func (r *Reconciler) kubeconfig(ctx context.Context, c *clusterv1.Cluster, scp *cpv1.SatelliteControlPlane, ep cpv1.APIEndpoint) error {
	srcName := c.Name + "-kubeconfig"
	srcMeta, err := r.secretMeta(ctx, c.Namespace, srcName)
	if err != nil {
		return err
	}
	if srcMeta == nil || ep.Host == "" || ep.Port == 0 {
		return nil // Kamaji has not written it yet: its creation brings the cluster back
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
// with every cluster's server set to server.
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
		return fmt.Errorf("secret %s/%s exists and is not managed by %s: the operator does not overwrite it", namespace, name, names.ManagedByValue)
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

// sourceDigest is LabelSource's value: 16 hex digits of the source's identity.
func sourceDigest(namespace, name, resourceVersion, server string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name + "@" + resourceVersion + " " + server))
	return hex.EncodeToString(sum[:8])
}
