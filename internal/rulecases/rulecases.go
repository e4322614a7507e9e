// Package rulecases holds the NodeGroups, NodeGroupClasses and Locations the CRDs' rule
// tests send to a real API server (api/v1alpha1), each with the verdict it must get, so
// that other checkers of the same rules (the kubectl plugin's offline validation) are
// held to the same table. Only tests import it.
package rulecases

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// Case is a pool the API server must accept (WantErr empty) or refuse with a message
// containing WantErr.
type Case struct {
	Name    string
	Obj     *v1.NodeGroup
	WantErr string
}

// ObjectCase is a case of another kind of the API: a NodeGroupClass or a Location.
type ObjectCase struct {
	Name    string
	Obj     client.Object
	WantErr string
}

// Pool is a valid NodeGroup that each case changes in one way.
func Pool(name string, mutate func(*v1.NodeGroupSpec)) *v1.NodeGroup {
	ng := &v1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.NodeGroupSpec{
			ClusterName: "tenant-a",
			MinReplicas: 1,
			MaxReplicas: 3,
			Resources:   &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
		},
	}
	if mutate != nil {
		mutate(&ng.Spec)
	}
	return ng
}

// NodeGroups are the cases of the NodeGroup CRD's rules, in namespace "default".
func NodeGroups() []Case {
	pool := Pool
	return []Case{
		{Name: "minimal pool", Obj: pool("minimal", nil)},
		{Name: "fixed size pool", Obj: pool("fixed", func(s *v1.NodeGroupSpec) { s.MinReplicas, s.MaxReplicas = 3, 3 })},
		{Name: "from zero", Obj: pool("zero", func(s *v1.NodeGroupSpec) { s.MinReplicas = 0 })},
		{Name: "min above max refused", Obj: pool("min-max", func(s *v1.NodeGroupSpec) { s.MinReplicas, s.MaxReplicas = 4, 3 }),
			WantErr: "spec.minReplicas must not exceed spec.maxReplicas"},
		{Name: "max above bound refused", Obj: pool("max-bound", func(s *v1.NodeGroupSpec) { s.MaxReplicas = 1001 }),
			WantErr: "spec.maxReplicas: Invalid value: 1001: spec.maxReplicas in body should be less than or equal to 1000"},
		{Name: "instance type", Obj: pool("itype", func(s *v1.NodeGroupSpec) { s.Resources, s.InstanceType = nil, "u1.large" })},
		{Name: "resources and instance type refused", Obj: pool("both", func(s *v1.NodeGroupSpec) { s.InstanceType = "u1.large" }),
			WantErr: "set exactly one of spec.resources and spec.instanceType"},
		{Name: "neither resources nor instance type refused", Obj: pool("neither", func(s *v1.NodeGroupSpec) { s.Resources = nil }),
			WantErr: "set exactly one of spec.resources and spec.instanceType"},
		{Name: "zero cpu refused", Obj: pool("zero-cpu", func(s *v1.NodeGroupSpec) { s.Resources.CPU = resource.MustParse("0") }),
			WantErr: "spec.resources.cpu must be a whole number of virtual CPUs between 1 and 256"},
		// A VM gets whole cores: 1500m would boot 2 while the autoscaler's capacity and the
		// kubelet's reservations were sized for 1.5.
		{Name: "fractional cpu refused", Obj: pool("half-cpu", func(s *v1.NodeGroupSpec) { s.Resources.CPU = resource.MustParse("1500m") }),
			WantErr: "spec.resources.cpu must be a whole number of virtual CPUs between 1 and 256"},
		{Name: "cpu above bound refused", Obj: pool("many-cpu", func(s *v1.NodeGroupSpec) { s.Resources.CPU = resource.MustParse("257") }),
			WantErr: "spec.resources.cpu must be a whole number of virtual CPUs between 1 and 256"},
		{Name: "cpu in thousands of millicores", Obj: pool("milli-cpu", func(s *v1.NodeGroupSpec) { s.Resources.CPU = resource.MustParse("2000m") })},
		{Name: "tiny memory refused", Obj: pool("tiny-mem", func(s *v1.NodeGroupSpec) { s.Resources.Memory = resource.MustParse("512Mi") }),
			WantErr: "spec.resources.memory must be between 1Gi and 4Ti"},
		{Name: "taints with each effect", Obj: pool("taints", func(s *v1.NodeGroupSpec) {
			s.Taints = []v1.Taint{{Key: "gpu", Value: "true", Effect: "NoSchedule"}, {Key: "example.com/a", Effect: "PreferNoSchedule"}, {Key: "b", Effect: "NoExecute"}}
		})},
		{Name: "unknown taint effect refused", Obj: pool("taint-effect", func(s *v1.NodeGroupSpec) {
			s.Taints = []v1.Taint{{Key: "gpu", Effect: "NoWay"}}
		}), WantErr: `spec.taints[0].effect: Unsupported value: "NoWay"`},
		{Name: "hostile taint key refused", Obj: pool("taint-key", func(s *v1.NodeGroupSpec) {
			s.Taints = []v1.Taint{{Key: "a;rm -rf /", Effect: "NoSchedule"}}
		}), WantErr: "spec.taints[].key must be a valid label key"},
		{Name: "hostile taint value refused", Obj: pool("taint-value", func(s *v1.NodeGroupSpec) {
			s.Taints = []v1.Taint{{Key: "a", Value: "$(reboot)", Effect: "NoSchedule"}}
		}), WantErr: "spec.taints[].value must be a valid label value"},
		{Name: "labels with prefix", Obj: pool("labels", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{"example.com/team": "a", "tier": "web", "empty": ""}
		})},
		{Name: "label key with a space refused", Obj: pool("label-key", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{"bad key": "a"}
		}), WantErr: "spec.labels keys must be valid label keys"},
		{Name: "label name over 63 refused", Obj: pool("label-long", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{strings.Repeat("a", 64): "a"}
		}), WantErr: "spec.labels keys must be valid label keys"},
		{Name: "reserved label domain refused", Obj: pool("label-reserved", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{"node-role.kubernetes.io/control-plane": ""}
		}), WantErr: "spec.labels keys in the kubernetes.io, k8s.io and nodegroup.io domains are reserved"},
		{Name: "hostile label value refused", Obj: pool("label-value", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{"a": "x\ny"}
		}), WantErr: "spec.labels values must be valid label values"},
		{Name: "roles", Obj: pool("roles", func(s *v1.NodeGroupSpec) { s.Roles = []string{"worker", "ingress"} })},
		{Name: "role with slash refused", Obj: pool("role-slash", func(s *v1.NodeGroupSpec) { s.Roles = []string{"a/b"} }),
			WantErr: "a role must be a valid label name"},
		{Name: "minor version", Obj: pool("minor", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.35" })},
		{Name: "patch version", Obj: pool("patch", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.35.4" })},
		{Name: "version without v refused", Obj: pool("nov", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "1.35" }),
			WantErr: "spec.kubernetesVersion must look like v1.35 or v1.35.4"},
		{Name: "version with suffix refused", Obj: pool("suffix", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.35.4-rc.0" }),
			WantErr: "spec.kubernetesVersion must look like v1.35 or v1.35.4"},
		{Name: "talos fields on talos class", Obj: pool("talos-fields", func(s *v1.NodeGroupSpec) {
			s.OSImage = "factory.talos.dev/installer/abc:v1.11.0"
			s.KernelModules = []string{"nvidia"}
			s.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", Count: 1}}
			s.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net.core.somaxconn": "65535"}}
		})},
		{Name: "osImage refused on kairos", Obj: pool("kairos-osimage", func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.OSImage = "kairos", "factory.talos.dev/installer/abc:v1.11.0"
		}), WantErr: v1.TalosOnlyFieldsMessage},
		{Name: "kernelModules refused on kairos", Obj: pool("kairos-modules", func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.KernelModules = "kairos", []string{"nvidia"}
		}), WantErr: v1.TalosOnlyFieldsMessage},
		{Name: "gpus refused on kairos", Obj: pool("kairos-gpus", func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.GPUs = "kairos", []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10"}}
		}), WantErr: v1.TalosOnlyFieldsMessage},
		{Name: "talos block refused on kairos", Obj: pool("kairos-talos", func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.Talos = "kairos", &v1.NodeGroupTalos{}
		}), WantErr: v1.TalosOnlyFieldsMessage},
		{Name: "plain kairos pool", Obj: pool("kairos-plain", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = "kairos" })},
		{Name: "gpu with a tenant resource name", Obj: pool("gpu-resource", func(s *v1.NodeGroupSpec) {
			s.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", ResourceName: "nvidia.com/mig-1g.10gb"}}
		})},
		{Name: "gpu resource name without a domain refused", Obj: pool("gpu-resource-bare", func(s *v1.NodeGroupSpec) {
			s.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", ResourceName: "gpu"}}
		}), WantErr: "spec.gpus[0].resourceName"},
		{Name: "autoscaling options", Obj: pool("autoscaling", func(s *v1.NodeGroupSpec) {
			s.MinReplicas, s.MaxReplicas = 0, 5
			s.Autoscaling = &v1.Autoscaling{ScaleDownUnneededTime: &metav1.Duration{Duration: 5 * time.Minute},
				ScaleDownUtilizationThreshold: "0.5", ScaleDownGPUUtilizationThreshold: "1", MaxNodeProvisionTime: &metav1.Duration{Duration: 20 * time.Minute}}
		})},
		{Name: "utilization threshold above 1 refused", Obj: pool("threshold-high", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{ScaleDownUtilizationThreshold: "1.5"}
		}), WantErr: "spec.autoscaling.scaleDownUtilizationThreshold must be a decimal between 0 and 1"},
		{Name: "gpu utilization threshold not a number refused", Obj: pool("threshold-nan", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{ScaleDownGPUUtilizationThreshold: "half"}
		}), WantErr: "spec.autoscaling.scaleDownGPUUtilizationThreshold must be a decimal between 0 and 1"},
		{Name: "negative unneeded time refused", Obj: pool("unneeded-negative", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{ScaleDownUnneededTime: &metav1.Duration{Duration: -time.Minute}}
		}), WantErr: "spec.autoscaling.scaleDownUnneededTime must be a duration between 0s and 24h"},
		{Name: "provision time too short refused", Obj: pool("provision-short", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{MaxNodeProvisionTime: &metav1.Duration{Duration: time.Second}}
		}), WantErr: "spec.autoscaling.maxNodeProvisionTime must be a duration between 1m and 24h"},
		{Name: "startup time too long refused", Obj: pool("startup-long", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{MaxNodeStartupTime: &metav1.Duration{Duration: 48 * time.Hour}}
		}), WantErr: "spec.autoscaling.maxNodeStartupTime must be a duration between 1m and 24h"},
		{Name: "unready time too long refused", Obj: pool("unready-long", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{ScaleDownUnreadyTime: &metav1.Duration{Duration: 25 * time.Hour}}
		}), WantErr: "spec.autoscaling.scaleDownUnreadyTime must be a duration between 0s and 24h"},
		{Name: "hostile sysctl refused", Obj: pool("sysctl", func(s *v1.NodeGroupSpec) {
			s.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"kernel.x": "1; reboot"}}
		}), WantErr: "spec.talos.sysctls values must be plain values"},
		{Name: "sysctl key escaping /proc/sys refused", Obj: pool("sysctl-path", func(s *v1.NodeGroupSpec) {
			s.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net/../../../var/lib/x": "1"}}
		}), WantErr: "spec.talos.sysctls keys must be kernel parameter names"},
		{Name: "unpinned osImage with shell refused", Obj: pool("osimage-shell", func(s *v1.NodeGroupSpec) { s.OSImage = "x`id`" }),
			WantErr: "spec.osImage must be an image reference"},
		{Name: "rollout and health check", Obj: pool("rollout", func(s *v1.NodeGroupSpec) {
			s.Rollout = &v1.Rollout{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromString("25%"))}
			s.HealthCheck = &v1.HealthCheck{UnhealthyNotReadyTimeout: &metav1.Duration{Duration: 300e9},
				NodeStartupTimeout: &metav1.Duration{Duration: 20 * time.Minute}, MaxUnhealthy: ptr.To(intstr.FromString("40%"))}
		})},
		{Name: "negative maxSurge refused", Obj: pool("surge-negative", func(s *v1.NodeGroupSpec) {
			s.Rollout = &v1.Rollout{MaxSurge: ptr.To(intstr.FromInt32(-1))}
		}), WantErr: "spec.rollout.maxSurge must be a whole number of machines or a percentage"},
		{Name: "maxUnavailable neither number nor percentage refused", Obj: pool("unavailable-word", func(s *v1.NodeGroupSpec) {
			s.Rollout = &v1.Rollout{MaxUnavailable: ptr.To(intstr.FromString("half"))}
		}), WantErr: "spec.rollout.maxUnavailable must be a whole number of machines or a percentage"},
		{Name: "maxUnhealthy with a fraction refused", Obj: pool("unhealthy-fraction", func(s *v1.NodeGroupSpec) {
			s.HealthCheck = &v1.HealthCheck{MaxUnhealthy: ptr.To(intstr.FromString("12.5%"))}
		}), WantErr: "spec.healthCheck.maxUnhealthy must be a whole number of machines or a percentage"},
		{Name: "health check timeout over a day refused", Obj: pool("startup-timeout-long", func(s *v1.NodeGroupSpec) {
			s.HealthCheck = &v1.HealthCheck{NodeStartupTimeout: &metav1.Duration{Duration: 25 * time.Hour}}
		}), WantErr: "spec.healthCheck.nodeStartupTimeout must be a duration between 0s and 24h"},
	}
}

