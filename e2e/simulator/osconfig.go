// The worker's OS reading its bootstrap data: a Talos machine config or a Kairos
// cloud-config with kubeadm's join configuration, as the kubelet it sets up will see it.

package simulator

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"
)

// readBootstrap reads the bootstrap data as the Machine's OS would, by the kind of its
// bootstrap config. vmName is the VM's hostname.
func readBootstrap(m *clusterv1.Machine, vmName string, data []byte) (*kubelet, error) {
	var k *kubelet
	var err error
	switch ref := m.Spec.Bootstrap.ConfigRef; {
	case ref.APIGroup == TalosConfigGVK.Group && ref.Kind == TalosConfigGVK.Kind:
		k, err = readTalos(data, vmName)
	case ref.APIGroup == KairosConfigGVK.Group && ref.Kind == KairosConfigGVK.Kind:
		k, err = readKairos(data, vmName)
	default:
		return nil, fmt.Errorf("bootstrap config kind %s is not simulated", ref.GroupKind())
	}
	if err != nil {
		return nil, err
	}
	k.version = cmp.Or(k.version, m.Spec.Version)
	return k, nil
}

// talosMode is the runtime mode of a Talos VM under CAPK (the cloud images, no install).
type talosMode struct{}

func (talosMode) String() string        { return "cloud" }
func (talosMode) RequiresInstall() bool { return false }
func (talosMode) InContainer() bool     { return false }

