package simulator_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// The tests play Cluster API core by hand in the management cluster: they create the
// Cluster, clone rendered templates into a bootstrap config and a KubevirtMachine per
// Machine, link them to the Machine and copy the data Secret name onto it, as the
// MachineSet and Machine controllers do; and they give the Cluster the tenant's endpoint
// as Cluster API copies it from the control plane. The simulator does the rest, the
// simulated kubelets joining the tenant cluster (tenantCluster) through a TLS bootstrap.

const (
	ns      = "tenant-a"
	cluster = "tenant-a"
	// cpVersion is the control plane's release; pools run the catalog's v1.35 patch or,
	// for the Kairos class with its own image, that image's release.
	cpVersion = "v1.35.4"
	// nodeBootstrapGroup is the group kubeadm's (and the operator's) bootstrap tokens
	// authenticate in.
	nodeBootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"
)

var (
	tenantOnce sync.Once
	// talosToken is the bootstrap token the Talos pools join with, made in the tenant
	// cluster as the operator makes it.
	talosToken string
	// failed keeps the tenant's logs once a test has failed.
	failed atomic.Bool
)

// tenant creates, once, the namespace and a Cluster with a KubevirtCluster and a
// KamajiControlPlane, as the platform would, with the tenant's endpoint, and the Talos
// pools' bootstrap token in the tenant cluster.
func tenant(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			failed.Store(true)
		}
	})
	var err error
	tenantOnce.Do(func() {
		host, port := tenantEndpoint(t)
		if err = createCluster(t.Context(), ns, cluster, &clusterv1.APIEndpoint{Host: host, Port: port}); err != nil {
			return
		}
		talosToken, err = createToken(t.Context(), time.Now().Add(time.Hour))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func createCluster(ctx context.Context, namespace, name string, endpoint *clusterv1.APIEndpoint) error {
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	kc := newObject(simulator.KubevirtClusterGVK, namespace, name)
	kcp := newObject(simulator.KamajiControlPlaneGVK, namespace, name)
	if err := unstructured.SetNestedField(kcp.Object, cpVersion, "spec", "version"); err != nil {
		return err
	}
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: clusterv1.ClusterSpec{
		ClusterNetwork: clusterv1.ClusterNetwork{
			Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.95.0.0/16"}},
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
		},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: simulator.KubevirtClusterGVK.Group, Kind: "KubevirtCluster", Name: name},
		ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: simulator.KamajiControlPlaneGVK.Group, Kind: "KamajiControlPlane", Name: name},
	}}
	if endpoint != nil {
		cl.Spec.ControlPlaneEndpoint = *endpoint
	}
	for _, obj := range []client.Object{kc, kcp, cl} {
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// createToken makes a bootstrap token in the tenant's kube-system as the operator keeps
// the Talos pools' (authentication only, in kubeadm's node group), expiring then.
func createToken(ctx context.Context, expires time.Time) (string, error) {
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", err
	}
	id, secret, _ := strings.Cut(token, ".")
	return token, tenantCluster.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(id)},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:               []byte(id),
			bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
			bootstrapapi.BootstrapTokenExpirationKey:       []byte(expires.UTC().Format(time.RFC3339)),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
			bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(nodeBootstrapGroup),
		},
	})
}

