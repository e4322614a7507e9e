package simulator

import (
	"cmp"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// kairosTokenTTL is the life of a bootstrap token the simulated Kairos provider mints,
// CABPK's default; it is refreshed while its Machine has not joined.
const kairosTokenTTL = 15 * time.Minute

// kairosSpec is the part of a KairosConfig spec a kubeadm worker's cloud-config carries.
type kairosSpec struct {
	Role         string           `json:"role"`
	Distribution string           `json:"distribution"`
	Hostname     string           `json:"hostname"`
	UserName     string           `json:"userName"`
	UserGroups   []string         `json:"userGroups"`
	GithubUser   string           `json:"githubUser"`
	SSHPublicKey string           `json:"sshPublicKey"`
	DNSServers   []string         `json:"dnsServers"`
	Files        []map[string]any `json:"files"`
	Kubeadm      struct {
		JoinConfiguration map[string]any `json:"joinConfiguration"`
	} `json:"kubeadm"`
}

// kairosData is the Kairos provider's kubeadm worker cloud-config, reduced to what a
// worker's OS and kubelet read (see the package documentation): the rendered join with
// what the provider owns over it, the node name, the uninitialized taint and the
// discovery, with a bootstrap token it mints in the workload cluster.
func (s *sim) kairosData(ctx context.Context, cfg *unstructured.Unstructured, m *clusterv1.Machine) (*bootstrapResult, error) {
	raw, _, _ := unstructured.NestedMap(cfg.Object, "spec")
	var spec kairosSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, err
	}
	switch {
	case spec.Distribution != "kubeadm":
		return nil, fmt.Errorf("distribution %q is not simulated (only kubeadm)", spec.Distribution)
	case spec.Role != "worker":
		return nil, fmt.Errorf("role %q: kubeadm joins workers only", spec.Role)
	case m.Spec.Version == "":
		return nil, fmt.Errorf("kubeadm requires Machine.spec.version")
	}
	discovery, err := s.kairosDiscovery(ctx, cfg, m)
	if err != nil {
		return nil, err
	}

	// What the provider sets in the join: the node name and the uninitialized taint.
	join := map[string]any{}
	if spec.Kubeadm.JoinConfiguration != nil {
		join = runtime.DeepCopyJSON(spec.Kubeadm.JoinConfiguration)
	}
	reg, _ := join["nodeRegistration"].(map[string]any)
	if reg == nil {
		reg = map[string]any{}
	}
	if name, _ := reg["name"].(string); name == "" {
		reg["name"] = m.Name
	}
	taints, _ := reg["taints"].([]any)
	uninitialized := false
	for _, t := range taints {
		if t, _ := t.(map[string]any); t["key"] == clusterv1.NodeUninitializedTaint.Key {
			uninitialized = true
		}
	}
	if !uninitialized {
		taints = append(taints, map[string]any{"key": clusterv1.NodeUninitializedTaint.Key, "effect": string(clusterv1.NodeUninitializedTaint.Effect)})
	}
	reg["taints"] = taints
	join["nodeRegistration"] = reg
	// The discovery fields the provider owns, over whatever else discovery holds.
	disc, _ := join["discovery"].(map[string]any)
	if disc == nil {
		disc = map[string]any{}
	}
	bt, _ := disc["bootstrapToken"].(map[string]any)
	if bt == nil {
		bt = map[string]any{}
	}
	bt["token"], bt["apiServerEndpoint"], bt["caCertHashes"] = discovery.token, discovery.apiServerEndpoint, discovery.caCertHashes
	disc["bootstrapToken"] = bt
	join["discovery"] = disc
	kubeadm, err := yaml.Marshal(map[string]any{
		"clusterConfiguration": map[string]any{"kubernetesVersion": m.Spec.Version},
		"joinConfiguration":    join,
	})
	if err != nil {
		return nil, err
	}

	user := map[string]any{"name": cmp.Or(spec.UserName, "kairos"), "groups": spec.UserGroups}
	if len(spec.UserGroups) == 0 {
		user["groups"] = []string{"admin"}
	}
	var keys []string
	if spec.GithubUser != "" {
		keys = append(keys, "github:"+spec.GithubUser)
	}
	if spec.SSHPublicKey != "" {
		keys = append(keys, spec.SSHPublicKey)
	}
	if keys != nil {
		user["ssh_authorized_keys"] = keys
	}
	doc := map[string]any{
		"hostname": cmp.Or(spec.Hostname, m.Name),
		"users":    []any{user},
		"cluster":  map[string]any{"role": "worker", "config": string(kubeadm)},
	}
	if len(spec.DNSServers) > 0 {
		doc["stages"] = map[string]any{"boot": []any{map[string]any{
			"name": "Configure DNS resolvers for early boot",
			"dns":  map[string]any{"nameservers": spec.DNSServers, "path": "/etc/resolv.conf"},
		}}}
	}
	if len(spec.Files) > 0 {
		doc["write_files"] = spec.Files
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	res := &bootstrapResult{
		value:  append([]byte("#cloud-config\n"), out...),
		status: map[string]any{"status.bootstrapTokenID": discovery.tokenID},
	}
	if !m.Status.NodeRef.IsDefined() {
		res.recheck = kairosTokenTTL / 3 // to refresh the token while the Machine joins
	}
	return res, nil
}

// kairosJoin is the discovery the Kairos provider writes for a kubeadm worker.
type kairosJoin struct {
	tokenID, token, apiServerEndpoint string
	caCertHashes                      []string
}

// kairosDiscovery is what the provider reads and mints for a join, as CABPK does it
// (reconcileDiscovery): the Cluster's control-plane endpoint, the pins of the cluster CA
// (<cluster>-ca), and a bootstrap token in the workload cluster, reached through
// <cluster>-kubeconfig once that Secret is controlled by the Cluster's control plane.
func (s *sim) kairosDiscovery(ctx context.Context, cfg *unstructured.Unstructured, m *clusterv1.Machine) (*kairosJoin, error) {
	c := &clusterv1.Cluster{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: the Cluster %s", errNotReady, m.Spec.ClusterName)
		}
		return nil, err
	}
	if !c.Spec.ControlPlaneEndpoint.IsValid() {
		return nil, fmt.Errorf("%w: the Cluster's control-plane endpoint", errNotReady)
	}
	kubeconfig, err := s.clusterSecret(ctx, c, kubeconfigSuffix, dataKey)
	if err != nil {
		return nil, err
	}
	ca, err := s.clusterSecret(ctx, c, caSuffix, corev1.TLSCertKey)
	if err != nil {
		return nil, err
	}
	hashes, err := caCertHashes(ca)
	if err != nil {
		return nil, fmt.Errorf("the cluster CA %s%s: %w", c.Name, caSuffix, err)
	}
	workload, err := s.remotes.forKubeconfig(kubeconfig, agentKairos)
	if err != nil {
		return nil, err
	}
	token, err := s.kairosToken(ctx, workload, cfg, m.Status.NodeRef.IsDefined())
	if err != nil {
		return nil, fmt.Errorf("%w: a bootstrap token in the workload cluster: %v", errNotReady, err)
	}
	return &kairosJoin{
		tokenID: bootstraputil.BootstrapTokenRegexp.FindStringSubmatch(token)[1], token: token,
		apiServerEndpoint: c.Spec.ControlPlaneEndpoint.String(), caCertHashes: hashes,
	}, nil
}

