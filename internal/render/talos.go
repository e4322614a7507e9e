package render

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/schematic"
)

// The Talos machine config is declared here rather than imported from Talos' machinery
// module: the operator writes a few dozen fields, and the machinery types would pull the
// whole Talos config stack (and its defaults and custom marshallers) into every render.
// Field names follow the Talos v1alpha1 schema; talos_test.go loads every rendered config
// with machinery's strict loader (unknown fields fail) and validates it, so a wrong name
// is caught there.
//
// The document is written by appendYAML below, not by a YAML library. The structs keep
// their json tags, and a test checks that sigs.k8s.io/yaml reads the same document back
// from both encodings, but the library (JSON, then a YAML parse, then a YAML emit) takes
// ~400 µs a pool, a hundred times this writer, and render runs for every pool on every
// resync. The writer is small because the shape is fixed: the only free-form
// input is a string scalar, and appendYAMLScalar writes every string either as a plain
// scalar from a conservative character set that YAML cannot read as anything else, or
// double-quoted with every character outside printable ASCII escaped. Tenant values are
// therefore always inert YAML data; the scalar writer is fuzzed against two YAML parsers.

// talosConfig is a Talos v1alpha1 machine config document.
type talosConfig struct {
	Version string       `json:"version"`
	Machine talosMachine `json:"machine"`
	Cluster talosCluster `json:"cluster"`
}

type talosMachine struct {
	Type    string           `json:"type"`
	Token   string           `json:"token"`
	CA      talosCertificate `json:"ca"`
	Kubelet talosKubelet     `json:"kubelet"`
	Network *talosNetwork    `json:"network,omitempty"`
	Install talosInstall     `json:"install"`
	Kernel  *talosKernel     `json:"kernel,omitempty"`
	Sysctls talosSysctls     `json:"sysctls,omitempty"`
}

// talosCertificate is a CA certificate as Talos stores it: base64 of the PEM, written
// straight into the document. Workers get the certificate only; the key stays empty
// (Talos refuses CA keys on workers).
type talosCertificate struct {
	PEM string
}

// MarshalJSON is the same field as JSON (the YAML is written by appendYAML).
func (c talosCertificate) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"crt": base64.StdEncoding.EncodeToString([]byte(c.PEM)), "key": ""})
}

// talosSysctls are the sysctls sorted by name, so the writer never walks a map.
type talosSysctls []talosSysctl

type talosSysctl struct{ Name, Value string }

// MarshalJSON is the same field as JSON (the YAML is written by appendYAML).
func (l talosSysctls) MarshalJSON() ([]byte, error) {
	m := make(map[string]string, len(l))
	for _, s := range l {
		m[s.Name] = s.Value
	}
	return json.Marshal(m)
}

type talosKubelet struct {
	Image       string             `json:"image"`
	ClusterDNS  []string           `json:"clusterDNS,omitempty"`
	ExtraArgs   *talosKubeletArgs  `json:"extraArgs,omitempty"`
	ExtraConfig talosKubeletConfig `json:"extraConfig"`
}

// talosKubeletArgs are the kubelet flags we add. Only node-labels: everything else is
// configuration (extraConfig), which the kubelet reads as structured data.
type talosKubeletArgs struct {
	NodeLabels string `json:"node-labels"`
}

// talosKubeletConfig is merged by Talos into the KubeletConfiguration (field names are
// kubelet.config.k8s.io/v1beta1 ones; Talos decodes them strictly).
type talosKubeletConfig struct {
	KubeReserved       talosResources    `json:"kubeReserved"`
	SystemReserved     talosResources    `json:"systemReserved"`
	EvictionHard       talosEvictionHard `json:"evictionHard"`
	MaxPods            int32             `json:"maxPods"`
	RegisterWithTaints []talosTaint      `json:"registerWithTaints,omitempty"`
}

type talosResources struct {
	CPU              string `json:"cpu"`
	Memory           string `json:"memory"`
	EphemeralStorage string `json:"ephemeral-storage,omitempty"`
	PID              string `json:"pid,omitempty"`
}