// readTalos loads a Talos machine config as a Talos node does: unknown fields and
// validation errors mean the node never applies it.
func readTalos(data []byte, vmName string) (*kubelet, error) {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("Talos refuses the machine config: %w", err)
	}
	if _, err := cfg.Validate(talosMode{}); err != nil {
		return nil, fmt.Errorf("Talos refuses the machine config: %w", err)
	}
	mc := cfg.Machine()
	kl := mc.Kubelet()
	if kl.SkipNodeRegistration() {
		return nil, fmt.Errorf("the Talos kubelet is told not to register a Node")
	}
	bootstrap, err := talosJoin(cfg.Cluster())
	if err != nil {
		return nil, err
	}
	k := &kubelet{
		nodeName: cmp.Or(mc.Network().Hostname(), vmName), osImage: "Talos (simulated)", bootstrap: bootstrap,
		flags: map[string][]string{}, osLabels: mc.NodeLabels(), annotations: mc.NodeAnnotations(),
	}
	for name, v := range kl.ExtraArgs() {
		k.flags[name] = []string{v}
	}
	// The kubelet's version is the tag of the image Talos runs it from.
	if image := kl.Image(); !strings.Contains(image, "@") {
		if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
			k.version = image[i+1:]
		}
	}
	if err := remarshal(kl.ExtraConfig(), &k.config); err != nil {
		return nil, fmt.Errorf("Talos kubelet extraConfig: %w", err)
	}
	for _, key := range slices.Sorted(maps.Keys(mc.NodeTaints())) {
		value, effect, found := strings.Cut(mc.NodeTaints()[key], ":")
		if !found {
			value, effect = "", value
		}
		k.osTaints = append(k.osTaints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	return k, nil
}

// talosJoin is what a Talos worker's kubelet joins with: the bootstrap token and the
// Kubernetes CA of cluster.token and cluster.ca (with cluster.acceptedCAs), and the API
// server of cluster.controlPlane.endpoint.
func talosJoin(c talosconfig.ClusterConfig) (*joinCredentials, error) {
	token := c.Token()
	switch {
	case token == nil || token.ID() == "" || token.Secret() == "":
		return nil, errors.New("Talos: the machine config has no cluster.token")
	case c.Endpoint() == nil:
		return nil, errors.New("Talos: the machine config has no cluster.controlPlane.endpoint")
	case c.IssuingCA() == nil || len(c.IssuingCA().Crt) == 0:
		return nil, errors.New("Talos: the machine config has no cluster.ca.crt")
	}
	ca := slices.Clone(c.IssuingCA().Crt)
	for _, accepted := range c.AcceptedCAs() {
		ca = append(ca, accepted.Crt...)
	}
	return &joinCredentials{server: c.Endpoint().String(), caPEM: ca, token: token.ID() + "." + token.Secret()}, nil
}

// kairosCloudConfig is the part of the cloud-config a kubeadm worker reads.
type kairosCloudConfig struct {
	Hostname   string      `json:"hostname"`
	WriteFiles []cloudFile `json:"write_files"`
	Cluster    struct {
		Config string `json:"config"`
	} `json:"cluster"`
}

type cloudFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// kubeadmConfig is the part of the kubeadm configuration that joins and shapes the Node.
type kubeadmConfig struct {
	JoinConfiguration struct {
		Discovery struct {
			BootstrapToken *struct {
				Token             string   `json:"token"`
				APIServerEndpoint string   `json:"apiServerEndpoint"`
				CACertHashes      []string `json:"caCertHashes"`
			} `json:"bootstrapToken"`
		} `json:"discovery"`
		NodeRegistration struct {
			Name             string `json:"name"`
			KubeletExtraArgs []struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"kubeletExtraArgs"`
			Taints []corev1.Taint `json:"taints"`
		} `json:"nodeRegistration"`
		Patches *struct {
			Directory string `json:"directory"`
		} `json:"patches"`
	} `json:"joinConfiguration"`
}

// readKairos reads a kubeadm worker's cloud-config as kubeadm join sets up the kubelet:
// nodeRegistration.taints become --register-with-taints, kubeletExtraArgs are flags
// (replacing kubeadm's own of the same name), and kubeletconfiguration patches in the
// patches directory are merged into the kubelet configuration in file name order.
func readKairos(data []byte, vmName string) (*kubelet, error) {
	var cc kairosCloudConfig
	if err := yaml.Unmarshal(data, &cc); err != nil {
		return nil, fmt.Errorf("Kairos cloud-config: %w", err)
	}
	var kc kubeadmConfig
	if err := yaml.Unmarshal([]byte(cc.Cluster.Config), &kc); err != nil {
		return nil, fmt.Errorf("kubeadm configuration: %w", err)
	}
	reg := kc.JoinConfiguration.NodeRegistration
	k := &kubelet{nodeName: cmp.Or(reg.Name, cc.Hostname, vmName), osImage: "Kairos (simulated)", flags: map[string][]string{}}
	if bt := kc.JoinConfiguration.Discovery.BootstrapToken; bt != nil {
		k.discovery = &tokenDiscovery{token: bt.Token, apiServerEndpoint: bt.APIServerEndpoint, caCertHashes: bt.CACertHashes}
	}
	if len(reg.Taints) > 0 {
		k.flags["register-with-taints"] = []string{formatTaints(reg.Taints)}
	}
	extra := map[string][]string{}
	for _, a := range reg.KubeletExtraArgs {
		extra[a.Name] = append(extra[a.Name], a.Value)
	}
	maps.Copy(k.flags, extra)
	if p := kc.JoinConfiguration.Patches; p != nil {
		files := slices.Clone(cc.WriteFiles)
		slices.SortFunc(files, func(a, b cloudFile) int { return strings.Compare(a.Path, b.Path) })
		for _, f := range files {
			if path.Dir(f.Path) == path.Clean(p.Directory) && strings.HasPrefix(path.Base(f.Path), "kubeletconfiguration") {
				// Maps merge key by key, lists are replaced: a strategic merge of these fields.
				if err := yaml.Unmarshal([]byte(f.Content), &k.config); err != nil {
					return nil, fmt.Errorf("kubelet patch %s: %w", f.Path, err)
				}
			}
		}
	}
	return k, nil
}

// remarshal converts between JSON-shaped values through JSON.
func remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