// clusterSecret reads key of a Cluster's <cluster><suffix> Secret, once it is controlled
// by the Cluster's control plane (the provider checks the kubeconfig it trusts is the
// control plane's).
func (s *sim) clusterSecret(ctx context.Context, c *clusterv1.Cluster, suffix, key string) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + suffix}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: the Secret %s%s", errNotReady, c.Name, suffix)
		}
		return nil, err
	}
	ref := c.Spec.ControlPlaneRef
	owner := metav1.GetControllerOf(secret)
	if owner == nil || owner.Kind != ref.Kind || owner.Name != ref.Name || groupOf(owner.APIVersion) != ref.APIGroup {
		return nil, fmt.Errorf("%w: the Secret %s controlled by the control plane %s %s", errNotReady, secret.Name, ref.Kind, ref.Name)
	}
	if len(secret.Data[key]) == 0 {
		return nil, fmt.Errorf("the Secret %s has no %q key", secret.Name, key)
	}
	return secret.Data[key], nil
}

func groupOf(apiVersion string) string {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.Group
}

// kairosToken is the bootstrap token of a KairosConfig's join: the one its data Secret
// already carries while the workload cluster still has it (its expiry pushed back while
// the Machine has not joined, as CABPK refreshes its tokens), else a new one. The secret
// half lives only in the data Secret.
func (s *sim) kairosToken(ctx context.Context, workload kubernetes.Interface, cfg *unstructured.Unstructured, joined bool) (string, error) {
	secrets := workload.CoreV1().Secrets(metav1.NamespaceSystem)
	if previous := s.dataSecretToken(ctx, cfg); previous != "" {
		id := bootstraputil.BootstrapTokenRegexp.FindStringSubmatch(previous)[1]
		secret, err := secrets.Get(ctx, bootstraputil.BootstrapTokenSecretName(id), metav1.GetOptions{})
		switch {
		case err == nil:
			expiry, err := time.Parse(time.RFC3339, string(secret.Data[bootstrapapi.BootstrapTokenExpirationKey]))
			if !joined && (err != nil || time.Until(expiry) < kairosTokenTTL/2) {
				secret.Data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(time.Now().UTC().Add(kairosTokenTTL).Format(time.RFC3339))
				if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
					return "", err
				}
			}
			return previous, nil
		case apierrors.IsNotFound(err) && joined:
			return previous, nil // it joined with it; nothing needs a new one
		case !apierrors.IsNotFound(err):
			return "", err
		}
	}
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", err
	}
	parts := bootstraputil.BootstrapTokenRegexp.FindStringSubmatch(token)
	_, err = secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(parts[1])},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:               []byte(parts[1]),
			bootstrapapi.BootstrapTokenSecretKey:           []byte(parts[2]),
			bootstrapapi.BootstrapTokenExpirationKey:       []byte(time.Now().UTC().Add(kairosTokenTTL).Format(time.RFC3339)),
			bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
			bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(nodeBootstrapTokenAuthGroup),
			bootstrapapi.BootstrapTokenDescriptionKey: fmt.Appendf(nil, "token generated by the simulated Kairos bootstrap provider for KairosConfig %s/%s",
				cfg.GetNamespace(), cfg.GetName()),
		},
	}, metav1.CreateOptions{})
	return token, err
}

// dataSecretToken is the discovery token in the config's data Secret, if any.
func (s *sim) dataSecretToken(ctx context.Context, cfg *unstructured.Unstructured) string {
	secret := &corev1.Secret{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: cfg.GetNamespace(), Name: cfg.GetName()}, secret); err != nil {
		return ""
	}
	var cc kairosCloudConfig
	var kc kubeadmConfig
	if yaml.Unmarshal(secret.Data[dataKey], &cc) != nil || yaml.Unmarshal([]byte(cc.Cluster.Config), &kc) != nil {
		return ""
	}
	bt := kc.JoinConfiguration.Discovery.BootstrapToken
	if bt == nil || !bootstraputil.IsValidBootstrapToken(bt.Token) {
		return ""
	}
	return bt.Token
}