// talosEvictionHard lists every signal of the kubelet's default evictionHard, not only
// memory: the kubelet does not merge a partial evictionHard with its defaults, it sets
// every signal left out to zero, which would silently turn disk-pressure eviction off.
type talosEvictionHard struct {
	MemoryAvailable   string `json:"memory.available"`
	NodefsAvailable   string `json:"nodefs.available"`
	NodefsInodesFree  string `json:"nodefs.inodesFree"`
	ImagefsAvailable  string `json:"imagefs.available"`
	ImagefsInodesFree string `json:"imagefs.inodesFree"`
}

type talosTaint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

type talosNetwork struct {
	Nameservers      []string         `json:"nameservers,omitempty"`
	SearchDomains    []string         `json:"searchDomains,omitempty"`
	ExtraHostEntries []talosHostEntry `json:"extraHostEntries,omitempty"`
}

type talosHostEntry struct {
	IP      string   `json:"ip"`
	Aliases []string `json:"aliases"`
}

type talosInstall struct {
	Disk            string   `json:"disk"`
	Image           string   `json:"image"`
	ExtraKernelArgs []string `json:"extraKernelArgs,omitempty"`
}

type talosKernel struct {
	Modules []talosKernelModule `json:"modules"`
}

type talosKernelModule struct {
	Name string `json:"name"`
}

type talosCluster struct {
	ID           string              `json:"id,omitempty"`
	Secret       string              `json:"secret,omitempty"`
	ControlPlane talosControlPlane   `json:"controlPlane"`
	ClusterName  string              `json:"clusterName"`
	Network      talosClusterNetwork `json:"network"`
	Token        string              `json:"token"`
	CA           talosCertificate    `json:"ca"`
}

type talosControlPlane struct {
	Endpoint string `json:"endpoint"`
}

type talosClusterNetwork struct {
	DNSDomain      string   `json:"dnsDomain,omitempty"`
	PodSubnets     []string `json:"podSubnets,omitempty"`
	ServiceSubnets []string `json:"serviceSubnets,omitempty"`
}

const (
	// talosInstallDisk is the system disk of a KubeVirt VM on the virtio bus.
	talosInstallDisk = "/dev/vda"
	// kubeletImageRepository is the kubelet image Talos runs; its tag is the pool's
	// Kubernetes release.
	kubeletImageRepository = "ghcr.io/siderolabs/kubelet"

	// Talos' own worker defaults for the parts of systemReserved that Reserve does not
	// size. Setting systemReserved replaces Talos' whole default, so they are restated
	// here rather than dropped.
	systemReservedEphemeralStorage = "256Mi"
	systemReservedPID              = "100"

	// The kubelet's default disk eviction thresholds (see talosEvictionHard).
	evictionNodefsAvailable   = "10%"
	evictionNodefsInodesFree  = "5%"
	evictionImagefsAvailable  = "15%"
	evictionImagefsInodesFree = "5%"
)

// defaultInstallerRepository is the compiled-in catalog's installer repository, for an
// Input whose Factory was left empty. It is read once: the catalog cannot change while
// the process runs, so this keeps render pure.
var defaultInstallerRepository = sync.OnceValue(func() string {
	return catalog.Default().TalosFactory.InstallerRepository
})

// TalosMachineConfig renders the Talos v1alpha1 machine config of a worker of the pool.
//
// Every value is data: tenant strings (labels, taints, sysctls) are placed in YAML
// fields, never in a script or a template, and the few that end up in a text format read
// by something else (node labels in the kubelet's comma-separated --node-labels flag,
// sysctl names Talos turns into paths under /proc/sys) are checked here even though the
// CRD restricts them already, so that render is safe on its own. All problems of the
// Input are reported at once.
func TalosMachineConfig(in *Input) (string, error) {
	cfg, err := talosMachineConfig(in)
	if err != nil {
		return "", fmt.Errorf("pool %s/%s: Talos machine config: %w", in.Namespace, in.Name, err)
	}
	buf := getScratch()
	defer putScratch(buf)
	return string(cfg.appendYAML((*buf)[:0])), nil
}

