package joinidentity_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// The controller runs against one real API server that is both the management cluster
// and every test's tenant cluster (their <cluster>-kubeconfig is the API server's own),
// except where a test points a cluster at an address nothing answers.

var (
	env    *testenv.Env
	status = tenant.NewStatus()
	// writes counts the controller's writes to the management cluster.
	writes testenv.WriteCounter
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		return e.RunOperator(writes.NewClient, func(mgr ctrl.Manager) error {
			r := &joinidentity.Reconciler{Client: mgr.GetClient(), APIReader: kubeconfigReads.wrap(mgr.GetAPIReader()), Status: status}
			return r.Register(mgr)
		})
	})
}

// kubeconfigReads counts the controller's live reads of each namespace's
// <cluster>-kubeconfig.
var kubeconfigReads = &secretReads{suffix: tenant.KubeconfigSuffix, n: map[string]int{}}

type secretReads struct {
	client.Reader
	suffix string
	mu     sync.Mutex
	n      map[string]int
}

func (r *secretReads) wrap(reader client.Reader) client.Reader {
	r.Reader = reader
	return r
}

func (r *secretReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok && strings.HasSuffix(key.Name, r.suffix) {
		r.mu.Lock()
		r.n[key.Namespace]++
		r.mu.Unlock()
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *secretReads) count(ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[ns]
}

const (
	timeout = 30 * time.Second
	cluster = testenv.TenantCluster
)

var seq atomic.Int32

// newTenant makes a tenant namespace with what the Kamaji provider writes
// (<cluster>-ca, <cluster>-kubeconfig of kubeconfig) and returns it.
func newTenant(t *testing.T, kubeconfig []byte, platformSecret bool) string {
	t.Helper()
	ns := fmt.Sprintf("ji-%d", seq.Add(1))
	if err := testenv.CreateTenant(context.Background(), env.Client, ns, testenv.TenantOptions{Kubeconfig: kubeconfig, TalosSecret: platformSecret}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func talosPool(t *testing.T, ns, name string) *v1.NodeGroup {
	t.Helper()
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
		ClusterName: cluster, NodeGroupClassName: v1.BuiltinTalosClass, MinReplicas: 1, MaxReplicas: 1,
		Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
	}}
	if err := env.Client.Create(context.Background(), ng); err != nil {
		t.Fatal(err)
	}
	return ng
}

func eventually(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func identity(ctx context.Context, ns string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	return s, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cluster + resolve.TalosSecretSuffix}, s)
}

func clusterUID(t *testing.T, ns string) types.UID {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	return c.UID
}

