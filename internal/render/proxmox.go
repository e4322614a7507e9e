package render

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
)

var capmoxAPIVersion = capmox.GroupVersion.String()

const (
	// proxmoxNetDevice is the worker's one network device, the first capmox names.
	proxmoxNetDevice = "net0"
	proxmoxNICModel  = "virtio"
	// proxmoxBootDisk is the API's default of spec.provider.proxmox.bootDisk.
	proxmoxBootDisk = "scsi0"
	// proxmoxMatchPolicy: the template carries the location's tags and the release tag,
	// may carry more, and must be the only one that does.
	proxmoxMatchPolicy = "uniqueSubset"
	// proxmoxMinDiskGiB is the smallest boot volume capmox's CRD accepts.
	proxmoxMinDiskGiB = 5
	// proxmoxTalosTagPrefix + the Talos release is the tag of a pool's VM template.
	proxmoxTalosTagPrefix = "talos-"
)

// ProxmoxMachineTemplate renders the VM every machine of a pool on a Proxmox location
// gets, named after its content like every template.
func ProxmoxMachineTemplate(in *Input) (*capmox.ProxmoxMachineTemplate, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	t, err := proxmoxMachineTemplate(in)
	if err != nil {
		return nil, err
	}
	if err := nameTemplate(in, poolMetadata(in), t, &t.Spec); err != nil {
		return nil, err
	}
	return t, nil
}

// proxmoxBootstrapInput is the Input a Talos worker on a Proxmox location is configured
// from: it joins through the endpoint the location's workers reach the tenant's API
// server at (the satellite's), and nothing of the management cluster's Services is in
// its config (no /etc/hosts entry for the API server's ClusterIP, no management DNS
// server or search domains): those addresses mean nothing at another site. Its name
// servers are the location's, which capmox writes into the VM's network config. The
// Talos identity is the tenant's own, the main Cluster's.
func proxmoxBootstrapInput(in *Input) (*Input, error) {
	endpoint, err := proxmoxAPIServer(&SatelliteInput{
		Namespace: in.Namespace, Cluster: in.Cluster, LocationName: in.LocationName, Location: in.Location,
	})
	if err != nil {
		return nil, err
	}
	out := *in
	out.Cluster.ControlPlaneHost, out.Cluster.ControlPlanePort = endpoint.Host, endpoint.Port
	out.Cluster.APIServer = ServiceAddress{}
	out.Cluster.ManagementDNS, out.Cluster.ManagementDNSDomain = "", ""
	return &out, nil
}

// proxmoxInstallDisk is the device of a Proxmox VM's boot disk as Talos sees it: a
// virtio block device is /dev/vda; SCSI (virtio-scsi), SATA and IDE disks are /dev/sda,
// the boot disk being the VM's first disk.
func proxmoxInstallDisk(bootDisk string) string {
	if strings.HasPrefix(bootDisk, "virtio") {
		return "/dev/vda"
	}
	return "/dev/sda"
}