func TestClusterStandIns(t *testing.T) {
	tenant(t)
	ctx := t.Context()
	host, port := tenantEndpoint(t)

	kc := eventually(t, "KubevirtCluster ready", func() (*unstructured.Unstructured, bool) {
		o := get(t, simulator.KubevirtClusterGVK, ns, cluster)
		ready, _, _ := unstructured.NestedBool(o.Object, "status", "ready")
		return o, ready
	})
	wantEndpoint := map[string]any{"host": host, "port": int64(port)}
	if got, _, _ := unstructured.NestedMap(kc.Object, "spec", "controlPlaneEndpoint"); !reflect.DeepEqual(got, wantEndpoint) {
		t.Errorf("KubevirtCluster endpoint %v, want the Cluster's %v", got, wantEndpoint)
	}

	kcp := eventually(t, "KamajiControlPlane initialized", func() (*unstructured.Unstructured, bool) {
		o := get(t, simulator.KamajiControlPlaneGVK, ns, cluster)
		ok, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "controlPlaneInitialized")
		return o, ok
	})
	status, _, _ := unstructured.NestedMap(kcp.Object, "status")
	for field, want := range map[string]any{
		"ready": true, "version": cpVersion, "externalManagedControlPlane": true,
		"replicas": int64(2), "readyReplicas": int64(2), "availableReplicas": int64(2), "upToDateReplicas": int64(2),
	} {
		if status[field] != want {
			t.Errorf("KamajiControlPlane status.%s = %v, want %v", field, status[field], want)
		}
	}
	if !hasCondition(status, "Available") {
		t.Errorf("KamajiControlPlane has no Available=True condition: %v", status["conditions"])
	}

	// Kamaji's Secrets for Cluster API: the tenant's admin kubeconfig and its CA.
	secret := func(name string) *corev1.Secret {
		return eventually(t, "the Secret "+name, func() (*corev1.Secret, bool) {
			s := &corev1.Secret{}
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
			return s, err == nil
		})
	}
	kubeconfig := secret(cluster + "-kubeconfig")
	if !bytes.Equal(kubeconfig.Data["value"], tenantCluster.Kubeconfig) {
		t.Error("the kubeconfig Secret does not hold the tenant's kubeconfig")
	}
	checkClusterSecret(t, kubeconfig, "KamajiControlPlane", cluster)
	ca := secret(cluster + "-ca")
	if !bytes.Equal(ca.Data["tls.crt"], tenantCluster.CACert) || !bytes.Equal(ca.Data["tls.key"], tenantCluster.CAKey) {
		t.Error("the CA Secret does not hold the tenant's CA (tls.crt, tls.key)")
	}
	checkClusterSecret(t, ca, "KamajiControlPlane", cluster)
	for _, s := range []*corev1.Secret{kubeconfig, ca} {
		if s.Labels["kamaji.clastix.io/component"] != "capi" {
			t.Errorf("Secret %s lacks Kamaji's labels: %v", s.Name, s.Labels)
		}
	}

	// What Kamaji's kubeadm phases set up in the tenant for joins: cluster-info (signed
	// by the tenant's bootstrapsigner for each signing token) and the bootstrappers' RBAC.
	info := eventually(t, "kube-public/cluster-info in the tenant", func() (*corev1.ConfigMap, bool) {
		cm := &corev1.ConfigMap{}
		err := tenantCluster.Client.Get(ctx, client.ObjectKey{Namespace: "kube-public", Name: "cluster-info"}, cm)
		return cm, err == nil
	})
	cfg, err := clientcmd.Load([]byte(info.Data["kubeconfig"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		if c.Server != tenantCluster.Server || !bytes.Equal(c.CertificateAuthorityData, tenantCluster.CACert) {
			t.Errorf("cluster-info names %s with another CA, want %s and the tenant CA", c.Server, tenantCluster.Server)
		}
	}
	for name, want := range map[string]struct{ role, group string }{
		"kubeadm:kubelet-bootstrap":                     {"system:node-bootstrapper", nodeBootstrapGroup},
		"kubeadm:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", nodeBootstrapGroup},
		"kubeadm:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
		"kubeadm:get-nodes":                             {"kubeadm:get-nodes", nodeBootstrapGroup},
	} {
		b := &rbacv1.ClusterRoleBinding{}
		if err := tenantCluster.Client.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
			t.Errorf("ClusterRoleBinding %s in the tenant: %v", name, err)
			continue
		}
		if b.RoleRef.Name != want.role || len(b.Subjects) != 1 || b.Subjects[0].Name != want.group {
			t.Errorf("ClusterRoleBinding %s binds %s to %v, want %s to %s", name, b.RoleRef.Name, b.Subjects, want.role, want.group)
		}
	}

	// An upgrade: the control plane reports the new version at once.
	setVersion := func(v string) {
		p := fmt.Appendf(nil, `{"spec":{"version":%q}}`, v)
		if err := env.Client.Patch(ctx, kcp, client.RawPatch("application/merge-patch+json", p)); err != nil {
			t.Fatal(err)
		}
	}
	setVersion("v1.35.5")
	eventually(t, "control plane status.version follows spec.version", func() (any, bool) {
		v, _, _ := unstructured.NestedString(get(t, simulator.KamajiControlPlaneGVK, ns, cluster).Object, "status", "version")
		return nil, v == "v1.35.5"
	})
	setVersion(cpVersion)

	// A Cluster without an endpoint gets the tenant API server's.
	if err := createCluster(ctx, "no-endpoint", "bare", nil); err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{simulator.KubevirtClusterGVK, simulator.KamajiControlPlaneGVK} {
		eventually(t, gvk.Kind+" endpoint from the tenant", func() (any, bool) {
			got, _, _ := unstructured.NestedMap(get(t, gvk, "no-endpoint", "bare").Object, "spec", "controlPlaneEndpoint")
			return nil, reflect.DeepEqual(got, wantEndpoint)
		})
	}
}

// TestTalosWorker: a Talos machine with the cluster's token, CA and endpoint joins the
// tenant: its kubelet posts a CSR as the bootstrap token, the tenant's controller-manager
// approves and signs it, and the kubelet registers the Node named after its VM with that
// certificate, without a providerID, which the simulated CAPK then patches on.
func TestTalosWorker(t *testing.T) {
	tenant(t)
	in := talosInput(t)
	out := renderPool(t, in)
	tmpl := out.Bootstrap.(*talos.TalosConfigTemplate)
	w := boot(t, out, "workers-talos-0", nil, nil)

	// The data Secret holds the rendered machine config, byte for byte.
	secret := w.dataSecret(t)
	if got := string(secret.Data["value"]); got != tmpl.Spec.Template.Spec.Data {
		t.Errorf("data Secret differs from the rendered machine config:\n%s", got)
	}
	checkClusterSecret(t, secret, "TalosConfig", w.config.GetName())
	if ready, _, _ := unstructured.NestedBool(w.config.Object, "status", "ready"); !ready {
		t.Error("TalosConfig status.ready is not true")
	}

	node := waitNode(t, w.vm.GetName()) // Talos takes the VM's hostname
	checkNode(t, w, node, map[string]string{
		"example.com/team": "payments", "tier": "backend",
		"topology.kubernetes.io/region": "eu-central", "topology.kubernetes.io/zone": "fsn1-a",
	}, []corev1.Taint{
		{Key: "example.com/dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule},
	})
	checkJoin(t, node.Name, talosToken)
	if updated, _, _ := unstructured.NestedBool(get(t, simulator.KubevirtMachineGVK, ns, w.vm.GetName()).Object, "status", "nodeupdated"); !updated {
		t.Error("the KubevirtMachine does not record status.nodeupdated")
	}
}

// TestTalosJoinRefused: a machine whose token the tenant does not know, whose token has
// expired, or that trusts another CA than the tenant's, registers no Node; the Machine
// says why.
func TestTalosJoinRefused(t *testing.T) {
	tenant(t)
	unknown, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	expired, err := createToken(t.Context(), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	otherCA, _, err := testenv.NewCA("another-ca")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*render.TalosSecrets)
		// why is in the event's note.
		why string
	}{
		{"unknown-token", func(s *render.TalosSecrets) { s.BootstrapToken = unknown }, "Unauthorized"},
		{"expired-token", func(s *render.TalosSecrets) { s.BootstrapToken = expired }, "Unauthorized"},
		{"other-ca", func(s *render.TalosSecrets) { s.ClusterCACert = string(otherCA) }, "certificate signed by unknown authority"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenant(t)
			in := talosInput(t)
			c.edit(in.TalosSecrets)
			w := boot(t, renderPool(t, in), "workers-talos-"+c.name, nil, nil)
			t.Cleanup(func() { deleteMachine(t, w) }) // or its kubelet keeps trying
			ev := waitEvent(t, w.machine, "JoinFailed")
			if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, c.why) {
				t.Errorf("event %s %q, want a Warning saying %q", ev.Type, ev.Note, c.why)
			}
			noNode(t, w.vm.GetName())
			if csr := nodeCSR(t, w.vm.GetName()); csr != nil {
				t.Errorf("the tenant has a CSR %s for a node that may not join", csr.Name)
			}
		})
	}
}