// tenantTokens are the bootstrap token Secrets the operator keeps for the cluster.
func tenantTokens(ctx context.Context, uid types.UID) (map[string]*corev1.Secret, error) {
	var list corev1.SecretList
	if err := env.Client.List(ctx, &list, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{tenant.LabelCluster: string(uid)}); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Secret{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// wantTokens waits until the tenant holds exactly the given tokens for the cluster.
func wantTokens(t *testing.T, uid types.UID, tokens ...string) map[string]*corev1.Secret {
	t.Helper()
	var got map[string]*corev1.Secret
	eventually(t, fmt.Sprintf("the tenant holds exactly the tokens %v", tokens), func(ctx context.Context) error {
		var err error
		if got, err = tenantTokens(ctx, uid); err != nil {
			return err
		}
		if len(got) != len(tokens) {
			return fmt.Errorf("%d token Secrets", len(got))
		}
		for _, tok := range tokens {
			id, secret, _ := strings.Cut(tok, ".")
			s := got[bootstraputil.BootstrapTokenSecretName(id)]
			if s == nil || string(s.Data[bootstrapapi.BootstrapTokenSecretKey]) != secret {
				return fmt.Errorf("token %s missing or different", id)
			}
		}
		return nil
	})
	return got
}

func state(t *testing.T, ns string, check func(tenant.State) error) {
	t.Helper()
	eventually(t, "the cluster's tenant state", func(context.Context) error {
		st, ok := status.Get(types.NamespacedName{Namespace: ns, Name: cluster})
		if !ok {
			return fmt.Errorf("no state")
		}
		return check(st)
	})
}

// A Talos pool gets its cluster an identity minted from <cluster>-ca, owned by the
// Cluster, and its bootstrap token in the tenant's kube-system as kubeadm makes one;
// a deleted token comes back; the last pool's deletion takes the token away.
func TestMintsIdentityAndKeepsToken(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), false)
	uid := clusterUID(t, ns)
	ng := talosPool(t, ns, "a")

	var secret *corev1.Secret
	eventually(t, "the identity is minted", func(ctx context.Context) (err error) {
		secret, err = identity(ctx, ns)
		return err
	})
	ca := &corev1.Secret{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cluster + "-ca"}, ca); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data[resolve.TalosKeyClusterCACert]) != string(ca.Data[corev1.TLSCertKey]) {
		t.Errorf("cluster-ca.crt is not the tenant CA of %s-ca", cluster)
	}
	for _, key := range []string{resolve.TalosKeyMachineCACert, resolve.TalosKeyMachineCAKey} {
		if b, _ := pem.Decode(secret.Data[key]); b == nil {
			t.Errorf("%s is not PEM", key)
		}
	}
	if b, _ := pem.Decode(secret.Data[resolve.TalosKeyMachineCACert]); b != nil {
		if cert, err := x509.ParseCertificate(b.Bytes); err != nil || !cert.IsCA {
			t.Errorf("machine CA: %v (CA %v)", err, cert != nil && cert.IsCA)
		}
	}
	for _, key := range []string{resolve.TalosKeyMachineToken, resolve.TalosKeyClusterID, resolve.TalosKeyClusterSecret} {
		if len(secret.Data[key]) < 6 {
			t.Errorf("%s is %q", key, secret.Data[key])
		}
	}
	token := string(secret.Data[resolve.TalosKeyBootstrapToken])
	if !bootstraputil.IsValidBootstrapToken(token) {
		t.Fatalf("bootstrap token %q", token)
	}
	if len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != uid || secret.OwnerReferences[0].Kind != "Cluster" {
		t.Errorf("owners %+v, want the Cluster", secret.OwnerReferences)
	}
	if secret.Labels["app.kubernetes.io/managed-by"] != "nodegroup-operator" {
		t.Errorf("labels %v", secret.Labels)
	}

	got := wantTokens(t, uid, token)
	tok := got[bootstraputil.BootstrapTokenSecretName(token[:6])]
	if tok.Type != bootstrapapi.SecretTypeBootstrapToken || string(tok.Data[bootstrapapi.BootstrapTokenUsageAuthentication]) != "true" ||
		string(tok.Data[bootstrapapi.BootstrapTokenExtraGroupsKey]) != joinidentity.ExtraGroups {
		t.Errorf("token Secret %s: type %s, data %v", tok.Name, tok.Type, tok.Data)
	}
	state(t, ns, func(st tenant.State) error {
		if st.Identity != metav1.ConditionTrue || st.IdentityReason != joinidentity.ReasonMinted || st.Reachable != metav1.ConditionTrue {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})

	// Steady: a resync of the cluster writes nothing on either side, and reads the
	// kubeconfig only from the cache: the connection was made from its version.
	reads := kubeconfigReads.count(ns)
	before := writes.Load()
	rv := tok.ResourceVersion
	touch(t, ns)
	time.Sleep(2 * time.Second)
	if n := writes.Load() - before; n != 0 {
		t.Errorf("%d writes to the management cluster in steady state", n)
	}
	if got, _ := tenantTokens(ctx, uid); got[tok.Name] == nil || got[tok.Name].ResourceVersion != rv {
		t.Errorf("the tenant token was rewritten in steady state")
	}

	// Deleted in the tenant: back within seconds.
	start := time.Now()
	if err := env.Client.Delete(ctx, tok); err != nil {
		t.Fatal(err)
	}
	wantTokens(t, uid, token)
	t.Logf("a deleted tenant token was back in %s", time.Since(start).Round(10*time.Millisecond))
	if n := kubeconfigReads.count(ns) - reads; n != 0 {
		t.Errorf("%d live reads of the unchanged kubeconfig Secret after the connection was open", n)
	}

	// A second minting never happens: the identity is the same after all this.
	if again, err := identity(ctx, ns); err != nil || again.ResourceVersion != secret.ResourceVersion {
		t.Errorf("the identity changed: %v", err)
	}

	// The last Talos pool goes: so does its token; the identity stays for the next pool.
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	wantTokens(t, uid)
	if _, err := identity(ctx, ns); err != nil {
		t.Errorf("the identity is gone with the pool: %v", err)
	}
}