func proxmoxMachineTemplate(in *Input) (*capmox.ProxmoxMachineTemplate, error) {
	pve := in.Location.Provider.Proxmox
	if pve == nil {
		return nil, fmt.Errorf("location %q has no proxmox provider", in.LocationName)
	}
	if in.Class.OS != v1.OSTalos {
		return nil, fmt.Errorf("class %q: Proxmox locations run Talos pools only (their VM templates are chosen by Talos release): use a Talos class or a KubeVirt location", in.ClassName)
	}
	cores, memoryMiB, err := proxmoxSize(in.Machine)
	if err != nil {
		return nil, fmt.Errorf("pool %s/%s: %w", in.Namespace, in.Name, err)
	}
	// Compared before Value is taken: Value wraps a quantity above 2^64 bytes around to
	// a small one.
	var diskGiB int64
	if in.Spec.EphemeralStorage.Cmp(*resource.NewQuantity(math.MaxInt32<<30, resource.BinarySI)) <= 0 {
		diskGiB = (in.Spec.EphemeralStorage.Value() + (1<<30 - 1)) >> 30
	}
	if diskGiB < proxmoxMinDiskGiB || diskGiB > math.MaxInt32 {
		return nil, fmt.Errorf("pool %s/%s: spec.ephemeralStorage must be between %dGi and %dGi on a Proxmox location", in.Namespace, in.Name, proxmoxMinDiskGiB, math.MaxInt32)
	}
	bootDisk := pve.BootDisk
	if bootDisk == "" {
		bootDisk = proxmoxBootDisk
	}
	nic := capmox.NetworkDevice{Name: proxmoxNetDevice, Bridge: pve.Network.Bridge, Model: proxmoxNICModel}
	if pve.Network.VLAN != 0 {
		nic.VLAN = ptr(pve.Network.VLAN)
	}
	// The cluster's pools, which capmox makes of the ProxmoxCluster's ipv4Config and
	// ipv6Config, give this device its addresses.
	if pve.IPv4 != nil {
		nic.DefaultIPv4 = ptr(true)
	}
	if pve.IPv6 != nil {
		nic.DefaultIPv6 = ptr(true)
	}

	spec := capmox.ProxmoxMachineSpec{
		Storage:    pve.Storage,
		NumSockets: 1,
		NumCores:   cores,
		MemoryMiB:  memoryMiB,
		Disks:      capmox.Storage{BootVolume: capmox.DiskSize{Disk: bootDisk, SizeGB: int32(diskGiB)}},
		Network:    capmox.NetworkSpec{NetworkDevices: []capmox.NetworkDevice{nic}},
		// Talos runs no QEMU guest agent and no cloud-init for capmox to wait on.
		Checks: capmox.Checks{SkipQemuGuestAgent: true, SkipCloudInitStatus: true},
		// The providerID goes into the NoCloud metadata; Talos does not pass it on to the
		// kubelet (siderolabs/talos#14342), so the operator links Nodes itself.
		MetadataSettings: capmox.MetadataSettings{ProviderIDInjection: true},
		AllowedNodes:     sortedSet(pve.AllowedNodes),
	}
	if err := proxmoxTemplateSource(in, pve.Template, &spec); err != nil {
		return nil, err
	}
	return &capmox.ProxmoxMachineTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: capmoxAPIVersion, Kind: "ProxmoxMachineTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace},
		Spec:       capmox.ProxmoxMachineTemplateSpec{Template: capmox.ProxmoxMachineTemplateResource{Spec: spec}},
	}, nil
}

// proxmoxSize is the VM's cores (one socket) and memory in MiB, rounded up to the
// multiple of 8 capmox requires.
func proxmoxSize(m MachineSize) (cores, memoryMiB int32, err error) {
	c := (m.MilliCPU + 999) / 1000
	mib := (m.MemoryBytes + (1<<20 - 1)) >> 20
	mib = (mib + 7) / 8 * 8
	if c < 1 || c > math.MaxInt32 || mib < 8 || mib > math.MaxInt32 {
		return 0, 0, fmt.Errorf("machine size %dm CPU, %d bytes of memory does not fit a Proxmox VM: set spec.resources", m.MilliCPU, m.MemoryBytes)
	}
	return int32(c), int32(mib), nil
}

// proxmoxTemplateSource picks the pool's VM template by its Talos release: by tags (the
// location's and talos-<release>) or by the location's template ID for the release.
func proxmoxTemplateSource(in *Input, t v1.ProxmoxTemplate, spec *capmox.ProxmoxMachineSpec) error {
	release := in.Release.Talos.Version
	if release == "" {
		return fmt.Errorf("the catalog has no Talos release for Kubernetes %s", in.Release.Minor)
	}
	if len(t.IDs) > 0 {
		i := slices.IndexFunc(t.IDs, func(id v1.ProxmoxTemplateID) bool { return id.TalosVersion == release })
		if i < 0 {
			return fmt.Errorf("location %q has no VM template for Talos %s: add one to spec.provider.proxmox.template.ids", in.LocationName, release)
		}
		spec.SourceNode, spec.TemplateID = t.SourceNode, ptr(t.IDs[i].TemplateID)
		return nil
	}
	spec.TemplateSelector = &capmox.TemplateSelector{
		MatchTags:   sortedSet(append(slices.Clone(t.Tags), proxmoxTalosTagPrefix+release)),
		MatchPolicy: proxmoxMatchPolicy,
	}
	return nil
}

// SatelliteInput is what the InfraCluster of a tenant cluster's satellite on a location
// is rendered from.
type SatelliteInput struct {
	// Namespace of the tenant's Cluster, where the satellite lives.
	Namespace string
	// Cluster is the tenant's Cluster; its Name and control-plane endpoint are read.
	Cluster Cluster
	// LocationName and Location are the location.
	LocationName string
	Location     v1.LocationSpec
	// ControlPlaneVersion is the tenant control plane's desired Kubernetes version (its
	// KamajiControlPlane's spec.version), empty when unknown.
	ControlPlaneVersion string
}