func TestKairosWorker(t *testing.T) {
	tenant(t)
	in := kairosInput(t)
	out := renderPool(t, in)
	tmpl := out.Bootstrap.(*kairos.KairosConfigTemplate)
	w := boot(t, out, "workers-kairos-0", nil, nil)

	// The data Secret is a cloud-config carrying the rendered join configuration, files,
	// DNS and user, plus what the provider adds: the node name, the uninitialized taint,
	// and the discovery with a token it made in the tenant.
	secret := w.dataSecret(t)
	checkClusterSecret(t, secret, "KairosConfig", w.config.GetName())
	value := string(secret.Data["value"])
	if !strings.HasPrefix(value, "#cloud-config\n") {
		t.Errorf("data Secret is not a cloud-config:\n%s", value)
	}
	var cc map[string]any
	if err := yaml.Unmarshal([]byte(value), &cc); err != nil {
		t.Fatal(err)
	}
	rendered, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(rendered, "spec", "template", "spec")
	var kubeadm map[string]any
	config, _, _ := unstructured.NestedString(cc, "cluster", "config")
	if err := yaml.Unmarshal([]byte(config), &kubeadm); err != nil {
		t.Fatal(err)
	}
	status, _, _ := unstructured.NestedMap(w.config.Object, "status")
	tokenID, _ := status["bootstrapTokenID"].(string)
	token, _, _ := unstructured.NestedString(kubeadm, "joinConfiguration", "discovery", "bootstrapToken", "token")
	if tokenID == "" || !strings.HasPrefix(token, tokenID+".") {
		t.Errorf("discovery token %q, status.bootstrapTokenID %q: want the token of that id", token, tokenID)
	}
	host, port := tenantEndpoint(t)
	wantJoin := runtime.DeepCopyJSONValue(spec["kubeadm"].(map[string]any)["joinConfiguration"]).(map[string]any)
	reg := wantJoin["nodeRegistration"].(map[string]any)
	reg["name"] = w.machine.Name
	reg["taints"] = append(reg["taints"].([]any), map[string]any{"key": "node.cluster.x-k8s.io/uninitialized", "effect": "NoSchedule"})
	wantJoin["discovery"] = map[string]any{"bootstrapToken": map[string]any{
		"token": token, "apiServerEndpoint": host + ":" + strconv.Itoa(int(port)),
		"caCertHashes": []any{caPin(t, tenantCluster.CACert)},
	}}
	same(t, "cluster.config joinConfiguration", kubeadm["joinConfiguration"], wantJoin)
	same(t, "cluster.config kubernetesVersion", kubeadm["clusterConfiguration"], map[string]any{"kubernetesVersion": w.machine.Spec.Version})
	same(t, "write_files", cc["write_files"], spec["files"])
	dns, _, _ := unstructured.NestedSlice(cc, "stages", "boot")
	same(t, "boot DNS", dns, []any{map[string]any{"name": "Configure DNS resolvers for early boot",
		"dns": map[string]any{"nameservers": spec["dnsServers"], "path": "/etc/resolv.conf"}}})
	same(t, "users", cc["users"], []any{map[string]any{"name": "kairos", "groups": []any{"admin"},
		"ssh_authorized_keys": []any{in.Class.Kairos.SSHAuthorizedKey}}})
	if created, _, _ := unstructured.NestedBool(status, "initialization", "dataSecretCreated"); !created || status["ready"] != true {
		t.Errorf("KairosConfig status %v: want initialization.dataSecretCreated and ready", status)
	}

	// The provider's token, in the tenant: a kubeadm node token, for signing cluster-info
	// and for authentication, expiring.
	tok := &corev1.Secret{}
	if err := tenantCluster.Client.Get(t.Context(), client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + tokenID}, tok); err != nil {
		t.Fatalf("the provider's token in the tenant: %v", err)
	}
	for key, want := range map[string]string{
		"token-id": tokenID, "token-secret": strings.TrimPrefix(token, tokenID+"."),
		"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true", "auth-extra-groups": nodeBootstrapGroup,
	} {
		if got := string(tok.Data[key]); got != want {
			t.Errorf("token Secret %s = %q, want %q", key, got, want)
		}
	}
	if exp, err := time.Parse(time.RFC3339, string(tok.Data["expiration"])); err != nil || time.Until(exp) < 10*time.Minute {
		t.Errorf("token expiration %q, want some minutes ahead", tok.Data["expiration"])
	}

	node := waitNode(t, w.machine.Name) // the provider names the node after the Machine
	checkNode(t, w, node, map[string]string{"tier": "web"}, []corev1.Taint{
		{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule},
		clusterv1.NodeUninitializedTaint,
	})
	if node.Status.NodeInfo.KubeletVersion == cpVersion {
		t.Errorf("the Kairos pool runs its class image's release, not the control plane's")
	}
	checkJoin(t, node.Name, token)
}