// TalosConfigTemplate renders the pool's TalosConfigTemplate: CABPT with generateType
// "none" hands the machine config to each machine exactly as rendered, so nothing the
// bootstrap provider would generate (and could change between its releases) rolls the
// pool. Labels, annotations and owner references are the caller's; name may be empty
// when the caller names the template after its content.
func TalosConfigTemplate(in *Input, name string) (*talos.TalosConfigTemplate, error) {
	data, err := TalosMachineConfig(in)
	if err != nil {
		return nil, err
	}
	return &talos.TalosConfigTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: talosAPIVersion, Kind: "TalosConfigTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Namespace},
		Spec: talos.TalosConfigTemplateSpec{Template: talos.TalosConfigTemplateResource{Spec: talos.TalosConfigSpec{
			GenerateType: talos.GenerateTypeNone,
			TalosVersion: in.Release.Talos.Version,
			Data:         data,
		}}},
	}, nil
}

// talosMachineConfig builds the document, collecting every problem of the Input.
func talosMachineConfig(in *Input) (talosConfig, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	s := in.TalosSecrets
	if s == nil {
		// Nothing else can be rendered meaningfully without them.
		return talosConfig{}, fmt.Errorf("the cluster's Talos secrets are missing (Secret %s-talos)", in.Cluster.Name)
	}
	if s.MachineToken == "" {
		bad("Talos secrets: the machine token is empty")
	}
	if s.BootstrapToken == "" {
		bad("Talos secrets: the bootstrap token is empty")
	}
	checkCertificates(bad, "Talos secrets: the machine CA certificate", s.MachineCACert)
	checkCertificates(bad, "Talos secrets: the cluster CA certificate", s.ClusterCACert)

	c := &in.Cluster
	if c.ControlPlaneHost == "" {
		bad("the cluster %q has no control-plane endpoint host", c.Name)
	} else if !validHost(c.ControlPlaneHost) {
		bad("the control-plane endpoint host %q is neither an IP address nor a DNS name", c.ControlPlaneHost)
	}
	if c.ControlPlanePort <= 0 || c.ControlPlanePort > 65535 {
		bad("the control-plane endpoint port %d is not a TCP port", c.ControlPlanePort)
	}
	if c.Name == "" {
		bad("no cluster name")
	}
	if in.KubernetesVersion == "" {
		bad("no Kubernetes version resolved")
	}
	checkDNSDomain(bad, "the cluster DNS domain", c.DNSDomain)
	checkDNSDomain(bad, "the management cluster DNS domain", c.ManagementDNSDomain)
	checkPrefixes(bad, "pod CIDR", c.PodCIDRs)
	checkPrefixes(bad, "service CIDR", c.ServiceCIDRs)
	checkAddress(bad, "the tenant DNS address", c.TenantDNS)
	checkAddress(bad, "the management DNS address", c.ManagementDNS)

	kubelet, nodeLabelErrs := talosKubeletSection(in)
	errs = append(errs, nodeLabelErrs...)
	network := talosNetworkSection(in, bad)
	install := talosInstallSection(in, bad)
	kernel := talosKernelSection(in, bad)
	sysctls := talosSysctlSection(in, bad)

	if len(errs) > 0 {
		return talosConfig{}, errors.Join(errs...)
	}

	return talosConfig{
		Version: "v1alpha1",
		Machine: talosMachine{
			Type:    "worker",
			Token:   s.MachineToken,
			CA:      talosCertificate{PEM: s.MachineCACert},
			Kubelet: kubelet,
			Network: network,
			Install: install,
			Kernel:  kernel,
			Sysctls: sysctls,
		},
		Cluster: talosCluster{
			ID:           s.ClusterID,
			Secret:       s.ClusterSecret,
			ControlPlane: talosControlPlane{Endpoint: "https://" + net.JoinHostPort(c.ControlPlaneHost, strconv.Itoa(int(c.ControlPlanePort)))},
			ClusterName:  c.Name,
			Network: talosClusterNetwork{
				DNSDomain:      c.DNSDomain,
				PodSubnets:     c.PodCIDRs,
				ServiceSubnets: c.ServiceCIDRs,
			},
			Token: s.BootstrapToken,
			CA:    talosCertificate{PEM: s.ClusterCACert},
		},
	}, nil
}

