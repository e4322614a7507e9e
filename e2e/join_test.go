//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// A Talos pool on the built-in class joins its tenant cluster with nothing but the
// Cluster and its control plane prepared: the operator makes the join identity, the
// kubelet authenticates with its bootstrap token, has its client certificate signed by
// the tenant's controller-manager, registers its Node (no providerID: the simulated CAPK
// patches it), and Cluster API links the Machine and syncs the role and pool labels.
func TestTalosPoolJoinsThroughTLSBootstrap(t *testing.T) {
	timed(t)
	ns := "e2e-join"
	newTenant(t, ns)
	ng := newPool(ns, "join", 1, 1)
	start := time.Now()
	create(t, ng)
	_, nodes := waitRunning(t, "pool running", ng, 1)
	t.Logf("pool created -> Machine Running with a Ready, linked Node: %s", time.Since(start).Round(100*time.Millisecond))
	node := nodes[0]
	for _, key := range []string{names.NodeRolePrefix + "worker", names.NodeLabelPool, names.NodeLabelLocation} {
		if _, ok := node.Labels[key]; !ok {
			t.Errorf("node %s lacks the label %s that Cluster API syncs (labels %v)", node.Name, key, node.Labels)
		}
	}
	// The kubelet's own writes never carried the synced labels (NodeRestriction refuses
	// node-role labels from a kubelet): Cluster API's field manager owns them.
	for _, label := range []string{names.NodeRolePrefix + "worker", names.NodeLabelPool} {
		owners := 0
		for _, mf := range node.ManagedFields {
			if mf.FieldsV1 == nil || !strings.Contains(mf.FieldsV1.GetRawString(), `"f:`+label+`"`) {
				continue
			}
			owners++
			if !strings.Contains(mf.Manager, "capi") && !strings.Contains(mf.Manager, "cluster-api") {
				t.Errorf("the label %s is owned by %q, not Cluster API", label, mf.Manager)
			}
		}
		if owners == 0 {
			t.Errorf("no field manager owns the label %s", label)
		}
	}

	ctx := context.Background()
	id := joinIdentity(t, ns)
	token := string(id.Data[resolve.TalosKeyBootstrapToken])
	// The Node's client certificate came from a CSR that the bootstrap token made.
	csr := nodeCSR(t, ns, node.Name)
	if want := bootstrapapi.BootstrapUserPrefix + token[:6]; csr.Spec.Username != want {
		t.Errorf("the CSR of node %s was made by %q, want %q (the cluster's bootstrap token)", node.Name, csr.Spec.Username, want)
	}
	if err := conditionTrue(ctx, ng, v1.ConditionTalosIdentityReady); err != nil {
		t.Error(err)
	}
	if err := conditionTrue(ctx, ng, v1.ConditionTenantClusterReachable); err != nil {
		t.Error(err)
	}
	if c, _ := poolCondition(ctx, ng, v1.ConditionTalosIdentityReady); c != nil && c.Reason != joinidentity.ReasonMinted {
		t.Errorf("TalosIdentityReady reason %s, want %s", c.Reason, joinidentity.ReasonMinted)
	}
}

// Deleting the tenant's bootstrap token is repaired within seconds, and a machine made
// afterwards still joins.
func TestDeletedBootstrapTokenRepaired(t *testing.T) {
	timed(t)
	ns := "e2e-token"
	newTenant(t, ns)
	ng := newPool(ns, "token", 1, 2)
	startPool(t, ng, 1)
	ctx := context.Background()
	uid := clusterUID(t, ns)
	tokens := tenantTokens(t, ns, uid)
	if len(tokens) != 1 {
		t.Fatalf("the tenant holds %d bootstrap tokens of the cluster, want 1", len(tokens))
	}
	old := tokens[0]
	if err := tenantClient(ns).Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, short, "the token is back", func(context.Context) error {
		got := tenantTokens(t, ns, uid)
		if len(got) != 1 || got[0].UID == old.UID || string(got[0].Data[bootstrapapi.BootstrapTokenSecretKey]) != string(old.Data[bootstrapapi.BootstrapTokenSecretKey]) {
			return fmt.Errorf("%d tokens", len(got))
		}
		return nil
	})
	t.Logf("a deleted bootstrap token was back in the tenant in %s", time.Since(start).Round(10*time.Millisecond))
	if err := update(t, ng, func(ng *v1.NodeGroup) { ng.Spec.MinReplicas = 2 }); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitRunning(t, "a second machine joins", ng, 2)
	t.Logf("a machine made after the repair joined in %s", time.Since(start).Round(100*time.Millisecond))
}