// TestKubeletRefusesForbiddenLabels: a bootstrap config asking the kubelet for a label it
// may not set itself gets no Node, and the Machine says why.
func TestKubeletRefusesForbiddenLabels(t *testing.T) {
	tenant(t)
	out := renderPool(t, talosInput(t))
	mark := reconcileMark()
	w := boot(t, out, "workers-talos-bad", nil, func(spec map[string]any) {
		data := spec["data"].(string)
		edited := strings.Replace(data, "node-labels: ", "node-labels: node-role.kubernetes.io/worker=,", 1)
		if edited == data {
			t.Fatal("the rendered machine config has no node-labels to edit")
		}
		spec["data"] = edited
	})
	ev := waitEvent(t, w.machine, "KubeletRefused")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "node-role.kubernetes.io/worker") {
		t.Errorf("event %s %q", ev.Type, ev.Note)
	}
	quiesce(t, mark, "simulator-node")
	noNode(t, w.vm.GetName())
}

// TestNodeRestriction: what the OS sets on its Node goes with the kubelet's identity
// (Talos machine.nodeLabels and nodeTaints), so the tenant's NodeRestriction admission
// refuses a label a kubelet may not set, and any change of its taints: the Node is
// registered without them, and the Machine says why. A label it may set is applied.
func TestNodeRestriction(t *testing.T) {
	tenant(t)
	withNodeLabels := func(labels string) func(spec map[string]any) {
		return func(spec map[string]any) {
			data := spec["data"].(string)
			edited := strings.Replace(data, "\nmachine:\n", "\nmachine:\n    nodeLabels:\n"+labels, 1)
			if edited == data {
				t.Fatal("the rendered machine config has no machine section to edit")
			}
			spec["data"] = edited
		}
	}
	out := renderPool(t, talosInput(t))

	good := boot(t, out, "workers-talos-oslabel", nil, withNodeLabels("        example.com/from-os: \"yes\"\n"))
	eventually(t, "the OS's label on the Node", func() (*corev1.Node, bool) {
		n := &corev1.Node{}
		err := tenantCluster.Client.Get(t.Context(), client.ObjectKey{Name: good.vm.GetName()}, n)
		return n, err == nil && n.Labels["example.com/from-os"] == "yes"
	})
	if e := nodeWrite(t, good.vm.GetName(), "patch", "system:node:"+good.vm.GetName()); e == nil || e.ResponseStatus.Code != 200 {
		t.Errorf("the OS's label patch as the kubelet: %+v", e)
	}

	bad := boot(t, out, "workers-talos-role", nil, withNodeLabels("        node-role.kubernetes.io/worker: \"\"\n"))
	ev := waitEvent(t, bad.machine, "NodeRefused")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "is not allowed to modify labels: node-role.kubernetes.io/worker") {
		t.Errorf("event %s %q, want NodeRestriction's refusal of the label", ev.Type, ev.Note)
	}
	node := waitNode(t, bad.vm.GetName())
	if _, ok := node.Labels["node-role.kubernetes.io/worker"]; ok {
		t.Errorf("the Node has the node-role label the kubelet may not set: %v", node.Labels)
	}
	if e := nodeWrite(t, bad.vm.GetName(), "patch", "system:node:"+bad.vm.GetName()); e == nil || e.ResponseStatus.Code != 403 {
		t.Errorf("the OS's label patch as the kubelet: %+v, want refused (403)", e)
	}

	// Nor may a kubelet change its Node's taints once registered (Talos
	// machine.nodeTaints).
	tainted := boot(t, out, "workers-talos-ostaint", nil, func(spec map[string]any) {
		data := spec["data"].(string)
		spec["data"] = strings.Replace(data, "\nmachine:\n", "\nmachine:\n    nodeTaints:\n        example.com/from-os: NoSchedule\n", 1)
	})
	ev = waitEvent(t, tainted.machine, "NodeRefused")
	if !strings.Contains(ev.Note, "is not allowed to modify taints") {
		t.Errorf("event %s %q, want NodeRestriction's refusal of the taint", ev.Type, ev.Note)
	}
	node = waitNode(t, tainted.vm.GetName())
	if slices.ContainsFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.Key == "example.com/from-os" }) {
		t.Errorf("the Node has the OS's taint: %v", node.Spec.Taints)
	}
}