// talosKubeletSection is the kubelet: its image, the pool's node labels and taints, and
// the reservations from Reserve, the one source the autoscaler's capacity annotations
// read too, so what a node reports and what the autoscaler expects cannot disagree.
// Node-role labels are not set here: the kubelet may not set them, Cluster API syncs them.
func talosKubeletSection(in *Input) (talosKubelet, []error) {
	var errs []error
	r := Reserve(in.Machine)
	k := talosKubelet{
		Image: kubeletImageRepository + ":" + in.KubernetesVersion,
		ExtraConfig: talosKubeletConfig{
			KubeReserved: talosResources{
				CPU:    MilliCPUString(r.KubeReservedMilliCPU),
				Memory: MemoryString(r.KubeReservedMemoryBytes),
			},
			SystemReserved: talosResources{
				CPU:              MilliCPUString(r.SystemReservedMilliCPU),
				Memory:           MemoryString(r.SystemReservedMemoryBytes),
				EphemeralStorage: systemReservedEphemeralStorage,
				PID:              systemReservedPID,
			},
			EvictionHard: talosEvictionHard{
				MemoryAvailable:   MemoryString(r.EvictionHardMemoryBytes),
				NodefsAvailable:   evictionNodefsAvailable,
				NodefsInodesFree:  evictionNodefsInodesFree,
				ImagefsAvailable:  evictionImagefsAvailable,
				ImagefsInodesFree: evictionImagefsInodesFree,
			},
			MaxPods: r.MaxPods,
		},
	}
	if in.Cluster.TenantDNS != "" {
		k.ClusterDNS = []string{in.Cluster.TenantDNS}
	}

	// Labels are walked sorted: the flag is the same whatever the map order, and so are
	// the errors, which end up in status conditions.
	var buf [8]nodeLabel
	if labels := kubeletNodeLabels(buf[:0], in); len(labels) > 0 {
		for _, l := range labels {
			if _, tenant := in.Spec.Labels[l.key]; tenant && reservedLabelDomain(l.key) {
				errs = append(errs, fmt.Errorf("node label key %q is in a reserved domain (kubernetes.io, k8s.io, nodegroup.io)", l.key))
			}
			errs = append(errs, checkNodeLabel(l.key, l.value)...)
		}
		k.ExtraArgs = &talosKubeletArgs{NodeLabels: joinLabels(labels)}
	}

	if n := len(in.Spec.Taints); n > 0 {
		k.ExtraConfig.RegisterWithTaints = make([]talosTaint, n)
		for i, t := range in.Spec.Taints {
			switch t.Effect {
			case "NoSchedule", "PreferNoSchedule", "NoExecute":
			default:
				errs = append(errs, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect))
			}
			k.ExtraConfig.RegisterWithTaints[i] = talosTaint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)}
		}
	}
	return k, errs
}

// talosNetworkSection points the worker at the management cluster's DNS and maps the
// tenant API server Service's names to its ClusterIP in /etc/hosts, so the control-plane
// endpoint resolves at first boot, before anything else is up. The search domains let the
// short Service names the endpoint may use resolve through that DNS later.
func talosNetworkSection(in *Input, bad func(string, ...any)) *talosNetwork {
	c := &in.Cluster
	var n talosNetwork
	if c.ManagementDNS != "" {
		n.Nameservers = []string{c.ManagementDNS}
	}

	api := c.APIServer
	d := c.ManagementDNSDomain
	names := serviceNames(api, d)
	if api.ClusterIP != "" {
		if _, err := netip.ParseAddr(api.ClusterIP); err != nil {
			bad("the API server Service ClusterIP %q is not an IP address", api.ClusterIP)
		}
		if !isDNS1123Label(api.Name) || !isDNS1123Label(api.Namespace) {
			bad("the API server Service %q in namespace %q: names must be DNS labels", api.Name, api.Namespace)
		}
		aliases := names[:3]
		if d != "" {
			aliases = names[:]
		}
		n.ExtraHostEntries = []talosHostEntry{{IP: api.ClusterIP, Aliases: aliases}}
	}
	if d != "" {
		// The pod-like search domains of the Service's namespace: namespace.svc.domain,
		// svc.domain and domain, the tails of its full name.
		full := names[3]
		svcDomain := full[len(full)-len(d)-len("svc."):]
		if api.Namespace != "" {
			n.SearchDomains = []string{full[len(api.Name)+1:], svcDomain, d}
		} else {
			n.SearchDomains = []string{svcDomain, d}
		}
	}

	if n.Nameservers == nil && n.SearchDomains == nil && n.ExtraHostEntries == nil {
		return nil
	}
	return &n
}