// AsSent is obj, an object of the API, as a client sends it: its JSON, read back as the
// API server reads a body.
func AsSent(t testing.TB, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, scheme.New())
	if err != nil {
		t.Fatal(err)
	}
	obj = obj.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Class is a cluster-scoped NodeGroupClass.
func Class(name string, spec v1.NodeGroupClassSpec) *v1.NodeGroupClass {
	return &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func kairosImage(ref, version string) *v1.ClassImage {
	return &v1.ClassImage{Reference: ref, KubernetesVersion: version}
}

// Classes are the cases of the NodeGroupClass CRD's rules.
func Classes() []ObjectCase {
	class := Class
	return []ObjectCase{
		{Name: "talos class with extensions", Obj: class("gpu-talos", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, Talos: &v1.TalosClassSpec{Extensions: []string{"siderolabs/nvidia-container-toolkit-lts"}}})},
		{Name: "kairos class with a pinned image", Obj: class("kairos-own", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos@"+digest, "v1.35.4")})},
		{Name: "image refused on talos", Obj: class("talos-image", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, Image: kairosImage("registry.example.com/w@"+digest, "v1.35.4")}),
			WantErr: "spec.image is only for os Kairos"},
		{Name: "image by tag refused", Obj: class("kairos-tag", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos:v1.35.4", "v1.35.4")}),
			WantErr: "spec.image.reference must be pinned by digest"},
		{Name: "image with short digest refused", Obj: class("kairos-short", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos@sha256:abc", "v1.35.4")}),
			WantErr: "spec.image.reference must be pinned by digest"},
		{Name: "image version without patch refused", Obj: class("kairos-minor", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos@"+digest, "v1.35")}),
			WantErr: "spec.image.kubernetesVersion must be a full release"},
		{Name: "image without version refused", Obj: class("kairos-noversion", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos@"+digest, "")}),
			WantErr: "spec.image.kubernetesVersion must be a full release"},
		{Name: "talos block refused on kairos", Obj: class("kairos-talos", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Talos: &v1.TalosClassSpec{KernelArgs: []string{"quiet"}}}),
			WantErr: "spec.talos is only for os Talos"},
		{Name: "kairos block refused on talos", Obj: class("talos-kairos", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, Kairos: &v1.KairosClassSpec{}}),
			WantErr: "spec.kairos is only for os Kairos"},
		{Name: "unknown os refused", Obj: class("beos", v1.NodeGroupClassSpec{OS: "BeOS"}),
			WantErr: `spec.os: Unsupported value: "BeOS"`},
		{Name: "built-in talos canonical", Obj: class("talos", v1.NodeGroupClassSpec{OS: v1.OSTalos})},
		{Name: "built-in talos with kairos os refused", Obj: class("talos", v1.NodeGroupClassSpec{OS: v1.OSKairos}),
			WantErr: "the built-in class 'talos' must be exactly {os: Talos}"},
		{Name: "built-in talos with extensions refused", Obj: class("talos", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, Talos: &v1.TalosClassSpec{Extensions: []string{"siderolabs/iscsi-tools"}}}),
			WantErr: "the built-in class 'talos' must be exactly {os: Talos}"},
		{Name: "built-in talos with pool rules refused", Obj: class("talos", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, PoolRules: []v1.PoolRule{{Rule: "true", Message: "m"}}}),
			WantErr: "the built-in class 'talos' must be exactly {os: Talos}"},
		{Name: "built-in kairos canonical", Obj: class("kairos", v1.NodeGroupClassSpec{OS: v1.OSKairos})},
		{Name: "built-in kairos with image refused", Obj: class("kairos", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/w/kairos@"+digest, "v1.35.4")}),
			WantErr: "the built-in class 'kairos' must have os Kairos and no image"},
		{Name: "built-in kairos with talos os refused", Obj: class("kairos", v1.NodeGroupClassSpec{OS: v1.OSTalos}),
			WantErr: "the built-in class 'kairos' must have os Kairos and no image"},
	}
}

// KubeVirtLocation is a valid Location on KubeVirt, which each location case changes
// in one way.
func KubeVirtLocation(name string) *v1.Location {
	return &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.LocationSpec{
		Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{StorageClassName: "replicated"}},
		Region:   "eu-central", Zone: "fsn1-a",
		AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "true"}},
	}}
}