// TestDeletedMachineGetsNoNode: a Node is made once per machine. A Machine being deleted
// gets none back after Cluster API deletes its Node, nor does a gone Machine, nor a live
// Machine whose Node was deleted.
func TestDeletedMachineGetsNoNode(t *testing.T) {
	tenant(t)
	ctx := t.Context()
	out := renderPool(t, talosInput(t))

	w := boot(t, out, "workers-talos-del", nil, nil)
	node := waitNode(t, w.vm.GetName())
	// Cluster API's own finalizer keeps a deleted Machine around while it cleans up.
	patch(t, w.machine, func() { w.machine.Finalizers = append(w.machine.Finalizers, clusterv1.MachineFinalizer) })

	mark := reconcileMark()
	for _, obj := range []client.Object{w.machine, w.vm, w.config} {
		if err := env.Client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := tenantCluster.Client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	quiesce(t, mark, "simulator-node")
	noNode(t, node.Name)

	mark = reconcileMark()
	patch(t, w.machine, func() { w.machine.Finalizers = nil })
	quiesce(t, mark, "simulator-node")
	noNode(t, node.Name)

	// A Machine deleted while its VM boots never gets a Node, even once the VM is ready.
	late := boot(t, out, "workers-talos-late", func(m *clusterv1.Machine) {
		patch(t, m, func() { m.Finalizers = append(m.Finalizers, clusterv1.MachineFinalizer) })
		if err := env.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}, nil)
	mark = reconcileMark()
	touch(t, late.machine, late.vm)
	quiesce(t, mark, "simulator-node")
	noNode(t, late.vm.GetName())
	patch(t, late.machine, func() { late.machine.Finalizers = nil })

	// A live Machine's deleted Node stays deleted, as a lost worker would.
	live := boot(t, out, "workers-talos-lost", nil, nil)
	lost := waitNode(t, live.vm.GetName())
	if err := tenantCluster.Client.Delete(ctx, lost); err != nil {
		t.Fatal(err)
	}
	mark = reconcileMark()
	touch(t, live.machine, live.vm)
	quiesce(t, mark, "simulator-node", "simulator-kubevirtmachine")
	noNode(t, lost.Name)
}

// TestSteadyStateWritesNothing: once everything is up, events on every watched object
// reconcile without a single write.
func TestSteadyStateWritesNothing(t *testing.T) {
	tenant(t)
	w := boot(t, renderPool(t, kairosInput(t)), "workers-kairos-steady", nil, nil)
	waitNode(t, w.machine.Name)
	waitLinked(t, w)
	quiesce(t, reconcileMark())

	before := writes.Load()
	mark := reconcileMark()
	cl := &clusterv1.Cluster{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster}, cl); err != nil {
		t.Fatal(err)
	}
	touch(t, w.machine, w.vm, w.config, cl, get(t, simulator.KamajiControlPlaneGVK, ns, cluster), get(t, simulator.KubevirtClusterGVK, ns, cluster))
	quiesce(t, mark, "simulator-node", "simulator-kubevirtmachine", "simulator-kairosconfig", "simulator-cluster")
	if n := writes.Load() - before; n != 0 {
		t.Errorf("the simulator wrote %d times in a steady state", n)
	}
}

// worker is one Machine with its bootstrap config and infrastructure machine.
type worker struct {
	machine    *clusterv1.Machine
	config, vm *unstructured.Unstructured
	md         *clusterv1.MachineDeployment
}

// boot plays Cluster API core for one Machine of the rendered pool, up to the point where
// the simulator makes the VM ready: the clones, the Machine, the owner references, and
// the data Secret's name on the Machine once the bootstrap config reports it. beforeData
// runs just before that last step, edit on the bootstrap config's spec before it is made.
func boot(t *testing.T, out *render.Output, name string, beforeData func(*clusterv1.Machine), edit func(spec map[string]any)) *worker {
	t.Helper()
	ctx := t.Context()
	md := out.MachineDeployment
	var gvk schema.GroupVersionKind
	switch out.Bootstrap.(type) {
	case *talos.TalosConfigTemplate:
		gvk = simulator.TalosConfigGVK
	case *kairos.KairosConfigTemplate:
		gvk = simulator.KairosConfigGVK
	}
	config := clone(t, out.Bootstrap, gvk, name)
	if edit != nil {
		spec, _, _ := unstructured.NestedMap(config.Object, "spec")
		edit(spec)
		if err := unstructured.SetNestedMap(config.Object, spec, "spec"); err != nil {
			t.Fatal(err)
		}
	}
	vm := clone(t, out.Infrastructure, simulator.KubevirtMachineGVK, name)

	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: md.Spec.Template.Labels}, Spec: *md.Spec.Template.Spec.DeepCopy()}
	m.Spec.Bootstrap.ConfigRef.Kind = gvk.Kind
	m.Spec.Bootstrap.ConfigRef.Name = name
	m.Spec.InfrastructureRef.Kind = simulator.KubevirtMachineGVK.Kind
	m.Spec.InfrastructureRef.Name = name
	for _, obj := range []client.Object{config, vm, m} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	owner := *metav1.NewControllerRef(m, clusterv1.GroupVersion.WithKind("Machine"))
	for _, obj := range []*unstructured.Unstructured{config, vm} {
		patch(t, obj, func() { obj.SetOwnerReferences([]metav1.OwnerReference{owner}) })
	}

	w := &worker{machine: m, md: md}
	w.config = eventually(t, gvk.Kind+" reports its data Secret", func() (*unstructured.Unstructured, bool) {
		o := get(t, gvk, ns, name)
		s, _, _ := unstructured.NestedString(o.Object, "status", "dataSecretName")
		return o, s == name
	})
	if ready, _, _ := unstructured.NestedBool(get(t, simulator.KubevirtMachineGVK, ns, name).Object, "status", "ready"); ready {
		t.Error("the KubevirtMachine is ready before its Machine has bootstrap data")
	}
	if beforeData != nil {
		beforeData(m)
	}
	patch(t, m, func() { m.Spec.Bootstrap.DataSecretName = ptr.To(name) })

	w.vm = eventually(t, "KubevirtMachine ready", func() (*unstructured.Unstructured, bool) {
		o := get(t, simulator.KubevirtMachineGVK, ns, name)
		ready, _, _ := unstructured.NestedBool(o.Object, "status", "ready")
		return o, ready
	})
	if id, _, _ := unstructured.NestedString(w.vm.Object, "spec", "providerID"); id != "kubevirt://"+name {
		t.Errorf("providerID %q, want kubevirt://%s", id, name)
	}
	return w
}