// touch changes a Cluster annotation that asks nothing, so the controller looks again.
// askRotation sets the Cluster's AnnotationRotate to value.
func askRotation(t *testing.T, ns, value string) {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.SetAnnotations(map[string]string{joinidentity.AnnotationRotate: value})
	if err := env.Client.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

func touch(t *testing.T, ns string) {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.SetAnnotations(map[string]string{"example.org/touched": time.Now().String()})
	if err := env.Client.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

// A platform's own <cluster>-talos is used as is: never changed, not even by a rotation
// asked on the Cluster; its token is kept in the tenant.
func TestPlatformIdentityUsedAsIs(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), true)
	uid := clusterUID(t, ns)
	before, err := identity(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	talosPool(t, ns, "a")
	wantTokens(t, uid, string(before.Data[resolve.TalosKeyBootstrapToken]))
	askRotation(t, ns, "1")
	state(t, ns, func(st tenant.State) error {
		if st.IdentityReason != joinidentity.ReasonPlatformProvided || !strings.Contains(st.IdentityMessage, "rotate the platform's Secret") {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	after, err := identity(ctx, ns)
	if err != nil || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the platform's Secret was changed (%v)", err)
	}
}

// A rotation mints a new token and keeps the old one valid while a MachineDeployment
// or a MachineSet with machines still names a template that carries it; then the old
// one leaves the tenant and the Secret.
func TestRotationKeepsOldTokenUntilPoolsRolled(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), false)
	uid := clusterUID(t, ns)
	talosPool(t, ns, "a")
	old := minted(t, ns)
	// A MachineSet with a machine, made from a template that carries the old token.
	mustCreate(t, talosTemplate(ns, "old", old))
	ms := machineSet(ns, "a-old", "old", 1)
	mustCreate(t, ms)

	askRotation(t, ns, "2026-12-02")
	var current string
	eventually(t, "a new token", func(ctx context.Context) error {
		s, err := identity(ctx, ns)
		if err != nil {
			return err
		}
		current = string(s.Data[resolve.TalosKeyBootstrapToken])
		if current == old || string(s.Data[resolve.TalosKeyPreviousBootstrapToken]) != old {
			return fmt.Errorf("token %s, previous %s", current, s.Data[resolve.TalosKeyPreviousBootstrapToken])
		}
		return nil
	})
	wantTokens(t, uid, current, old)
	state(t, ns, func(st tenant.State) error {
		if st.IdentityReason != joinidentity.ReasonRotating || !strings.Contains(st.IdentityMessage, "MachineSet a-old") {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	// Still held a while later.
	time.Sleep(3 * time.Second)
	wantTokens(t, uid, current, old)

	// The pool rolled: the old MachineSet has no machine left.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
		t.Fatal(err)
	}
	p := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Replicas = ptr(int32(0))
	if err := env.Client.Patch(ctx, ms, p); err != nil {
		t.Fatal(err)
	}
	wantTokens(t, uid, current)
	eventually(t, "the rotation is done", func(ctx context.Context) error {
		s, err := identity(ctx, ns)
		if err != nil {
			return err
		}
		if _, ok := s.Data[resolve.TalosKeyPreviousBootstrapToken]; ok || string(s.Data[resolve.TalosKeyBootstrapToken]) != current {
			return fmt.Errorf("previous still there")
		}
		return nil
	})
	state(t, ns, func(st tenant.State) error {
		if st.IdentityReason != joinidentity.ReasonMinted {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
}

// A tenant API server that does not answer is reported, retried, and holds no other
// cluster back; nothing is minted twice.
func TestUnreachableTenantReportedOthersUnaffected(t *testing.T) {
	dead := deadKubeconfig(t)
	down := newTenant(t, dead, false)
	talosPool(t, down, "a")
	state(t, down, func(st tenant.State) error {
		if st.Reachable != metav1.ConditionFalse || st.ReachableReason != joinidentity.ReasonUnreachable {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	up := newTenant(t, env.KubeConfig(), false)
	talosPool(t, up, "a")
	var token string
	eventually(t, "the other tenant's identity", func(ctx context.Context) error {
		s, err := identity(ctx, up)
		if err == nil {
			token = string(s.Data[resolve.TalosKeyBootstrapToken])
		}
		return err
	})
	wantTokens(t, clusterUID(t, up), token)
	st, _ := status.Get(types.NamespacedName{Namespace: down, Name: cluster})
	t.Logf("unreachable tenant: %s", st.ReachableMessage)
}

// A platform Secret whose token is no bootstrap token gets a clear state and nothing
// in the tenant.
func TestMalformedPlatformToken(t *testing.T) {
	ctx := context.Background()
	ns := newTenant(t, env.KubeConfig(), true)
	s, err := identity(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	s.Data[resolve.TalosKeyBootstrapToken] = []byte("not-a-token\n; rm -rf /")
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	talosPool(t, ns, "a")
	state(t, ns, func(st tenant.State) error {
		if st.Identity != metav1.ConditionFalse || st.IdentityReason != joinidentity.ReasonInvalidIdentity {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	if got, err := tenantTokens(ctx, clusterUID(t, ns)); err != nil || len(got) != 0 {
		t.Errorf("tenant tokens %v (%v)", got, err)
	}
}

// deadKubeconfig is the API server's kubeconfig pointed at a port nothing listens on.
func deadKubeconfig(t *testing.T) []byte {
	t.Helper()
	kc := string(env.KubeConfig())
	host := strings.TrimSuffix(env.Config.Host, "/")
	dead := "https://127.0.0.1:1"
	if !strings.Contains(kc, host) {
		t.Fatalf("kubeconfig does not name %s", host)
	}
	return []byte(strings.ReplaceAll(kc, host, dead))
}

func talosTemplate(ns, name, token string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("bootstrap.cluster.x-k8s.io/v1alpha3")
	u.SetKind("TalosConfigTemplate")
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, "none", "spec", "template", "spec", "generateType")
	_ = unstructured.SetNestedField(u.Object, "version: v1alpha1\ncluster:\n  token: "+token+"\n", "spec", "template", "spec", "data")
	return u
}

func machineSet(ns, name, template string, replicas int32) *clusterv1.MachineSet {
	return &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster, "nodegroup.io/pool": "a"}},
		Spec: clusterv1.MachineSetSpec{
			ClusterName: cluster, Replicas: ptr(replicas),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": name}},
				Spec: clusterv1.MachineSpec{
					ClusterName: cluster, Version: "v1.35.4",
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "TalosConfigTemplate", Name: template}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachineTemplate", Name: "x"},
				},
			},
		},
	}
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