// ProxmoxLocation is a valid Location on Proxmox VE, which each Proxmox case changes in
// one way.
func ProxmoxLocation(name string, mutate func(*v1.ProxmoxProvider)) *v1.Location {
	pve := &v1.ProxmoxProvider{
		CredentialsRef:  v1.SecretReference{Namespace: "platform", Name: "pve-lab"},
		TenantAPIServer: &v1.ProxmoxTenantAPIServer{Domain: "k8s.lab.example.com", Port: 443},
		IPv4:            &v1.ProxmoxIPPool{Addresses: []string{"10.20.0.10-10.20.0.99", "10.20.1.0/25", "10.20.2.7"}, Prefix: 16, Gateway: "10.20.0.1"},
		DNSServers:      []string{"10.20.0.2", "2001:db8::53"},
		AllowedNodes:    []string{"pve1", "pve2"},
		Network:         v1.ProxmoxNetwork{Bridge: "vmbr0", VLAN: 120},
		Template:        v1.ProxmoxTemplate{Tags: []string{"talos", "worker"}},
	}
	if mutate != nil {
		mutate(pve)
	}
	return &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.LocationSpec{
		Provider: v1.LocationProvider{Type: v1.ProviderProxmox, Proxmox: pve},
		Region:   "eu-central", Zone: "lab",
	}}
}

