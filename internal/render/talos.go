package render

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/schematic"
)

// The worker's machine config is built from Talos machinery's own v1alpha1 types and
// written by machinery's encoder (YAML, no comments), so field names, nesting and the
// encoding of certificates and the endpoint are Talos' own, and a tenant string is a
// YAML string value that the encoder quotes as it needs: inert data. The one kind of
// string its YAML library cannot always write back faithfully, one with a line feed, is
// refused (hasLineBreak). talos_test.go loads every rendered config with machinery's
// strict loader and validates it, and talos_strings_test.go fuzzes the tenant's strings
// through a render and a load.
//
// This used to be a local copy of the types and a hand-written YAML writer, kept for
// speed; measured in a whole reconcile (internal/controller/nodegroup's
// BenchmarkReconcile), render is a few percent of it, so the upstream types win.

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

	// The kubelet's default disk eviction thresholds (see talosKubeletSection).
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
	b, err := encoder.NewEncoder(cfg, encoder.WithComments(encoder.CommentsDisabled)).Encode()
	if err != nil {
		return "", fmt.Errorf("pool %s/%s: encoding the Talos machine config: %w", in.Namespace, in.Name, err)
	}
	return string(b), nil
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
func talosMachineConfig(in *Input) (*v1alpha1.Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	s := in.TalosSecrets
	if s == nil {
		// Nothing else can be rendered meaningfully without them.
		return nil, fmt.Errorf("the cluster's Talos secrets are missing (Secret %s-talos)", in.Cluster.Name)
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
		return nil, errors.Join(errs...)
	}

	endpoint := &url.URL{Scheme: "https", Host: net.JoinHostPort(c.ControlPlaneHost, strconv.Itoa(int(c.ControlPlanePort)))}
	return &v1alpha1.Config{
		ConfigVersion: "v1alpha1",
		MachineConfig: &v1alpha1.MachineConfig{
			MachineType:    "worker",
			MachineToken:   s.MachineToken,
			MachineCA:      talosCertificate(s.MachineCACert),
			MachineKubelet: kubelet,
			MachineNetwork: network,
			MachineInstall: install,
			MachineKernel:  kernel,
			MachineSysctls: sysctls,
		},
		ClusterConfig: &v1alpha1.ClusterConfig{
			ClusterID:     s.ClusterID,
			ClusterSecret: s.ClusterSecret,
			ControlPlane:  &v1alpha1.ControlPlaneConfig{Endpoint: &v1alpha1.Endpoint{URL: endpoint}},
			ClusterName:   c.Name,
			ClusterNetwork: &v1alpha1.ClusterNetworkConfig{
				DNSDomain:     c.DNSDomain,
				PodSubnet:     c.PodCIDRs,
				ServiceSubnet: c.ServiceCIDRs,
			},
			BootstrapToken: s.BootstrapToken,
			ClusterCA:      talosCertificate(s.ClusterCACert),
		},
	}, nil
}

// talosCertificate is a CA certificate for a worker: the certificate only, the key
// empty (Talos refuses CA keys on workers).
func talosCertificate(pem string) *x509.PEMEncodedCertificateAndKey {
	return &x509.PEMEncodedCertificateAndKey{Crt: []byte(pem)}
}

// talosKubeletSection is the kubelet: its image, the pool's node labels and taints, and
// the reservations from Reserve, the one source the autoscaler's capacity annotations
// read too, so what a node reports and what the autoscaler expects cannot disagree.
// Node-role labels are not set here: the kubelet may not set them, Cluster API syncs them.
func talosKubeletSection(in *Input) (*v1alpha1.KubeletConfig, []error) {
	var errs []error
	r := Reserve(in.Machine)
	// extraConfig is merged by Talos into the KubeletConfiguration: field names are
	// kubelet.config.k8s.io/v1beta1 ones, which Talos decodes strictly. evictionHard lists
	// every signal of the kubelet's default, not only memory: the kubelet does not merge a
	// partial evictionHard with its defaults, it sets every signal left out to zero, which
	// would silently turn disk-pressure eviction off.
	extra := map[string]any{
		"kubeReserved": map[string]any{
			"cpu":    MilliCPUString(r.KubeReservedMilliCPU),
			"memory": MemoryString(r.KubeReservedMemoryBytes),
		},
		"systemReserved": map[string]any{
			"cpu":               MilliCPUString(r.SystemReservedMilliCPU),
			"memory":            MemoryString(r.SystemReservedMemoryBytes),
			"ephemeral-storage": systemReservedEphemeralStorage,
			"pid":               systemReservedPID,
		},
		"evictionHard": map[string]any{
			"memory.available":   MemoryString(r.EvictionHardMemoryBytes),
			"nodefs.available":   evictionNodefsAvailable,
			"nodefs.inodesFree":  evictionNodefsInodesFree,
			"imagefs.available":  evictionImagefsAvailable,
			"imagefs.inodesFree": evictionImagefsInodesFree,
		},
		"maxPods": int(r.MaxPods),
	}
	k := &v1alpha1.KubeletConfig{
		KubeletImage:       kubeletImageRepository + ":" + in.KubernetesVersion,
		KubeletExtraConfig: v1alpha1.Unstructured{Object: extra},
	}
	if in.Cluster.TenantDNS != "" {
		k.KubeletClusterDNS = []string{in.Cluster.TenantDNS}
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
		// Only node-labels: everything else is configuration (extraConfig), which the
		// kubelet reads as structured data.
		k.KubeletExtraArgs = map[string]string{"node-labels": joinLabels(labels)}
	}

	if n := len(in.Spec.Taints); n > 0 {
		taints := make([]any, n)
		for i, t := range in.Spec.Taints {
			switch t.Effect {
			case "NoSchedule", "PreferNoSchedule", "NoExecute":
			default:
				errs = append(errs, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect))
			}
			if hasLineBreak(t.Key) || hasLineBreak(t.Value) {
				errs = append(errs, fmt.Errorf("taint %q: value %q: a key or value with a line break cannot be written into the machine config", t.Key, t.Value))
			}
			taint := map[string]any{"key": t.Key, "effect": string(t.Effect)}
			if t.Value != "" {
				taint["value"] = t.Value
			}
			taints[i] = taint
		}
		extra["registerWithTaints"] = taints
	}
	return k, errs
}

