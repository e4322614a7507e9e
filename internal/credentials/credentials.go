// Package credentials keeps the Secrets a pool's machines need in the pool's namespace:
// the per-cluster password of the Kairos worker user (random, shown to nobody) and the
// operator's copy of a class's image pull secret (tenants never read the platform's
// source). Both carry the managed-by label; nothing without it is changed or deleted.
package credentials

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

const (
	// WorkerPasswordSuffix names the per-cluster password Secret: `<cluster>-kairos-user`.
	WorkerPasswordSuffix = "-kairos-user"
	// WorkerPasswordKey is the key the Kairos provider reads.
	WorkerPasswordKey = "password"
	// LabelPullSecretClass marks a pull secret copy with the class it was copied for.
	LabelPullSecretClass = "nodegroup.io/pull-secret-class"
	// CDI's registry import reads these two keys.
	keyAccessKeyID = "accessKeyId"
	keySecretKey   = "secretKey"
)

// ErrNotManaged is returned for a Secret of the expected name that the operator did not
// create: it is left alone, and the pool reports it.
var ErrNotManaged = errors.New("exists and is not managed by " + names.ManagedByValue)

// WorkerPasswordName is the name of a cluster's worker password Secret.
func WorkerPasswordName(cluster string) string { return cluster + WorkerPasswordSuffix }

// PullSecretName is the name of the copy of a class's pull secret in a tenant namespace.
func PullSecretName(class string) string { return names.LabelValue("nodegroup-pull-" + class) }

// EnsureWorkerPassword creates the cluster's worker password Secret once, with 32 random
// bytes nobody is shown, owned by the Cluster so it goes with it. An existing Secret of
// ours is left as it is: a new password would roll nothing and help no one.
func EnsureWorkerPassword(ctx context.Context, c client.Client, reader client.Reader, cluster client.Object) error {
	name := WorkerPasswordName(cluster.GetName())
	var s corev1.Secret
	err := reader.Get(ctx, client.ObjectKey{Namespace: cluster.GetNamespace(), Name: name}, &s)
	switch {
	case err == nil:
		if s.Labels[names.LabelManagedBy] != names.ManagedByValue {
			return fmt.Errorf("Secret %s/%s %w", s.Namespace, name, ErrNotManaged)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cluster.GetNamespace(), Name: name,
			Labels: map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelClusterName: cluster.GetName()},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{WorkerPasswordKey: []byte(base64.RawStdEncoding.EncodeToString(raw))},
	}
	if err := controllerutil.SetOwnerReference(cluster, &s, c.Scheme()); err != nil {
		return err
	}
	if err := c.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// HasWorkerPassword reports whether cached, an informer cache of Secret metadata,
// holds the cluster's worker password Secret with the managed-by label: then
// EnsureWorkerPassword has nothing to do, and the read it makes is saved. A Secret the
// cache does not hold yet is EnsureWorkerPassword's to find.
func HasWorkerPassword(ctx context.Context, cached client.Reader, namespace, cluster string) bool {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := cached.Get(ctx, client.ObjectKey{Namespace: namespace, Name: WorkerPasswordName(cluster)}, m); err != nil {
		return false
	}
	return m.Labels[names.LabelManagedBy] == names.ManagedByValue
}

// MayRelease reports whether cached, an informer cache of Secret metadata, shows a pull
// secret copy in the pool's namespace that the pool owns for a class other than keep:
// only then has ReleasePullSecrets anything to do, and its list is worth sending. A
// copy the pool made moments ago may be missing from the cache; a later reconcile of
// the pool that finds it there releases it, or the pool's deletion does.
func MayRelease(ctx context.Context, cached client.Reader, pool *v1.NodeGroup, keep string) bool {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := cached.List(ctx, list, pullSecretCopies(pool.Namespace)...); err != nil {
		return true // the live list decides
	}
	for i := range list.Items {
		if releasable(&list.Items[i], pool, keep) {
			return true
		}
	}
	return false
}

// pullSecretCopies selects the pull secret copies the operator made in namespace.
func pullSecretCopies(namespace string) []client.ListOption {
	return []client.ListOption{client.InNamespace(namespace),
		client.MatchingLabels{names.LabelManagedBy: names.ManagedByValue}, client.HasLabels{LabelPullSecretClass}}
}

// releasable: the copy s, of a class other than keep (any class when keep is empty),
// is owned by the pool.
func releasable(s metav1.Object, pool *v1.NodeGroup, keep string) bool {
	if keep != "" && s.GetLabels()[LabelPullSecretClass] == names.LabelValue(keep) {
		return false
	}
	return slices.ContainsFunc(s.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == pool.UID })
}

