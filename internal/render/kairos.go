package render

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
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
	// The policy refuses these before render is reached; render, which may be called
	// without it, refuses them too.
	if len(in.Spec.SetTalosOnlyFields()) > 0 {
		errs = append(errs, errors.New(v1.TalosOnlyFieldsMessage))
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

	spec.Files = make([]kairos.File, 0, 3) // the patch, hosts and resolved.conf
	spec.Files = append(spec.Files, kairos.File{Path: kairosKubeletPatch, Content: kubeletPatch(in), Owner: kairosFileOwner, Permissions: "0644"})
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
	var buf [8]nodeLabel
	if labels := kubeletNodeLabels(buf[:0], in); len(labels) > 0 {
		for _, l := range labels {
			errs = append(errs, checkNodeLabel(l.key, l.value)...)
		}
		reg.KubeletExtraArgs = []kairos.Arg{{Name: "node-labels", Value: joinLabels(labels)}}
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
		TypeMeta:   metav1.TypeMeta{APIVersion: kairosAPIVersion, Kind: "KairosConfigTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace},
		Spec:       kairos.KairosConfigTemplateSpec{Template: kairos.KairosConfigTemplateResource{Spec: spec}},
	}, nil
}

// kubeletPatch is the kubeadm patch of the kubelet configuration: the reservations from
// Reserve, the same values the capacity annotations subtract, and the rest of
// systemReserved and evictionHard as the Talos config sets them.
//
// It is written out rather than marshalled: the document is fixed but for a few
// quantities, and a YAML library (JSON, a YAML parse, a YAML emit) took most of a Kairos
// render's time. The bytes are those sigs.k8s.io/yaml writes for the same content (keys
// sorted, a value that would read as a number quoted); kubeletpatch_test.go compares
// the two over a range of machine sizes.
func kubeletPatch(in *Input) string {
	r := Reserve(in.Machine)
	b := make([]byte, 0, 512)
	b = append(b, "apiVersion: kubelet.config.k8s.io/v1beta1\nevictionHard:\n"...)
	b = appendPatchValue(b, "  imagefs.available: ", evictionImagefsAvailable)
	b = appendPatchValue(b, "  imagefs.inodesFree: ", evictionImagefsInodesFree)
	b = appendPatchValue(b, "  memory.available: ", MemoryString(r.EvictionHardMemoryBytes))
	b = appendPatchValue(b, "  nodefs.available: ", evictionNodefsAvailable)
	b = appendPatchValue(b, "  nodefs.inodesFree: ", evictionNodefsInodesFree)
	b = append(b, "kind: KubeletConfiguration\nkubeReserved:\n"...)
	b = appendPatchValue(b, "  cpu: ", MilliCPUString(r.KubeReservedMilliCPU))
	b = appendPatchValue(b, "  memory: ", MemoryString(r.KubeReservedMemoryBytes))
	b = append(b, "maxPods: "...)
	b = strconv.AppendInt(b, int64(r.MaxPods), 10)
	b = append(b, "\nsystemReserved:\n"...)
	b = appendPatchValue(b, "  cpu: ", MilliCPUString(r.SystemReservedMilliCPU))
	b = appendPatchValue(b, "  ephemeral-storage: ", systemReservedEphemeralStorage)
	b = appendPatchValue(b, "  memory: ", MemoryString(r.SystemReservedMemoryBytes))
	b = appendPatchValue(b, "  pid: ", systemReservedPID)
	return string(b)
}

// appendPatchValue writes a line of the kubelet patch. Its values are quantities and
// percentages: plain YAML, except that one of only digits would read as a number, so it
// is quoted as the library quotes it.
func appendPatchValue(b []byte, prefix, value string) []byte {
	b = append(b, prefix...)
	if value != "" && strings.Trim(value, "0123456789") == "" {
		b = append(b, '"')
		b = append(b, value...)
		b = append(b, '"')
	} else {
		b = append(b, value...)
	}
	return append(b, '\n')
}

// kairosHosts is the worker's /etc/hosts: loopback, then the tenant API server Service's
// names at its ClusterIP.
func kairosHosts(in *Input) string {
	api := in.Cluster.APIServer
	if api.ClusterIP == "" {
		return ""
	}
	const loopback = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
	names := serviceNames(api, in.Cluster.ManagementDNSDomain)
	var b strings.Builder
	b.Grow(len(loopback) + len(api.ClusterIP) + len(names)*(1+len(names[3])) + 1) // at most
	b.WriteString(loopback)
	b.WriteString(api.ClusterIP)
	for _, name := range names {
		b.WriteByte(' ')
		b.WriteString(name)
	}
	b.WriteByte('\n')
	return b.String()
}

// kairosResolved is the systemd-resolved drop-in: the management DNS and the pod-like
// search domains of the tenant's namespace, so Service names of the namespace resolve.
func kairosResolved(in *Input) string {
	if in.Cluster.ManagementDNS == "" {
		return ""
	}
	d := in.Cluster.ManagementDNSDomain
	return "[Resolve]\nDNS=" + in.Cluster.ManagementDNS + "\nDomains=" + in.Namespace + ".svc." + d + " svc." + d + " " + d + "\n"
}

// serviceNames are the names a Service answers to in the management cluster: name,
// name.namespace, name.namespace.svc and name.namespace.svc.domain. Each is a prefix of
// the last, so all four share its memory.
func serviceNames(s ServiceAddress, domain string) [4]string {
	full := s.Name + "." + s.Namespace + ".svc." + domain
	nsEnd := len(s.Name) + 1 + len(s.Namespace)
	return [4]string{full[:len(s.Name)], full[:nsEnd], full[:nsEnd+len(".svc")], full}
}
