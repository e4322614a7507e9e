package render

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
)

// Kairos worker files. Everything the worker needs beyond the provider's own join is
// written as data through files[]: no command, no script, no templated shell, so no
// tenant value is ever executed.
const (
	kairosDistribution = "kubeadm"
	kairosRole         = "worker"
	kairosUserName     = "kairos"
	// kairosHostsFile maps the tenant API server's Service names to its ClusterIP:
	// kubeadm takes the server address from the cluster-info ConfigMap, which names the
	// Service, and it must resolve at first boot, before any DNS of the tenant exists.
	kairosHostsFile = "/etc/hosts"
	// kairosResolvedDropIn points systemd-resolved at the management cluster's DNS with
	// the tenant namespace's search domains.
	kairosResolvedDropIn = "/etc/systemd/resolved.conf.d/10-nodegroup.conf"
	// kairosPatchesDir is the kubeadm patches directory. The provider adds its providerID
	// patch for the kubelet; ours carries the reservations, under a name of its own
	// ("0" suffix: applied first, so the provider's patch is applied over it and neither
	// file replaces the other).
	kairosPatchesDir    = "/etc/kubernetes/patches"
	kairosKubeletPatch  = kairosPatchesDir + "/kubeletconfiguration0+strategic.yaml"
	kairosFileOwner     = "root:root"
	kairosPasswordKey   = "password"
	kairosMaxFileLength = 32 * 1024
)