// ProxmoxCluster renders the InfraCluster of a tenant cluster's satellite on a Proxmox
// location: the endpoint workers there reach the tenant's API server at, the location's
// address pools, DNS servers and nodes, and the operator's copy of the location's
// credentials in the tenant's namespace (capmox puts an owner reference and a finalizer
// on the Secret it reads, so it must not be the platform's own).
func ProxmoxCluster(in *SatelliteInput) (*capmox.ProxmoxCluster, error) {
	endpoint, err := satelliteEndpoint(in)
	if err != nil {
		return nil, err
	}
	pve := in.Location.Provider.Proxmox
	return &capmox.ProxmoxCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: capmoxAPIVersion, Kind: "ProxmoxCluster"},
		ObjectMeta: metav1.ObjectMeta{
			Name: names.SatelliteName(in.Cluster.Name, in.LocationName), Namespace: in.Namespace,
			Labels: SatelliteLabels(in),
		},
		Spec: capmox.ProxmoxClusterSpec{
			ControlPlaneEndpoint:        endpoint,
			ExternalManagedControlPlane: true,
			AllowedNodes:                sortedSet(pve.AllowedNodes),
			IPv4Config:                  ipConfig(pve.IPv4),
			IPv6Config:                  ipConfig(pve.IPv6),
			DNSServers:                  sortedSet(pve.DNSServers),
			CredentialsRef:              &capmox.SecretReference{Name: names.SatelliteCredentialsName(in.Cluster.Name, in.LocationName), Namespace: in.Namespace},
		},
	}, nil
}

// proxmoxAPIServer is where workers on the location reach the tenant's API server:
// <cluster>.<namespace>.<domain> when the location names a domain, else the tenant
// Cluster's own endpoint.
func proxmoxAPIServer(in *SatelliteInput) (capmox.APIEndpoint, error) {
	host, port := in.Cluster.ControlPlaneHost, in.Cluster.ControlPlanePort
	if s := in.Location.Provider.Proxmox.TenantAPIServer; s != nil {
		host = in.Cluster.Name + "." + in.Namespace + "." + s.Domain
		if s.Port != 0 {
			port = s.Port
		}
		if err := dnsName(host); err != nil {
			return capmox.APIEndpoint{}, fmt.Errorf("location %q: the tenant API server's name %q for workers there is not a DNS name (%v): shorten spec.provider.proxmox.tenantAPIServer.domain", in.LocationName, host, err)
		}
	}
	if host == "" || port < 1 || port > 65535 {
		return capmox.APIEndpoint{}, fmt.Errorf("cluster %q has no spec.controlPlaneEndpoint yet for workers on location %q to reach", in.Cluster.Name, in.LocationName)
	}
	// The Cluster's own endpoint is written by its control-plane provider, not checked by
	// any schema as a host: an address or a DNS name, nothing else, reaches the object.
	// An IPv6 zone ("fe80::1%eth0") is free text after the address: not reachable
	// from another site anyway, and refused like any host that is not a name.
	if addr, err := netip.ParseAddr(host); err != nil || addr.Zone() != "" {
		if err := dnsName(host); err != nil {
			return capmox.APIEndpoint{}, fmt.Errorf("cluster %q: spec.controlPlaneEndpoint.host %q is neither an IP address nor a DNS name (%v), so workers on location %q cannot be pointed at it", in.Cluster.Name, host, err, in.LocationName)
		}
	}
	return capmox.APIEndpoint{Host: host, Port: port}, nil
}

// dnsName refuses a host name that is not a DNS subdomain of labels of at most 63
// characters.
func dnsName(host string) error {
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	for _, label := range strings.Split(host, ".") {
		if len(label) > validation.DNS1123LabelMaxLength {
			return fmt.Errorf("label %q is longer than %d characters", label, validation.DNS1123LabelMaxLength)
		}
	}
	return nil
}

func ipConfig(p *v1.ProxmoxIPPool) *capmox.IPConfig {
	if p == nil {
		return nil
	}
	return &capmox.IPConfig{Addresses: sortedSet(p.Addresses), Prefix: p.Prefix, Gateway: p.Gateway}
}

// sortedSet is a copy of a list the API keeps as a set, sorted and without repeats, so
// its order in the Location never changes a rendered object.
func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