// ProjectPullSecret keeps the copy of a class's pull secret in the pool's namespace, in
// the form CDI's registry import reads (accessKeyId, secretKey), with the pool among its
// owners: the copy goes when the last pool that uses it goes. The copy is rewritten only
// when the source changed.
func ProjectPullSecret(ctx context.Context, c client.Client, reader client.Reader, pool *v1.NodeGroup, class string, src v1.SecretReference, imageRef string) error {
	var source corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Name}, &source); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the class's pull secret %s/%s does not exist", src.Namespace, src.Name)
		}
		return err
	}
	data, err := registryCredentials(&source, imageRef)
	if err != nil {
		return fmt.Errorf("the class's pull secret %s/%s: %w", src.Namespace, src.Name, err)
	}
	name := PullSecretName(class)
	var copy corev1.Secret
	err = reader.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: name}, &copy)
	if apierrors.IsNotFound(err) {
		copy = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: name, Labels: map[string]string{
				names.LabelManagedBy: names.ManagedByValue, LabelPullSecretClass: names.LabelValue(class)}},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		if err := controllerutil.SetOwnerReference(pool, &copy, c.Scheme()); err != nil {
			return err
		}
		return c.Create(ctx, &copy)
	}
	if err != nil {
		return err
	}
	if copy.Labels[names.LabelManagedBy] != names.ManagedByValue {
		return fmt.Errorf("Secret %s/%s %w", copy.Namespace, name, ErrNotManaged)
	}
	changed := false
	if !slices.ContainsFunc(copy.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == pool.UID }) {
		if err := controllerutil.SetOwnerReference(pool, &copy, c.Scheme()); err != nil {
			return err
		}
		changed = true
	}
	if !equalData(copy.Data, data) {
		copy.Data, changed = data, true
	}
	if !changed {
		return nil
	}
	return c.Update(ctx, &copy)
}

// ReleasePullSecrets removes the pool from the owners of pull secret copies of classes
// other than keep (all of them when keep is empty) and deletes a copy no pool owns.
func ReleasePullSecrets(ctx context.Context, c client.Client, reader client.Reader, pool *v1.NodeGroup, keep string) error {
	var list corev1.SecretList
	if err := reader.List(ctx, &list, pullSecretCopies(pool.Namespace)...); err != nil {
		return err
	}
	for i := range list.Items {
		s := &list.Items[i]
		if !releasable(s, pool, keep) {
			continue
		}
		owners := slices.DeleteFunc(slices.Clone(s.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == pool.UID })
		if len(owners) == 0 {
			if err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
				return err
			}
			continue
		}
		s.OwnerReferences = owners
		if err := c.Update(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return true
}

// registryCredentials reads a registry credential from a Secret holding either CDI's own
// keys or a docker config for the image's registry. The registry is go-containerregistry's
// reading of the reference, so a Docker Hub image named without a host (alpine:3,
// library/alpine) finds the credential docker login stores for index.docker.io.
func registryCredentials(s *corev1.Secret, imageRef string) (map[string][]byte, error) {
	if len(s.Data[keyAccessKeyID]) > 0 && len(s.Data[keySecretKey]) > 0 {
		return map[string][]byte{keyAccessKeyID: s.Data[keyAccessKeyID], keySecretKey: s.Data[keySecretKey]}, nil
	}
	raw, ok := s.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, fmt.Errorf("holds neither %s/%s nor %s", keyAccessKeyID, keySecretKey, corev1.DockerConfigJsonKey)
	}
	var cfg struct {
		Auths map[string]struct {
			Username string `json:"username"`
			Password string `json:"password"`
			Auth     string `json:"auth"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s is not a docker config: %w", corev1.DockerConfigJsonKey, err)
	}
	ref, err := name.ParseReference(imageRef)
	if err != nil {
		return nil, fmt.Errorf("the image %q is not an image reference: %w", imageRef, err)
	}
	host := ref.Context().RegistryStr()
	keys := []string{host, "https://" + host, "https://" + host + "/v1/"}
	if host == name.DefaultRegistry {
		keys = append(keys, "docker.io")
	}
	for _, key := range keys {
		a, ok := cfg.Auths[key]
		if !ok {
			continue
		}
		user, pass := a.Username, a.Password
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("auth for %s is not base64", host)
			}
			user, pass, _ = strings.Cut(string(dec), ":")
		}
		return map[string][]byte{keyAccessKeyID: []byte(user), keySecretKey: []byte(pass)}, nil
	}
	return nil, fmt.Errorf("has no credential for registry %s", host)
}