// talosInstallSection is what the installer (and later upgrades) use: the pool's osImage
// when it names one, else the Image Factory installer of the pool's schematic (see
// talosSchematic), which carries the class's extensions: they are not listed here, as
// machine.install.extensions is deprecated in Talos.
func talosInstallSection(in *Input, bad func(string, ...any)) talosInstall {
	install := talosInstall{Disk: talosInstallDisk, Image: in.Spec.OSImage}
	if install.Image == "" {
		repo := in.Factory.InstallerRepository
		if in.Class.Talos != nil && in.Class.Talos.InstallerRepository != "" {
			repo = in.Class.Talos.InstallerRepository
		}
		if repo == "" {
			repo = defaultInstallerRepository()
		}
		id, err := talosSchematic(in)
		switch {
		case err != nil:
			bad("class %q: %v", in.ClassName, err)
		case id == "" || in.Release.Talos.Version == "":
			bad("the catalog release %q has no Talos version or schematic", in.Release.Minor)
		}
		install.Image = repo + "/" + id + ":" + in.Release.Talos.Version
	}
	if in.Class.Talos != nil && len(in.Class.Talos.KernelArgs) > 0 {
		for _, a := range in.Class.Talos.KernelArgs {
			// Talos joins these into the kernel command line with spaces.
			if a == "" || strings.ContainsAny(a, " \t\r\n") {
				bad("class %q: kernel argument %q is empty or contains whitespace", in.ClassName, a)
			}
		}
		install.ExtraKernelArgs = in.Class.Talos.KernelArgs
	}
	return install
}

// talosSchematic is the Image Factory schematic ID of the pool's Talos image, for its
// installer and its disk: the catalog release's for a class without extensions or kernel
// arguments, else the ID of the class's own schematic, computed as the factory does. The
// class's schematic replaces the catalog's rather than adding to it (the catalog names
// its schematic by ID only), so it starts from the vanilla image. The factory serves an
// ID only once the schematic has been posted to it.
func talosSchematic(in *Input) (string, error) {
	s := schematic.FromClass(in.Class.Talos)
	if s.IsVanilla() {
		return in.Release.Talos.Schematic, nil
	}
	id, err := s.ID()
	if err != nil {
		return "", fmt.Errorf("the Image Factory schematic of the class: %w", err)
	}
	return id, nil
}

// talosKernelSection lists the kernel modules Talos loads at boot.
func talosKernelSection(in *Input, bad func(string, ...any)) *talosKernel {
	if len(in.Spec.KernelModules) == 0 {
		return nil
	}
	k := &talosKernel{Modules: make([]talosKernelModule, len(in.Spec.KernelModules))}
	for i, m := range in.Spec.KernelModules {
		if !validKernelModule(m) {
			bad("kernel module %q is not a module name (a-z, 0-9, '_', '-')", m)
		}
		k.Modules[i] = talosKernelModule{Name: m}
	}
	return k
}