// talosNetworkSection points the worker at the management cluster's DNS and maps the
// tenant API server Service's names to its ClusterIP in /etc/hosts, so the control-plane
// endpoint resolves at first boot, before anything else is up. The search domains let the
// short Service names the endpoint may use resolve through that DNS later.
func talosNetworkSection(in *Input, bad func(string, ...any)) *v1alpha1.NetworkConfig {
	c := &in.Cluster
	var n v1alpha1.NetworkConfig
	if c.ManagementDNS != "" {
		n.NameServers = []string{c.ManagementDNS}
	}

	api := c.APIServer
	d := c.ManagementDNSDomain
	names := serviceNames(api, d)
	if api.ClusterIP != "" {
		if _, err := netip.ParseAddr(api.ClusterIP); err != nil {
			bad("the API server Service ClusterIP %q is not an IP address", api.ClusterIP)
		}
		if len(validation.IsDNS1123Label(api.Name)) > 0 || len(validation.IsDNS1123Label(api.Namespace)) > 0 {
			bad("the API server Service %q in namespace %q: names must be DNS labels", api.Name, api.Namespace)
		}
		aliases := names[:3]
		if d != "" {
			aliases = names[:]
		}
		n.ExtraHostEntries = []*v1alpha1.ExtraHost{{HostIP: api.ClusterIP, HostAliases: aliases}}
	}
	if d != "" {
		// The pod-like search domains of the Service's namespace: namespace.svc.domain,
		// svc.domain and domain, the tails of its full name.
		full := names[3]
		svcDomain := full[len(full)-len(d)-len("svc."):]
		if api.Namespace != "" {
			n.Searches = []string{full[len(api.Name)+1:], svcDomain, d}
		} else {
			n.Searches = []string{svcDomain, d}
		}
	}

	if n.NameServers == nil && n.Searches == nil && n.ExtraHostEntries == nil {
		return nil
	}
	return &n
}

// talosInstallSection is what the installer (and later upgrades) use: the pool's osImage
// when it names one, else the Image Factory installer of the pool's schematic (see
// talosSchematic), which carries the class's extensions: they are not listed here, as
// machine.install.extensions is deprecated in Talos.
func talosInstallSection(in *Input, bad func(string, ...any)) *v1alpha1.InstallConfig {
	disk := talosInstallDisk
	if pve := in.Location.Provider.Proxmox; pve != nil {
		disk = proxmoxInstallDisk(cmp.Or(pve.BootDisk, proxmoxBootDisk))
	}
	install := &v1alpha1.InstallConfig{InstallDisk: disk, InstallImage: in.Spec.OSImage}
	if install.InstallImage == "" {
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
		install.InstallImage = repo + "/" + id + ":" + in.Release.Talos.Version
	}
	if hasLineBreak(install.InstallImage) {
		bad("the installer image %q holds a line break", install.InstallImage)
	}
	if in.Class.Talos != nil && len(in.Class.Talos.KernelArgs) > 0 {
		for _, a := range in.Class.Talos.KernelArgs {
			// Talos joins these into the kernel command line with spaces.
			if a == "" || strings.ContainsAny(a, " \t\r\n") {
				bad("class %q: kernel argument %q is empty or contains whitespace", in.ClassName, a)
			}
		}
		install.InstallExtraKernelArgs = in.Class.Talos.KernelArgs
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
func talosKernelSection(in *Input, bad func(string, ...any)) *v1alpha1.KernelConfig {
	if len(in.Spec.KernelModules) == 0 {
		return nil
	}
	k := &v1alpha1.KernelConfig{KernelModules: make([]*v1alpha1.KernelModuleConfig, len(in.Spec.KernelModules))}
	for i, m := range in.Spec.KernelModules {
		if !validKernelModule(m) {
			bad("kernel module %q is not a module name (a-z, 0-9, '_', '-')", m)
		}
		k.KernelModules[i] = &v1alpha1.KernelModuleConfig{ModuleName: m}
	}
	return k
}

// talosSysctlSection copies the pool's sysctls. Talos writes each value to the file its
// name maps to under /proc/sys, so names are checked to stay there: components of a-z,
// 0-9, '_' and '-' between single separators, which leaves no "." or ".." path element
// however Talos maps the separators. Values are written as file content, no shell: data
// as is. Names are checked in sorted order, so the errors are the same on every render.
func talosSysctlSection(in *Input, bad func(string, ...any)) map[string]string {
	if in.Spec.Talos == nil || len(in.Spec.Talos.Sysctls) == 0 {
		return nil
	}
	out := make(map[string]string, len(in.Spec.Talos.Sysctls))
	for _, name := range slices.Sorted(maps.Keys(in.Spec.Talos.Sysctls)) {
		if !validSysctlName(name) {
			bad("sysctl %q is not a kernel parameter name", name)
		}
		v := string(in.Spec.Talos.Sysctls[name])
		if hasLineBreak(v) {
			bad("sysctl %q: value %q holds a line break", name, v)
		}
		out[name] = v
	}
	return out
}