// A rotation asked on the Cluster rolls every Talos pool of the cluster once, onto
// machines that joined with the new token; then the old token leaves the tenant.
func TestRotationRollsTalosPoolsOnce(t *testing.T) {
	timed(t)
	ns := "e2e-rotate"
	newTenant(t, ns)
	a, b := newPool(ns, "a", 1, 1), newPool(ns, "b", 1, 1)
	create(t, a)
	create(t, b)
	before := map[string][]clusterv1.Machine{}
	for _, ng := range []*v1.NodeGroup{a, b} {
		before[ng.Name], _ = waitRunning(t, "pool "+ng.Name+" running", ng, 1)
	}
	ctx := context.Background()
	old := string(joinIdentity(t, ns).Data[resolve.TalosKeyBootstrapToken])
	setsBefore := map[string]int{}
	for _, ng := range []*v1.NodeGroup{a, b} {
		sets, err := machineSets(ctx, ng)
		if err != nil {
			t.Fatal(err)
		}
		setsBefore[ng.Name] = len(sets)
	}
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.SetAnnotations(map[string]string{joinidentity.AnnotationRotate: "e2e-1"})
	start := time.Now()
	if err := env.Client.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
	var current string
	eventually(t, long, "both pools rolled onto machines joined with the new token, and the old token gone", func(ctx context.Context) error {
		id := joinIdentity(t, ns)
		current = string(id.Data[resolve.TalosKeyBootstrapToken])
		if current == old {
			return fmt.Errorf("not rotated yet")
		}
		for _, ng := range []*v1.NodeGroup{a, b} {
			ms, nodes, err := poolRunning(ctx, ng, 1)
			if err != nil {
				return err
			}
			if ms[0].UID == before[ng.Name][0].UID {
				return fmt.Errorf("pool %s not rolled yet", ng.Name)
			}
			if csr := nodeCSR(t, ns, nodes[0].Name); csr.Spec.Username != bootstrapapi.BootstrapUserPrefix+current[:6] {
				return fmt.Errorf("node %s joined as %s", nodes[0].Name, csr.Spec.Username)
			}
		}
		for _, s := range tenantTokens(t, ns, c.UID) {
			if string(s.Data[bootstrapapi.BootstrapTokenIDKey]) == old[:6] {
				return fmt.Errorf("the old token %s is still in the tenant", old[:6])
			}
		}
		if _, ok := id.Data[resolve.TalosKeyPreviousBootstrapToken]; ok {
			return fmt.Errorf("the identity still keeps the previous token")
		}
		return nil
	})
	t.Logf("rotation asked -> both pools rolled and the old token removed: %s", time.Since(start).Round(100*time.Millisecond))
	// Once: one rollout per pool, so one MachineSet more than before each (old ones
	// scaled to zero may stay), and the tenant holds only the new token.
	for _, ng := range []*v1.NodeGroup{a, b} {
		sets, err := machineSets(ctx, ng)
		if err != nil {
			t.Fatal(err)
		}
		if len(sets) > setsBefore[ng.Name]+1 {
			t.Errorf("pool %s has %d MachineSets, %d before the rotation: it rolled more than once", ng.Name, len(sets), setsBefore[ng.Name])
		}
	}
	if got := tenantTokens(t, ns, c.UID); len(got) != 1 || string(got[0].Data[bootstrapapi.BootstrapTokenIDKey]) != current[:6] {
		t.Errorf("the tenant holds %d tokens of the cluster, want only %s", len(got), current[:6])
	}
}