// talosSysctls copies the pool's sysctls. Talos writes each value to the file its name
// maps to under /proc/sys, so names are checked to stay there: components of a-z, 0-9,
// '_' and '-' between single separators, which leaves no "." or ".." path element however
// Talos maps the separators. Values are written as file content, no shell: data as is.
func talosSysctlSection(in *Input, bad func(string, ...any)) talosSysctls {
	if in.Spec.Talos == nil || len(in.Spec.Talos.Sysctls) == 0 {
		return nil
	}
	out := make(talosSysctls, 0, len(in.Spec.Talos.Sysctls))
	for k, v := range in.Spec.Talos.Sysctls {
		out = append(out, talosSysctl{Name: k, Value: string(v)})
	}
	slices.SortFunc(out, func(a, b talosSysctl) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range out {
		if !validSysctlName(s.Name) {
			bad("sysctl %q is not a kernel parameter name", s.Name)
		}
	}
	return out
}

// spaces indents the document; its length bounds the nesting depth.
const spaces = "                                "

// appendYAML writes the document in the order of the Talos schema documentation, which
// reads better than sorted keys. Every map in it is walked in sorted key order.
func (c *talosConfig) appendYAML(b []byte) []byte {
	b = appendYAMLString(b, 0, "version", c.Version)
	b = appendYAMLKey(b, 0, "machine")
	m := &c.Machine
	b = appendYAMLString(b, 2, "type", m.Type)
	b = appendYAMLString(b, 2, "token", m.Token)
	b = m.CA.appendYAML(b, 2, "ca")
	b = m.Kubelet.appendYAML(b, 2)
	if n := m.Network; n != nil {
		b = appendYAMLKey(b, 2, "network")
		if len(n.Nameservers) > 0 {
			b = appendYAMLStrings(b, 4, "nameservers", n.Nameservers)
		}
		if len(n.SearchDomains) > 0 {
			b = appendYAMLStrings(b, 4, "searchDomains", n.SearchDomains)
		}
		if len(n.ExtraHostEntries) > 0 {
			b = appendYAMLKey(b, 4, "extraHostEntries")
			for _, h := range n.ExtraHostEntries {
				b = appendYAMLItem(b, 4)
				b = appendYAMLString(b, 0, "ip", h.IP)
				b = appendYAMLStrings(b, 6, "aliases", h.Aliases)
			}
		}
	}
	b = appendYAMLKey(b, 2, "install")
	b = appendYAMLString(b, 4, "disk", m.Install.Disk)
	b = appendYAMLString(b, 4, "image", m.Install.Image)
	if len(m.Install.ExtraKernelArgs) > 0 {
		b = appendYAMLStrings(b, 4, "extraKernelArgs", m.Install.ExtraKernelArgs)
	}
	if k := m.Kernel; k != nil {
		b = appendYAMLKey(b, 2, "kernel")
		b = appendYAMLKey(b, 4, "modules")
		for _, mod := range k.Modules {
			b = appendYAMLItem(b, 4)
			b = appendYAMLString(b, 0, "name", mod.Name)
		}
	}
	if len(m.Sysctls) > 0 {
		b = appendYAMLKey(b, 2, "sysctls")
		for _, s := range m.Sysctls {
			b = appendYAMLString(b, 4, s.Name, s.Value)
		}
	}

	cl := &c.Cluster
	b = appendYAMLKey(b, 0, "cluster")
	if cl.ID != "" {
		b = appendYAMLString(b, 2, "id", cl.ID)
	}
	if cl.Secret != "" {
		b = appendYAMLString(b, 2, "secret", cl.Secret)
	}
	b = appendYAMLKey(b, 2, "controlPlane")
	b = appendYAMLString(b, 4, "endpoint", cl.ControlPlane.Endpoint)
	b = appendYAMLString(b, 2, "clusterName", cl.ClusterName)
	b = appendYAMLKey(b, 2, "network")
	if cl.Network.DNSDomain != "" {
		b = appendYAMLString(b, 4, "dnsDomain", cl.Network.DNSDomain)
	}
	if len(cl.Network.PodSubnets) > 0 {
		b = appendYAMLStrings(b, 4, "podSubnets", cl.Network.PodSubnets)
	}
	if len(cl.Network.ServiceSubnets) > 0 {
		b = appendYAMLStrings(b, 4, "serviceSubnets", cl.Network.ServiceSubnets)
	}
	if cl.Network.DNSDomain == "" && len(cl.Network.PodSubnets) == 0 && len(cl.Network.ServiceSubnets) == 0 {
		b = b[:len(b)-1] // "network:" -> "network: {}"
		b = append(b, " {}\n"...)
	}
	b = appendYAMLString(b, 2, "token", cl.Token)
	b = cl.CA.appendYAML(b, 2, "ca")
	return b
}

func (c *talosCertificate) appendYAML(b []byte, indent int, key string) []byte {
	b = appendYAMLKey(b, indent, key)
	b = append(b, spaces[:indent+2]...)
	b = append(b, "crt: "...)
	// Base64 has only [A-Za-z0-9+/=], all plain-safe, and starts with a letter ("LS0t"
	// for "---") unless the PEM starts with a byte >= 0xD0; quoting needs no escapes.
	quote := c.PEM == "" || c.PEM[0] >= 0xd0
	if quote {
		b = append(b, '"')
	}
	b = base64.StdEncoding.AppendEncode(b, []byte(c.PEM))
	if quote {
		b = append(b, '"')
	}
	b = append(b, '\n')
	b = append(b, spaces[:indent+2]...)
	return append(b, `key: ""`+"\n"...)
}

func (k *talosKubelet) appendYAML(b []byte, indent int) []byte {
	b = appendYAMLKey(b, indent, "kubelet")
	in := indent + 2
	b = appendYAMLString(b, in, "image", k.Image)
	if len(k.ClusterDNS) > 0 {
		b = appendYAMLStrings(b, in, "clusterDNS", k.ClusterDNS)
	}
	if k.ExtraArgs != nil {
		b = appendYAMLKey(b, in, "extraArgs")
		b = appendYAMLString(b, in+2, "node-labels", k.ExtraArgs.NodeLabels)
	}
	x := &k.ExtraConfig
	b = appendYAMLKey(b, in, "extraConfig")
	in += 2
	b = x.KubeReserved.appendYAML(b, in, "kubeReserved")
	b = x.SystemReserved.appendYAML(b, in, "systemReserved")
	b = appendYAMLKey(b, in, "evictionHard")
	b = appendYAMLString(b, in+2, "memory.available", x.EvictionHard.MemoryAvailable)
	b = appendYAMLString(b, in+2, "nodefs.available", x.EvictionHard.NodefsAvailable)
	b = appendYAMLString(b, in+2, "nodefs.inodesFree", x.EvictionHard.NodefsInodesFree)
	b = appendYAMLString(b, in+2, "imagefs.available", x.EvictionHard.ImagefsAvailable)
	b = appendYAMLString(b, in+2, "imagefs.inodesFree", x.EvictionHard.ImagefsInodesFree)
	b = append(b, spaces[:in]...)
	b = append(b, "maxPods: "...)
	b = strconv.AppendInt(b, int64(x.MaxPods), 10)
	b = append(b, '\n')
	if len(x.RegisterWithTaints) > 0 {
		b = appendYAMLKey(b, in, "registerWithTaints")
		for _, t := range x.RegisterWithTaints {
			b = appendYAMLItem(b, in)
			b = appendYAMLString(b, 0, "key", t.Key)
			if t.Value != "" {
				b = appendYAMLString(b, in+2, "value", t.Value)
			}
			b = appendYAMLString(b, in+2, "effect", t.Effect)
		}
	}
	return b
}

func (r *talosResources) appendYAML(b []byte, indent int, key string) []byte {
	b = appendYAMLKey(b, indent, key)
	b = appendYAMLString(b, indent+2, "cpu", r.CPU)
	b = appendYAMLString(b, indent+2, "memory", r.Memory)
	if r.EphemeralStorage != "" {
		b = appendYAMLString(b, indent+2, "ephemeral-storage", r.EphemeralStorage)
	}
	if r.PID != "" {
		b = appendYAMLString(b, indent+2, "pid", r.PID)
	}
	return b
}

// appendYAMLKey writes "key:" opening a nested mapping or sequence.
func appendYAMLKey(b []byte, indent int, key string) []byte {
	b = append(b, spaces[:indent]...)
	b = appendYAMLScalar(b, key)
	return append(b, ':', '\n')
}

// appendYAMLString writes "key: value".
func appendYAMLString(b []byte, indent int, key, value string) []byte {
	b = append(b, spaces[:indent]...)
	b = appendYAMLScalar(b, key)
	b = append(b, ':', ' ')
	b = appendYAMLScalar(b, value)
	return append(b, '\n')
}

// appendYAMLStrings writes "key:" and a block sequence of strings ("key: []" if empty).
func appendYAMLStrings(b []byte, indent int, key string, values []string) []byte {
	if len(values) == 0 {
		b = append(b, spaces[:indent]...)
		b = appendYAMLScalar(b, key)
		return append(b, ": []\n"...)
	}
	b = appendYAMLKey(b, indent, key)
	for _, v := range values {
		b = appendYAMLItem(b, indent)
		b = appendYAMLScalar(b, v)
		b = append(b, '\n')
	}
	return b
}

// appendYAMLItem starts a sequence entry; the entry's first field follows on the same
// line (indent 0), its other fields at indent+2.
func appendYAMLItem(b []byte, indent int) []byte {
	b = append(b, spaces[:indent]...)
	return append(b, '-', ' ')
}

// appendYAMLScalar writes a string so that every YAML parser reads back exactly that
// string: plain when yamlPlainSafe says it cannot mean anything else, otherwise
// double-quoted. Inside quotes, printable ASCII is written as is except '"' and '\\';
// everything else that YAML could fold, normalise or refuse (control characters, DEL,
// C1 controls, the Unicode line and paragraph separators, the byte order mark) is
// escaped. Other printable Unicode is written as UTF-8. A byte that is not UTF-8 (the
// API server never produces one) becomes U+FFFD, as encoding/json would make it.
func appendYAMLScalar(b []byte, s string) []byte {
	if yamlPlainSafe(s) {
		return append(b, s...)
	}
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(s); {
		// Copy a run of printable ASCII other than '"' and '\\' at once.
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] < 0x7f && s[j] != '"' && s[j] != '\\' {
			j++
		}
		b = append(b, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\r':
				b = append(b, '\\', 'r')
			default: // the other control characters and DEL
				b = append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\uFFFD`...)
		case yamlPrintable(r):
			b = append(b, s[i:i+size]...)
		case r <= 0xffff:
			b = append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			b = append(b, '\\', 'U')
			for shift := 28; shift >= 0; shift -= 4 {
				b = append(b, hex[r>>shift&0xf])
			}
		}
		i += size
	}
	return append(b, '"')
}

// yamlPrintable is a non-ASCII character YAML takes literally inside double quotes:
// printable, and not one of the characters YAML 1.1 treats as a line break (NEL, LS,
// PS), which a parser would fold.
func yamlPrintable(r rune) bool {
	switch {
	case r >= 0xa0 && r <= 0xd7ff:
		return r != 0x2028 && r != 0x2029
	case r >= 0xe000 && r <= 0xfffd:
		return r != 0xfeff
	default:
		return r >= 0x10000 && r <= utf8.MaxRune
	}
}

// yamlPlainSafe says whether a string can be written unquoted and still read back as
// that string by YAML 1.1 and 1.2 parsers alike: it starts with a letter or '/' (so no
// number, timestamp, null "~", indicator or alias), uses only [A-Za-z0-9._/:=,+@-]
// (no spaces, quotes, '#', or flow brackets), does not end with ':' (a key), and is not
// one of the words YAML 1.1 reads as a boolean or null. Anything else is quoted, which
// costs only readability.
func yamlPlainSafe(s string) bool {
	if s == "" || yamlPlainClass[s[0]] != yamlPlainLetter && s[0] != '/' || s[len(s)-1] == ':' {
		return false
	}
	var seen uint8
	for i := 0; i < len(s); i++ {
		seen |= yamlPlainClass[s[i]]
	}
	if seen&yamlPlainNever != 0 {
		return false
	}
	if seen == yamlPlainLetter && len(s) <= 5 {
		switch strings.ToLower(s) {
		case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
			return false
		}
	}
	return true
}

// yamlPlainClass sorts bytes for yamlPlainSafe, which runs for every key and value of
// every document: letters, the other bytes a plain scalar may hold, and the rest.
var yamlPlainClass = func() (t [256]uint8) {
	for c := range t {
		t[c] = yamlPlainNever
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = yamlPlainLetter, yamlPlainLetter
	}
	for _, c := range "0123456789._/:=,+@-" {
		t[c] = yamlPlainOther
	}
	return t
}()

const (
	yamlPlainLetter = 1 << iota
	yamlPlainOther
	yamlPlainNever
)