func (w *worker) dataSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: w.config.GetName()}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkNode holds what every simulated Node must be: exactly the labels and taints the
// bootstrap data asks for (plus the kubelet's own labels), the Machine's version, kwok's
// annotation, Ready, the VM's size less the kubelet's reservations (the allocatable the
// autoscaler's annotations promise), and, soon, the infrastructure machine's providerID.
func checkNode(t *testing.T, w *worker, node *corev1.Node, labels map[string]string, taints []corev1.Taint) {
	t.Helper()
	want := map[string]string{
		"kubernetes.io/hostname": node.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
	}
	for k, v := range labels {
		want[k] = v
	}
	same(t, "Node labels", node.Labels, want)
	// The API server's TaintNodesByCondition admission adds not-ready to every new Node;
	// kube-controller-manager's node lifecycle (not run here) removes it once the Node is
	// Ready.
	taints = append(slices.Clone(taints), corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	same(t, "Node taints", node.Spec.Taints, taints)
	if got := node.Status.NodeInfo.KubeletVersion; got != w.machine.Spec.Version {
		t.Errorf("kubeletVersion %q, want the Machine's %q", got, w.machine.Spec.Version)
	}
	// The kubelet registers no providerID (checkJoin holds it); the simulated CAPK
	// patches the infrastructure machine's on.
	waitLinked(t, w)
	if node.Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Errorf("Node annotations %v: no kwok.x-k8s.io/node=fake", node.Annotations)
	}
	if i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady }); i < 0 || node.Status.Conditions[i].Status != corev1.ConditionTrue {
		t.Errorf("Node is not Ready: %v", node.Status.Conditions)
	}
	// Cluster API's NodeHealthy stays unknown until these are reported.
	for _, pressure := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == pressure }); i < 0 || node.Status.Conditions[i].Status != corev1.ConditionFalse {
			t.Errorf("Node reports no %s=False: %v", pressure, node.Status.Conditions)
		}
	}
	a := w.md.Annotations
	for name, annotation := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: a[names.AnnotationCapacityCPU], corev1.ResourceMemory: a[names.AnnotationCapacityMemory], corev1.ResourcePods: a[names.AnnotationCapacityMaxPods],
	} {
		got := node.Status.Allocatable[name]
		if got.Cmp(resource.MustParse(annotation)) != 0 {
			t.Errorf("Node allocatable %s = %s, the autoscaler annotation says %s", name, got.String(), annotation)
		}
	}
	recorded := eventually(t, "the KubevirtMachine records its Node", func() (string, bool) {
		n := get(t, simulator.KubevirtMachineGVK, ns, w.vm.GetName()).GetAnnotations()[simulator.AnnotationSimulatedNode]
		return n, n != ""
	})
	if recorded != node.Name {
		t.Errorf("the KubevirtMachine records Node %q, want %q", recorded, node.Name)
	}
}

func checkClusterSecret(t *testing.T, s *corev1.Secret, ownerKind, ownerName string) {
	t.Helper()
	if s.Type != clusterv1.ClusterSecretType || s.Labels[clusterv1.ClusterNameLabel] != cluster {
		t.Errorf("Secret %s: type %q, labels %v", s.Name, s.Type, s.Labels)
	}
	if c := metav1.GetControllerOf(s); c == nil || c.Kind != ownerKind || c.Name != ownerName {
		t.Errorf("Secret %s is controlled by %v, want %s %s", s.Name, c, ownerKind, ownerName)
	}
}

// Render inputs: a Talos pool at a location with a region and zone, tenant labels, taints
// and a role (which Cluster API syncs, not the kubelet), joining the tenant with its CA,
// endpoint and the Talos pools' token, as the operator renders it from <cluster>-talos;
// a Kairos pool on a class with its own image (another release than the control
// plane's), whose discovery the provider writes.

func talosInput(t *testing.T) *render.Input {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "internal", "render", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	host, port := tenantEndpoint(t)
	cat := catalog.Default()
	rel, ok := cat.Lookup("v1.35")
	if !ok {
		t.Fatal("catalog has no v1.35")
	}
	return &render.Input{
		Namespace: ns, Name: "workers",
		Spec: v1.NodeGroupSpec{
			ClusterName: cluster, NodeGroupClassName: "talos", LocationName: "fsn1", MinReplicas: 1, MaxReplicas: 3,
			Resources:        &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
			EphemeralStorage: resource.MustParse("20Gi"),
			Roles:            []string{"worker"},
			Labels:           map[string]v1.LabelValue{"example.com/team": "payments", "tier": "backend"},
			Taints:           []v1.Taint{{Key: "example.com/dedicated", Value: "payments", Effect: "NoSchedule"}, {Key: "spot", Effect: "PreferNoSchedule"}},
		},
		ClassName: "talos", Class: v1.NodeGroupClassSpec{OS: v1.OSTalos},
		LocationName: "fsn1",
		Location: v1.LocationSpec{Region: "eu-central", Zone: "fsn1-a", Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt,
			KubeVirt: &v1.KubeVirtProvider{EvictionStrategy: "External"}}},
		Cluster: render.Cluster{
			Name: cluster, ControlPlaneHost: host, ControlPlanePort: port,
			ServiceCIDRs: []string{"10.95.0.0/16"}, PodCIDRs: []string{"10.244.0.0/16"}, DNSDomain: "cluster.local",
			TenantDNS:     "10.95.0.10",
			APIServer:     render.ServiceAddress{Name: cluster, Namespace: ns, ClusterIP: "10.96.12.34"},
			ManagementDNS: "10.96.0.10", ManagementDNSDomain: "cluster.local",
		},
		Release: rel, Factory: cat.TalosFactory, KubernetesVersion: rel.Kubernetes,
		Machine: render.MachineSize{MilliCPU: 2000, MemoryBytes: 4 << 30},
		TalosSecrets: &render.TalosSecrets{
			MachineToken: "w7ysn3.2ti4qmz2k6ajb9nt", MachineCACert: read("machine-ca.crt"), ClusterCACert: string(tenantCluster.CACert),
			ClusterID: "Nhx0p0XcSPVpeFbSiGrMbT6cVTuqc1UwIuJ0jZ_6rzI=", ClusterSecret: "bx4j3zGGpZ1lx1D0dw4XzVLHzJ8lwnhc0eMdQ+k6sF0=",
			BootstrapToken: talosToken,
		},
	}
}