// A tenant whose API server is down is reported on its pools, and retried; another
// tenant's pool keeps reconciling; nothing is deleted on either side, and the pool
// reports the tenant reachable again once it is back.
func TestUnreachableTenantReportedOthersUnaffected(t *testing.T) {
	timed(t)
	ctx := context.Background()
	downTenant, err := env.NewTenant(ctx, "e2e-down", false)
	if err != nil {
		t.Fatal(err)
	}
	down, up := "e2e-down", "e2e-up"
	env.UseTenant(down, downTenant)
	newTenant(t, down)
	newTenant(t, up)
	stuck := newPool(down, "stuck", 1, 1)
	create(t, stuck)
	eventually(t, long, "the down tenant's pool reaches its tenant", func(ctx context.Context) error {
		return conditionTrue(ctx, stuck, v1.ConditionTenantClusterReachable)
	})
	var md *clusterv1.MachineDeployment
	eventually(t, short, "the down tenant's pool has its MachineDeployment", func(ctx context.Context) (err error) {
		md, err = machineDeployment(ctx, stuck)
		return err
	})
	downTenant.StopAPIServer()
	start := time.Now()
	eventually(t, long, "the pool reports its tenant unreachable", func(ctx context.Context) error {
		c, err := poolCondition(ctx, stuck, v1.ConditionTenantClusterReachable)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionFalse || c.Reason != joinidentity.ReasonUnreachable {
			return fmt.Errorf("TenantClusterReachable=%s %s", c.Status, c.Reason)
		}
		return nil
	})
	t.Logf("API server stopped -> TenantClusterReachable=False: %s", time.Since(start).Round(100*time.Millisecond))
	// Meanwhile another tenant's pool is created and runs.
	start = time.Now()
	startPool(t, newPool(up, "busy", 1, 1), 1)
	t.Logf("with the other tenant down, a pool ran in %s", time.Since(start).Round(100*time.Millisecond))

	if err := downTenant.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	eventually(t, long, "the pool reports its tenant reachable again", func(ctx context.Context) error {
		return conditionTrue(ctx, stuck, v1.ConditionTenantClusterReachable)
	})
	t.Logf("API server back -> TenantClusterReachable=True: %s", time.Since(start).Round(100*time.Millisecond))
	after, err := machineDeployment(ctx, stuck)
	if err != nil || after.UID != md.UID {
		t.Errorf("the down tenant's MachineDeployment was replaced or deleted (%v)", err)
	}
	if got := tenantTokens(t, down, clusterUID(t, down)); len(got) != 1 {
		t.Errorf("the down tenant holds %d bootstrap tokens of the cluster after the outage, want 1", len(got))
	}
}