// kairosConfigTemplate renders the bootstrap template of a Kairos pool: a kubeadm worker
// join through the Kairos bootstrap provider.
func kairosConfigTemplate(in *Input) (*kairos.KairosConfigTemplate, error) {
	var errs []error
	for _, field := range kairosRefusedFields(in) {
		errs = append(errs, fmt.Errorf("spec.%s is Talos-only and class %q is a Kairos class: remove it or use a Talos class", field, in.ClassName))
	}

	spec := kairos.KairosConfigSpec{
		Role:              kairosRole,
		Distribution:      kairosDistribution,
		KubernetesVersion: in.KubernetesVersion,
		UserName:          kairosUserName,
	}
	// The provider needs one user credential, and one version of it writes a well-known
	// default password when none is given, even next to an SSH key. So the password is
	// always set: random, per cluster, shown to nobody. The class's SSH key, when it has
	// one, is then the only way in.
	if in.KairosUserSecret == "" {
		errs = append(errs, errors.New("no worker password Secret resolved for the cluster"))
	} else {
		spec.UserPasswordSecretRef = &kairos.SecretKeyRef{Name: in.KairosUserSecret, Key: kairosPasswordKey}
	}
	if in.Class.Kairos != nil {
		spec.SSHPublicKey = in.Class.Kairos.SSHAuthorizedKey
	}
	if in.Cluster.ManagementDNS != "" {
		spec.DNSServers = []string{in.Cluster.ManagementDNS}
	}

	patch, err := kubeletPatch(in)
	if err != nil {
		errs = append(errs, err)
	}
	spec.Files = []kairos.File{{Path: kairosKubeletPatch, Content: patch, Owner: kairosFileOwner, Permissions: "0644"}}
	if hosts := kairosHosts(in); hosts != "" {
		spec.Files = append(spec.Files, kairos.File{Path: kairosHostsFile, Content: hosts, Owner: kairosFileOwner, Permissions: "0644"})
	}
	if dropIn := kairosResolved(in); dropIn != "" {
		spec.Files = append(spec.Files, kairos.File{Path: kairosResolvedDropIn, Content: dropIn, Owner: kairosFileOwner, Permissions: "0644"})
	}
	for _, f := range spec.Files {
		// The node's cloud-config engine runs file contents through Go templates.
		if strings.Contains(f.Content, "{{") {
			errs = append(errs, fmt.Errorf("file %s holds %q, which the node would expand as a template", f.Path, "{{"))
		}
		if len(f.Content) > kairosMaxFileLength {
			errs = append(errs, fmt.Errorf("file %s is %d bytes, over the provider's limit of %d", f.Path, len(f.Content), kairosMaxFileLength))
		}
	}

	join := kairos.JoinConfiguration{Patches: &kairos.Patches{Directory: kairosPatchesDir}}
	reg := &kairos.NodeRegistration{}
	if labels := KubeletNodeLabels(in); len(labels) > 0 {
		keys := slices.Sorted(maps.Keys(labels))
		pairs := make([]string, 0, len(keys))
		for _, k := range keys {
			errs = append(errs, checkNodeLabel(k, labels[k])...)
			pairs = append(pairs, k+"="+labels[k])
		}
		reg.KubeletExtraArgs = []kairos.Arg{{Name: "node-labels", Value: strings.Join(pairs, ",")}}
	}
	for _, t := range in.Spec.Taints {
		switch t.Effect {
		case "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			errs = append(errs, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect))
		}
		reg.Taints = append(reg.Taints, kairos.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	if len(reg.KubeletExtraArgs) > 0 || len(reg.Taints) > 0 {
		join.NodeRegistration = reg
	}
	spec.Kubeadm = &kairos.Kubeadm{JoinConfiguration: join}
	// The provider's webhook refuses "{{" anywhere in spec.kubeadm (it would reach the
	// node as a template). Valid labels and taints cannot hold it; check all the same.
	for _, a := range reg.KubeletExtraArgs {
		if strings.Contains(a.Value, "{{") {
			errs = append(errs, fmt.Errorf("kubelet argument %s holds %q, which the Kairos provider refuses", a.Name, "{{"))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("pool %s/%s: Kairos bootstrap config: %w", in.Namespace, in.Name, errors.Join(errs...))
	}
	return &kairos.KairosConfigTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: kairos.GroupVersion.String(), Kind: "KairosConfigTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace},
		Spec:       kairos.KairosConfigTemplateSpec{Template: kairos.KairosConfigTemplateResource{Spec: spec}},
	}, nil
}

// kairosRefusedFields lists the Talos-only fields a Kairos pool sets. The CRD refuses
// them on the built-in kairos class only; a custom Kairos class has no CRD rule to lean
// on, so render refuses them too. spec.talos is ignored rather than refused: it tunes
// nothing a Kairos worker has.
func kairosRefusedFields(in *Input) []string {
	var out []string
	if in.Spec.OSImage != "" {
		out = append(out, "osImage")
	}
	if len(in.Spec.KernelModules) > 0 {
		out = append(out, "kernelModules")
	}
	if len(in.Spec.GPUs) > 0 {
		out = append(out, "gpus")
	}
	return out
}

// kubeletPatchConfig is the kubeadm patch of the kubelet configuration: the reservations
// from Reserve, the same values the capacity annotations subtract.
type kubeletPatchConfig struct {
	APIVersion     string            `json:"apiVersion"`
	Kind           string            `json:"kind"`
	KubeReserved   talosResources    `json:"kubeReserved"`
	SystemReserved talosResources    `json:"systemReserved"`
	EvictionHard   talosEvictionHard `json:"evictionHard"`
	MaxPods        int32             `json:"maxPods"`
}

func kubeletPatch(in *Input) (string, error) {
	r := Reserve(in.Machine)
	b, err := yaml.Marshal(kubeletPatchConfig{
		APIVersion: "kubelet.config.k8s.io/v1beta1",
		Kind:       "KubeletConfiguration",
		KubeReserved: talosResources{
			CPU: MilliCPUString(r.KubeReservedMilliCPU), Memory: MemoryString(r.KubeReservedMemoryBytes),
		},
		SystemReserved: talosResources{
			CPU: MilliCPUString(r.SystemReservedMilliCPU), Memory: MemoryString(r.SystemReservedMemoryBytes),
			EphemeralStorage: systemReservedEphemeralStorage, PID: systemReservedPID,
		},
		EvictionHard: talosEvictionHard{
			MemoryAvailable: MemoryString(r.EvictionHardMemoryBytes), NodefsAvailable: evictionNodefsAvailable,
			NodefsInodesFree: evictionNodefsInodesFree, ImagefsAvailable: evictionImagefsAvailable,
			ImagefsInodesFree: evictionImagefsInodesFree,
		},
		MaxPods: r.MaxPods,
	})
	if err != nil {
		return "", fmt.Errorf("kubelet patch: %w", err)
	}
	return string(b), nil
}

// kairosHosts is the worker's /etc/hosts: loopback, then the tenant API server Service's
// names at its ClusterIP.
func kairosHosts(in *Input) string {
	api := in.Cluster.APIServer
	if api.ClusterIP == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
	b.WriteString(api.ClusterIP)
	for _, name := range serviceNames(api, in.Cluster.ManagementDNSDomain) {
		b.WriteByte(' ')
		b.WriteString(name)
	}
	b.WriteByte('\n')
	return b.String()
}

// kairosResolved is the systemd-resolved drop-in: the management DNS and the search
// domains of the tenant's namespace, so Service names of the namespace resolve.
func kairosResolved(in *Input) string {
	if in.Cluster.ManagementDNS == "" {
		return ""
	}
	return "[Resolve]\nDNS=" + in.Cluster.ManagementDNS + "\nDomains=" + strings.Join(searchDomains(in), " ") + "\n"
}

// serviceNames are the names a Service answers to in the management cluster.
func serviceNames(s ServiceAddress, domain string) []string {
	return []string{s.Name, s.Name + "." + s.Namespace, s.Name + "." + s.Namespace + ".svc", s.Name + "." + s.Namespace + ".svc." + domain}
}

// searchDomains are the pod-like search domains of the pool's namespace.
func searchDomains(in *Input) []string {
	d := in.Cluster.ManagementDNSDomain
	return []string{in.Namespace + ".svc." + d, "svc." + d, d}
}
