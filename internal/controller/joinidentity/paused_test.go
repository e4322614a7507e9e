package joinidentity_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// setPaused pauses or resumes the Cluster: by spec.paused, or by the annotation.
func setPaused(t *testing.T, ns string, byAnnotation, paused bool) {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	switch {
	case !byAnnotation:
		c.Spec.Paused = &paused
	case paused:
		c.SetAnnotations(map[string]string{clusterv1.PausedAnnotation: ""})
	default:
		delete(c.Annotations, clusterv1.PausedAnnotation)
	}
	if err := env.Client.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the controller's cache holds it before the next change
}

// minted waits for the cluster's identity and its token in the tenant, and returns the
// token.
func minted(t *testing.T, ns string) string {
	t.Helper()
	var secret *corev1.Secret
	eventually(t, "the identity is minted", func(ctx context.Context) (err error) {
		secret, err = identity(ctx, ns)
		return err
	})
	token := string(secret.Data[resolve.TalosKeyBootstrapToken])
	wantTokens(t, clusterUID(t, ns), token)
	return token
}

// What clusterctl move does to the source: it pauses the Cluster, then deletes the
// pools and, last, the Cluster. The tenant keeps its token (the target's operator keeps
// joining workers with it) and the management side gets no write.
func TestPausedClusterKeepsTenantToken(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), false)
	uid := clusterUID(t, ns)
	ng := talosPool(t, ns, "a")
	token := minted(t, ns)

	setPaused(t, ns, false, true)
	before := writes.Load()
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	wantTokens(t, uid, token)

	c := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	wantTokens(t, uid, token)
	if n := writes.Load() - before; n != 0 {
		t.Errorf("%d writes to the management cluster for a paused, then deleted Cluster", n)
	}
	if _, err := identity(ctx, ns); err != nil {
		t.Errorf("<cluster>-talos: %v", err)
	}
}

// A token deleted in the tenant while the Cluster is paused (by its annotation) is not
// made again until it is resumed.
func TestPausedClusterResumes(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), false)
	uid := clusterUID(t, ns)
	talosPool(t, ns, "a")
	token := minted(t, ns)

	setPaused(t, ns, true, true)
	tok := &corev1.Secret{}
	key := types.NamespacedName{Namespace: "kube-system", Name: bootstraputil.BootstrapTokenSecretName(token[:6])}
	if err := env.Client.Get(ctx, key, tok); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, tok); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	wantTokens(t, uid)

	setPaused(t, ns, true, false)
	wantTokens(t, uid, token)
}