// proxmoxLocations are the cases of the Proxmox provider's rules.
func proxmoxLocations() []ObjectCase {
	pve := ProxmoxLocation
	return []ObjectCase{
		{Name: "proxmox location", Obj: pve("pve-lab", nil)},
		{Name: "proxmox dual stack", Obj: pve("pve-dual", func(p *v1.ProxmoxProvider) {
			p.IPv6 = &v1.ProxmoxIPPool{Addresses: []string{"2001:db8:1::10-2001:db8:1::ff", "2001:db8:2::/120"}, Prefix: 64, Gateway: "2001:db8:1::1"}
		})},
		{Name: "proxmox ipv6 only", Obj: pve("pve-v6", func(p *v1.ProxmoxProvider) {
			p.IPv4, p.IPv6 = nil, &v1.ProxmoxIPPool{Addresses: []string{"2001:db8:1::10"}, Prefix: 64, Gateway: "fe80::1"}
		})},
		{Name: "proxmox templates by id", Obj: pve("pve-ids", func(p *v1.ProxmoxProvider) {
			p.Template = v1.ProxmoxTemplate{SourceNode: "pve1", IDs: []v1.ProxmoxTemplateID{{TalosVersion: "v1.11.5", TemplateID: 9000}}}
		})},
		{Name: "proxmox with the tenant's own endpoint", Obj: pve("pve-own-endpoint", func(p *v1.ProxmoxProvider) { p.TenantAPIServer = nil })},
		{Name: "proxmox without a pool refused", Obj: pve("pve-nopool", func(p *v1.ProxmoxProvider) { p.IPv4 = nil }),
			WantErr: "spec.provider.proxmox must set ipv4, ipv6 or both"},
		{Name: "proxmox ipv6 address in ipv4 refused", Obj: pve("pve-v4-family", func(p *v1.ProxmoxProvider) { p.IPv4.Addresses = []string{"2001:db8::1"} }),
			WantErr: "spec.provider.proxmox.ipv4.addresses must be IPv4 addresses, ranges (first-last) or CIDRs"},
		{Name: "proxmox malformed range refused", Obj: pve("pve-v4-range", func(p *v1.ProxmoxProvider) { p.IPv4.Addresses = []string{"10.0.0.1-10.0.0.2-10.0.0.3"} }),
			WantErr: "spec.provider.proxmox.ipv4.addresses must be IPv4 addresses, ranges (first-last) or CIDRs"},
		{Name: "proxmox hostname as address refused", Obj: pve("pve-v4-name", func(p *v1.ProxmoxProvider) { p.IPv4.Addresses = []string{"pool.example.com"} }),
			WantErr: "spec.provider.proxmox.ipv4.addresses must be IPv4 addresses, ranges (first-last) or CIDRs"},
		{Name: "proxmox ipv4 address in ipv6 refused", Obj: pve("pve-v6-family", func(p *v1.ProxmoxProvider) {
			p.IPv6 = &v1.ProxmoxIPPool{Addresses: []string{"10.0.0.0/24"}, Prefix: 64, Gateway: "2001:db8::1"}
		}), WantErr: "spec.provider.proxmox.ipv6.addresses must be IPv6 addresses, ranges (first-last) or CIDRs"},
		{Name: "proxmox ipv4 gateway not an address refused", Obj: pve("pve-v4-gw", func(p *v1.ProxmoxProvider) { p.IPv4.Gateway = "gw.example.com" }),
			WantErr: "spec.provider.proxmox.ipv4.gateway must be an IPv4 address"},
		{Name: "proxmox ipv6 gateway of ipv4 refused", Obj: pve("pve-v6-gw", func(p *v1.ProxmoxProvider) {
			p.IPv6 = &v1.ProxmoxIPPool{Addresses: []string{"2001:db8::10"}, Prefix: 64, Gateway: "10.0.0.1"}
		}), WantErr: "spec.provider.proxmox.ipv6.gateway must be an IPv6 address"},
		{Name: "proxmox ipv4 prefix above 32 refused", Obj: pve("pve-v4-prefix", func(p *v1.ProxmoxProvider) { p.IPv4.Prefix = 33 }),
			WantErr: "spec.provider.proxmox.ipv4.prefix must be between 1 and 32"},
		{Name: "proxmox dns server not an address refused", Obj: pve("pve-dns", func(p *v1.ProxmoxProvider) { p.DNSServers = []string{"dns.example.com"} }),
			WantErr: "spec.provider.proxmox.dnsServers must be IP addresses"},
		{Name: "proxmox without dns servers refused", Obj: pve("pve-nodns", func(p *v1.ProxmoxProvider) { p.DNSServers = nil }),
			WantErr: "spec.provider.proxmox.dnsServers: Required value"},
		{Name: "proxmox template by tags and ids refused", Obj: pve("pve-both", func(p *v1.ProxmoxProvider) {
			p.Template.IDs, p.Template.SourceNode = []v1.ProxmoxTemplateID{{TalosVersion: "v1.11.5", TemplateID: 9000}}, "pve1"
		}), WantErr: "spec.provider.proxmox.template must set exactly one of tags and ids"},
		{Name: "proxmox template by neither refused", Obj: pve("pve-neither", func(p *v1.ProxmoxProvider) { p.Template.Tags = nil }),
			WantErr: "spec.provider.proxmox.template must set exactly one of tags and ids"},
		{Name: "proxmox template ids without source node refused", Obj: pve("pve-nosource", func(p *v1.ProxmoxProvider) {
			p.Template = v1.ProxmoxTemplate{IDs: []v1.ProxmoxTemplateID{{TalosVersion: "v1.11.5", TemplateID: 9000}}}
		}), WantErr: "spec.provider.proxmox.template.sourceNode is required with template.ids, and only with them"},
		{Name: "proxmox source node with tags refused", Obj: pve("pve-tags-source", func(p *v1.ProxmoxProvider) { p.Template.SourceNode = "pve1" }),
			WantErr: "spec.provider.proxmox.template.sourceNode is required with template.ids, and only with them"},
		{Name: "proxmox template tag with a space refused", Obj: pve("pve-tag", func(p *v1.ProxmoxProvider) { p.Template.Tags = []string{"talos worker"} }),
			WantErr: "spec.provider.proxmox.template.tags[0]: Invalid value"},
		{Name: "proxmox template id of a minor refused", Obj: pve("pve-id-minor", func(p *v1.ProxmoxProvider) {
			p.Template = v1.ProxmoxTemplate{SourceNode: "pve1", IDs: []v1.ProxmoxTemplateID{{TalosVersion: "v1.11", TemplateID: 9000}}}
		}), WantErr: "spec.provider.proxmox.template.ids[0].talosVersion: Invalid value"},
		{Name: "proxmox bridge with a slash refused", Obj: pve("pve-bridge", func(p *v1.ProxmoxProvider) { p.Network.Bridge = "vmbr0/../x" }),
			WantErr: "spec.provider.proxmox.network.bridge: Invalid value"},
		{Name: "proxmox vlan out of range refused", Obj: pve("pve-vlan", func(p *v1.ProxmoxProvider) { p.Network.VLAN = 4095 }),
			WantErr: "spec.provider.proxmox.network.vlan: Invalid value: 4095"},
		{Name: "proxmox node name with a dot refused", Obj: pve("pve-node", func(p *v1.ProxmoxProvider) { p.AllowedNodes = []string{"pve1.example.com"} }),
			WantErr: "spec.provider.proxmox.allowedNodes[0]: Invalid value"},
		{Name: "proxmox endpoint domain with a scheme refused", Obj: pve("pve-domain", func(p *v1.ProxmoxProvider) { p.TenantAPIServer.Domain = "https://k8s.example.com" }),
			WantErr: "spec.provider.proxmox.tenantAPIServer.domain: Invalid value"},
		{Name: "proxmox endpoint port out of range refused", Obj: pve("pve-port", func(p *v1.ProxmoxProvider) { p.TenantAPIServer.Port = 65536 }),
			WantErr: "spec.provider.proxmox.tenantAPIServer.port: Invalid value: 65536"},
		{Name: "proxmox boot disk of no bus refused", Obj: pve("pve-disk", func(p *v1.ProxmoxProvider) { p.BootDisk = "nvme0" }),
			WantErr: "spec.provider.proxmox.bootDisk: Invalid value"},
	}
}

// Locations are the cases of the Location CRD's rules.
func Locations() []ObjectCase {
	two := KubeVirtLocation("two-providers")
	two.Spec.Provider.HCloud = &v1.HCloudProvider{CredentialsRef: v1.SecretReference{Namespace: "p", Name: "hcloud"}, Location: "fsn1"}
	none := KubeVirtLocation("no-provider")
	none.Spec.Provider.KubeVirt = nil
	mismatch := KubeVirtLocation("mismatch")
	mismatch.Spec.Provider.Type = v1.ProviderProxmox
	cases := []ObjectCase{
		{Name: "kubevirt location", Obj: KubeVirtLocation("fsn1")},
		{Name: "two providers refused", Obj: two, WantErr: "spec.provider must set exactly one of kubevirt, proxmox, hcloud, static"},
		{Name: "no provider refused", Obj: none, WantErr: "spec.provider must set exactly one of kubevirt, proxmox, hcloud, static"},
		{Name: "type naming another block refused", Obj: mismatch, WantErr: "spec.provider.type must name the provider block that is set"},
	}
	return append(cases, proxmoxLocations()...)
}