// A platform's own <cluster>-talos (made from the tenant's CA) is used as is and never
// modified, and its pools join; one with a wrong CA never gets a Node, and its Machine
// stays unlinked.
func TestPlatformIdentityUsedAsIs(t *testing.T) {
	timed(t)
	ctx := context.Background()
	good, bad := "e2e-platform", "e2e-badca"
	for _, ns := range []string{good, bad} {
		newTenant(t, ns)
	}
	var ca []byte
	eventually(t, short, "the control-plane provider writes "+cluster+"-ca", func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: good, Name: cluster + "-ca"}, s); err != nil {
			return err
		}
		ca = s.Data[corev1.TLSCertKey]
		return nil
	})
	platform := platformIdentity(t, good, ca)
	wrongCA, _, err := testenv.NewCA("not-the-tenant-ca")
	if err != nil {
		t.Fatal(err)
	}
	platformIdentity(t, bad, wrongCA)

	ng := newPool(good, "platform", 1, 1)
	startPool(t, ng, 1)
	if c, err := poolCondition(ctx, ng, v1.ConditionTalosIdentityReady); err != nil || c.Reason != joinidentity.ReasonPlatformProvided {
		t.Errorf("TalosIdentityReady: %+v (%v), want reason %s", c, err, joinidentity.ReasonPlatformProvided)
	}
	if got := joinIdentity(t, good); got.ResourceVersion != platform.ResourceVersion {
		t.Errorf("the platform's %s was modified", got.Name)
	}

	wrong := newPool(bad, "wrong", 1, 1)
	create(t, wrong)
	eventually(t, long, "the machine refused by its tenant", func(ctx context.Context) error {
		ms, err := machines(ctx, wrong)
		if err != nil || len(ms) != 1 {
			return fmt.Errorf("%d machines (%v)", len(ms), err)
		}
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(bad)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == ms[0].Name && e.Type == corev1.EventTypeWarning && strings.Contains(e.Reason, "Join") {
				return nil
			}
		}
		return fmt.Errorf("no join failure reported on machine %s yet", ms[0].Name)
	})
	consistently(t, 15*time.Second, "the machine with the wrong CA stays unlinked", func(ctx context.Context) error {
		ms, err := machines(ctx, wrong)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Status.NodeRef.IsDefined() {
				return fmt.Errorf("machine %s linked to node %s", m.Name, m.Status.NodeRef.Name)
			}
		}
		return nil
	})
}

// platformIdentity creates a platform's own <cluster>-talos in ns, with clusterCA as the
// tenant's CA and the checked-in test machine CA.
func platformIdentity(t *testing.T, ns string, clusterCA []byte) *corev1.Secret {
	t.Helper()
	machineCA, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "internal", "render", "testdata", "machine-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + resolve.TalosSecretSuffix}, Data: map[string][]byte{
		resolve.TalosKeyMachineToken:   []byte("w7ysn3.2ti4qmz2k6ajb9nt"),
		resolve.TalosKeyMachineCACert:  machineCA,
		resolve.TalosKeyClusterCACert:  clusterCA,
		resolve.TalosKeyClusterID:      []byte("Nhx0p0XcSPVpeFbSiGrMbT6cVTuqc1UwIuJ0jZ_6rzI="),
		resolve.TalosKeyClusterSecret:  []byte("bx4j3zGGpZ1lx1D0dw4XzVLHzJ8lwnhc0eMdQ+k6sF0="),
		resolve.TalosKeyBootstrapToken: []byte(token),
	}}
	create(t, s)
	return s
}

// joinIdentity reads the cluster's <cluster>-talos, waiting for it.
func joinIdentity(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	eventually(t, short, "the cluster's join identity", func(ctx context.Context) error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cluster + resolve.TalosSecretSuffix}, s)
	})
	return s
}

func clusterUID(t *testing.T, ns string) types.UID {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	return c.UID
}

// tenantTokens are the bootstrap token Secrets the operator keeps for the cluster in
// the namespace's tenant.
func tenantTokens(t *testing.T, ns string, uid types.UID) []corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := tenantClient(ns).List(context.Background(), &list, client.InNamespace(metav1.NamespaceSystem),
		client.MatchingLabels{tenant.LabelCluster: string(uid)}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// nodeCSR is the approved client certificate request of the node's kubelet.
func nodeCSR(t *testing.T, ns, node string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var list certificatesv1.CertificateSigningRequestList
	if err := tenantClient(ns).List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var found *certificatesv1.CertificateSigningRequest
	for i := range list.Items {
		csr := &list.Items[i]
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || len(csr.Status.Certificate) == 0 {
			continue
		}
		if subject, err := csrSubject(csr); err == nil && subject == "system:node:"+node {
			found = csr
		}
	}
	if found == nil {
		t.Fatalf("no signed kubelet client CSR for node %s in the tenant (of %d)", node, len(list.Items))
	}
	return found
}

// csrSubject is the common name a CSR asks for.
func csrSubject(csr *certificatesv1.CertificateSigningRequest) (string, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return "", fmt.Errorf("CSR %s: no PEM request", csr.Name)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return "", err
	}
	return req.Subject.CommonName, nil
}
