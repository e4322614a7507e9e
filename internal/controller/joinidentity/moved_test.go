package joinidentity_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

// movedFrom is the UID of a Cluster as it was before clusterctl move.
const movedFrom = "uid-before-the-move"

func tokenSecretKey(token string) types.NamespacedName {
	id, _, _ := strings.Cut(token, ".")
	return types.NamespacedName{Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(id)}
}

// labelAsMoved labels token's tenant Secret as the source's operator left it before
// clusterctl move: with the Cluster's UID there.
func labelAsMoved(t *testing.T, token string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), tokenSecretKey(token), s); err != nil {
		t.Fatal(err)
	}
	s.Labels[tenant.LabelCluster] = movedFrom
	if err := env.Client.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A moved Cluster (a new UID, the same <cluster>-talos) adopts the token Secret its
// identity names, and a rotation on the target then removes the old token.
func TestMovedClusterAdoptsTokenAndRotates(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), false)
	uid := clusterUID(t, ns)
	talosPool(t, ns, "a")
	old := minted(t, ns)

	s := labelAsMoved(t, old)
	adopted := wantTokens(t, uid, old)
	if rv := adopted[tokenSecretKey(old).Name].ResourceVersion; rv == s.ResourceVersion {
		t.Fatalf("the token Secret was not written after the relabel (resourceVersion %s)", rv)
	}

	askRotation(t, ns, "after-the-move")
	var current string
	eventually(t, "the rotation is done", func(ctx context.Context) error {
		s, err := identity(ctx, ns)
		if err != nil {
			return err
		}
		current = string(s.Data[resolve.TalosKeyBootstrapToken])
		if _, ok := s.Data[resolve.TalosKeyPreviousBootstrapToken]; current == old || ok {
			return fmt.Errorf("token %s, previous %q", current, s.Data[resolve.TalosKeyPreviousBootstrapToken])
		}
		return nil
	})
	wantTokens(t, uid, current)
	if err := env.Client.Get(ctx, tokenSecretKey(old), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old token's Secret is still in the tenant (%v)", err)
	}
}

// A moved Cluster's last Talos pool takes the tokens its identity names away, though
// the source's operator labelled them.
func TestMovedClusterRetiresToken(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), false)
	ng := talosPool(t, ns, "a")
	token := minted(t, ns)
	labelAsMoved(t, token)
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the token leaves the tenant", func(ctx context.Context) error {
		if err := env.Client.Get(ctx, tokenSecretKey(token), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// A token Secret the operator made for another Cluster UID whose token is not the one
// the identity names is never adopted: a conflict, and the Secret is left as it is.
func TestTokenOfAnotherClusterNotAdopted(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), true)
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	s, err := identity(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	s.Data[resolve.TalosKeyBootstrapToken] = []byte(token)
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	other, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	_, otherSecret, _ := strings.Cut(other, ".")
	theirs := joinidentity.TokenSecret(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{UID: movedFrom}}, token)
	theirs.Data["token-secret"] = []byte(otherSecret)
	if theirs.Labels[names.LabelManagedBy] != names.ManagedByValue {
		t.Fatalf("labels %v", theirs.Labels)
	}
	mustCreate(t, theirs)
	before := theirs.ResourceVersion

	talosPool(t, ns, "a")
	state(t, ns, func(st tenant.State) error {
		if st.IdentityReason != joinidentity.ReasonTokenConflict {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	got := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != before || got.Labels[tenant.LabelCluster] != movedFrom {
		t.Errorf("the other cluster's token Secret was changed: resourceVersion %s (was %s), labels %v", got.ResourceVersion, before, got.Labels)
	}
}