func kairosInput(t *testing.T) *render.Input {
	in := talosInput(t)
	in.ClassName, in.Spec.NodeGroupClassName = "kairos-own", "kairos-own"
	in.Class = v1.NodeGroupClassSpec{OS: v1.OSKairos,
		Image:  &v1.ClassImage{Reference: "registry.example.com/platform/kairos@sha256:" + strings.Repeat("cd", 32), KubernetesVersion: "v1.35.2"},
		Kairos: &v1.KairosClassSpec{SSHAuthorizedKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGl8 platform@example.com"},
	}
	in.KubernetesVersion = "v1.35.2"
	in.TalosSecrets = nil
	in.KairosUserSecret = cluster + "-kairos-user"
	in.LocationName, in.Spec.LocationName = "in-cluster", "in-cluster"
	in.Location = v1.LocationSpec{Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{EvictionStrategy: "External"}}}
	in.Spec.Resources = &v1.MachineResources{CPU: resource.MustParse("4"), Memory: resource.MustParse("8Gi")}
	in.Machine = render.MachineSize{MilliCPU: 4000, MemoryBytes: 8 << 30}
	in.Spec.Labels = map[string]v1.LabelValue{"tier": "web"}
	in.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "web", Effect: "NoSchedule"}}
	return in
}

func renderPool(t *testing.T, in *render.Input) *render.Output {
	t.Helper()
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// clone is what Cluster API makes of a template for one Machine.
func clone(t *testing.T, tmpl any, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(u, "spec", "template", "spec")
	obj := newObject(gvk, ns, name)
	obj.SetLabels(map[string]string{clusterv1.ClusterNameLabel: cluster})
	if err := unstructured.SetNestedMap(obj.Object, spec, "spec"); err != nil {
		t.Fatal(err)
	}
	return obj
}

func newObject(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

func get(t *testing.T, gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	obj := newObject(gvk, namespace, name)
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// patch merge-patches obj with what change does to it.
func patch(t *testing.T, obj client.Object, change func()) {
	t.Helper()
	before := obj.DeepCopyObject().(client.Object)
	change()
	if err := env.Client.Patch(t.Context(), obj, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// touch sends an update event for each object, changing nothing the simulator reads.
func touch(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		stamp := fmt.Sprint(time.Now().UnixNano())
		p := fmt.Appendf(nil, `{"metadata":{"annotations":{"test.nodegroup.io/touched":%q}}}`, stamp)
		if err := env.Client.Patch(t.Context(), obj, client.RawPatch("application/merge-patch+json", p)); err != nil {
			t.Fatal(err)
		}
	}
}

// waitNode waits for the Node the kubelet registers in the tenant, with its status.
func waitNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	return eventually(t, "Node "+name, func() (*corev1.Node, bool) {
		n := &corev1.Node{}
		err := tenantCluster.Client.Get(t.Context(), client.ObjectKey{Name: name}, n)
		return n, err == nil && n.Status.NodeInfo.KubeletVersion != ""
	})
}

func noNode(t *testing.T, name string) {
	t.Helper()
	if err := tenantCluster.Client.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node %s: %v, want it not to exist", name, err)
	}
}

// eventually polls f until it reports done, failing the test after 30 seconds.
func eventually[T any](t *testing.T, what string, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, done := f()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reconcileMark is the number of reconciles each controller has finished so far.
func reconcileMark() map[string]float64 {
	out := map[string]float64{}
	families, _ := ctrlmetrics.Registry.Gather()
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// quiesce waits until each named controller has reconciled since mark and the simulator
// has then written nothing for half a second: what it does in response is done.
func quiesce(t *testing.T, mark map[string]float64, controllers ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("reconciles of %v", controllers), func() (any, bool) {
		now := reconcileMark()
		for _, c := range controllers {
			if now[c] <= mark[c] {
				return nil, false
			}
		}
		return nil, true
	})
	last, since := writes.Load(), time.Now()
	eventually(t, "the simulator to stop writing", func() (any, bool) {
		if n := writes.Load(); n != last {
			last, since = n, time.Now()
		}
		return nil, time.Since(since) > 500*time.Millisecond
	})
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %#v\n want %#v", what, got, want)
	}
}

func hasCondition(status map[string]any, typ string) bool {
	conditions, _, _ := unstructured.NestedSlice(status, "conditions")
	for _, c := range conditions {
		if c, _ := c.(map[string]any); c["type"] == typ && c["status"] == "True" {
			return true
		}
	}
	return false
}

// tenantEndpoint is the host and port of the tenant's API server.
func tenantEndpoint(t *testing.T) (string, int32) {
	t.Helper()
	u, err := url.Parse(tenantCluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.ParseInt(u.Port(), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), int32(port)
}

// waitLinked waits until the simulated CAPK has patched the infrastructure machine's
// providerID onto the tenant's Node, and returns that Node.
func waitLinked(t *testing.T, w *worker) *corev1.Node {
	t.Helper()
	want, _, _ := unstructured.NestedString(w.vm.Object, "spec", "providerID")
	return eventually(t, "the Node of "+w.vm.GetName()+" has providerID "+want, func() (*corev1.Node, bool) {
		name := get(t, simulator.KubevirtMachineGVK, ns, w.vm.GetName()).GetAnnotations()[simulator.AnnotationSimulatedNode]
		if name == "" {
			return nil, false // not registered yet
		}
		n := &corev1.Node{}
		err := tenantCluster.Client.Get(t.Context(), client.ObjectKey{Name: name}, n)
		return n, err == nil && n.Spec.ProviderID == want
	})
}

// checkJoin holds how node joined: its kubelet's CSR, made as the bootstrap token, was
// approved and signed by the tenant CA for system:node:<node>; the kubelet created the
// Node with that certificate and without a providerID; the tenant's admin, as the
// simulated CAPK, patched the providerID on.
func checkJoin(t *testing.T, node, token string) {
	t.Helper()
	csr := nodeCSR(t, node)
	if csr == nil {
		t.Fatalf("the tenant has no CSR for system:node:%s", node)
	}
	tokenID, _, _ := strings.Cut(token, ".")
	if want := bootstrapapi.BootstrapUserPrefix + tokenID; csr.Spec.Username != want || !slices.Contains(csr.Spec.Groups, nodeBootstrapGroup) {
		t.Errorf("the CSR %s was made by %s %v, want %s in %s", csr.Name, csr.Spec.Username, csr.Spec.Groups, want, nodeBootstrapGroup)
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		t.Errorf("the CSR %s asks signer %s", csr.Name, csr.Spec.SignerName)
	}
	approved := slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue
	})
	if !approved {
		t.Errorf("the CSR %s is not approved: %v", csr.Name, csr.Status.Conditions)
	}
	block, _ := pem.Decode(csr.Status.Certificate)
	if block == nil {
		t.Fatalf("the CSR %s has no certificate", csr.Name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(tenantCluster.CACert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the kubelet's certificate is not a client certificate of the tenant CA: %v", err)
	}
	if cert.Subject.CommonName != "system:node:"+node || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("the kubelet's certificate is for %s %v", cert.Subject.CommonName, cert.Subject.Organization)
	}

	created := nodeWrite(t, node, "create", "system:node:"+node)
	if created == nil || created.ResponseStatus.Code != 201 {
		t.Fatalf("the tenant's audit log has no create of Node %s by system:node:%s: %+v", node, node, created)
	}
	if !slices.Contains(created.User.Groups, "system:nodes") || !strings.HasPrefix(created.UserAgent, "kubelet/") {
		t.Errorf("Node %s created by %v with agent %q", node, created.User.Groups, created.UserAgent)
	}
	var sent corev1.Node
	if err := json.Unmarshal(created.RequestObject, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Spec.ProviderID != "" {
		t.Errorf("the kubelet registered Node %s with providerID %q", node, sent.Spec.ProviderID)
	}
	linked := false
	for _, e := range nodeWrites(t, node) {
		if e.Verb == "patch" && e.User.Username == "kubernetes-admin" && strings.Contains(e.UserAgent, "cluster-api-provider-kubevirt") &&
			e.ResponseStatus.Code == 200 && bytes.Contains(e.RequestObject, []byte(`"providerID"`)) {
			linked = true
		}
	}
	if !linked {
		t.Errorf("the audit log has no providerID patch of Node %s by the simulated CAPK", node)
	}
}

// nodeCSR is the tenant's CSR for system:node:<node>, nil when there is none.
func nodeCSR(t *testing.T, node string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var list certificatesv1.CertificateSigningRequestList
	if err := tenantCluster.Client.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	for i, csr := range list.Items {
		block, _ := pem.Decode(csr.Spec.Request)
		if block == nil {
			continue
		}
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err == nil && req.Subject.CommonName == "system:node:"+node {
			return &list.Items[i]
		}
	}
	return nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
}

// nodeWrites are the writes to Node name (not its status) in the tenant's audit log.
func nodeWrites(t *testing.T, name string) []auditEvent {
	t.Helper()
	f, err := os.Open(tenantCluster.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("the tenant's audit log: %v", err)
		}
		if e.ObjectRef.Resource == "nodes" && e.ObjectRef.Subresource == "" && e.ObjectRef.Name == name {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// nodeWrite is the last verb on Node name by user in the tenant's audit log, nil if none.
func nodeWrite(t *testing.T, name, verb, user string) *auditEvent {
	t.Helper()
	var last *auditEvent
	for _, e := range nodeWrites(t, name) {
		if e.Verb == verb && e.User.Username == user {
			last = &e
		}
	}
	return last
}

// caPin is kubeadm's pin of a CA certificate: sha256 of its Subject Public Key Info.
func caPin(t *testing.T, caPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatal("no PEM CA")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// waitEvent waits for an event of reason on the Machine and returns it.
func waitEvent(t *testing.T, m *clusterv1.Machine, reason string) *eventsv1.Event {
	t.Helper()
	return eventually(t, "a "+reason+" event on the Machine "+m.Name, func() (*eventsv1.Event, bool) {
		var list eventsv1.EventList
		if err := env.Client.List(t.Context(), &list, client.InNamespace(m.Namespace)); err != nil {
			t.Fatal(err)
		}
		for i, e := range list.Items {
			if e.Regarding.Name == m.Name && e.Reason == reason {
				return &list.Items[i], true
			}
		}
		return nil, false
	})
}

// deleteMachine deletes a worker's Machine and its clones, as Cluster API does once the
// Machine is gone.
func deleteMachine(t *testing.T, w *worker) {
	for _, obj := range []client.Object{w.machine, w.vm, w.config} {
		if err := env.Client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
}
