package render

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/golden"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// baseInput is a default Talos pool with fixed secrets (checked-in test CAs), so golden
// files are stable.
func baseInput(t testing.TB) *Input {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cat := catalog.Default()
	rel, ok := cat.Lookup("v1.35")
	if !ok {
		t.Fatal("catalog has no v1.35")
	}
	return &Input{
		Namespace: "tenant-a",
		Name:      "workers",
		Spec: v1.NodeGroupSpec{
			ClusterName: "tenant-a", NodeGroupClassName: "talos", LocationName: "in-cluster",
			MinReplicas: 1, MaxReplicas: 3,
			Resources:        &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
			EphemeralStorage: resource.MustParse("20Gi"),
		},
		ClassName:    "talos",
		Class:        v1.NodeGroupClassSpec{OS: v1.OSTalos},
		LocationName: "in-cluster",
		Location: v1.LocationSpec{Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt,
			KubeVirt: &v1.KubeVirtProvider{EvictionStrategy: "External"}}},
		Cluster: Cluster{
			Name: "tenant-a", ControlPlaneHost: "tenant-a.tenant-a.svc", ControlPlanePort: 6443,
			ServiceCIDRs: []string{"10.95.0.0/16"}, PodCIDRs: []string{"10.244.0.0/16"}, DNSDomain: "cluster.local",
			TenantDNS:     "10.95.0.10",
			APIServer:     ServiceAddress{Name: "tenant-a", Namespace: "tenant-a", ClusterIP: "10.96.12.34"},
			ManagementDNS: "10.96.0.10", ManagementDNSDomain: "cluster.local",
		},
		Release:           rel,
		Factory:           cat.TalosFactory,
		KubernetesVersion: rel.Kubernetes,
		Machine:           MachineSize{MilliCPU: 2000, MemoryBytes: 4 << 30},
		TalosSecrets: &TalosSecrets{
			MachineToken: "w7ysn3.2ti4qmz2k6ajb9nt", MachineCACert: read("machine-ca.crt"), ClusterCACert: read("cluster-ca.crt"),
			ClusterID: "Nhx0p0XcSPVpeFbSiGrMbT6cVTuqc1UwIuJ0jZ_6rzI=", ClusterSecret: "bx4j3zGGpZ1lx1D0dw4XzVLHzJ8lwnhc0eMdQ+k6sF0=",
			BootstrapToken: "abcdef.0123456789abcdef",
		},
	}
}

// goldenCases are the render cases held by golden files in testdata/.
func goldenCases(t testing.TB) map[string]*Input {
	with := func(f func(in *Input)) *Input {
		in := baseInput(t)
		f(in)
		return in
	}
	kairosBase := func(f func(in *Input)) *Input {
		return with(func(in *Input) {
			in.ClassName, in.Spec.NodeGroupClassName = "kairos", "kairos"
			in.Class = v1.NodeGroupClassSpec{OS: v1.OSKairos}
			in.TalosSecrets = nil
			in.Release.Kairos.Disk = "registry.example.com/nodegroup/kairos-worker@sha256:" + strings.Repeat("ab", 32)
			in.KairosUserSecret = "tenant-a-kairos-user"
			if f != nil {
				f(in)
			}
		})
	}
	return map[string]*Input{
		"kairos-default": kairosBase(nil),
		"kairos-class-image": kairosBase(func(in *Input) {
			in.ClassName, in.Spec.NodeGroupClassName = "kairos-own", "kairos-own"
			in.Class = v1.NodeGroupClassSpec{OS: v1.OSKairos,
				Image:  &v1.ClassImage{Reference: "registry.example.com/platform/kairos@sha256:" + strings.Repeat("cd", 32), KubernetesVersion: "v1.35.2"},
				Kairos: &v1.KairosClassSpec{SSHAuthorizedKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGl8 platform@example.com"},
			}
			in.KubernetesVersion = "v1.35.2"
			in.ImagePullSecret = "nodegroup-pull-kairos-own"
			in.Spec.Labels = map[string]v1.LabelValue{"tier": "web"}
			in.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "web", Effect: "NoSchedule"}}
		}),
		"kairos-gpu-refused": kairosBase(func(in *Input) {
			in.Spec.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", Count: 1}}
			in.Spec.KernelModules = []string{"nvidia"}
		}),
		"kairos-talos-refused": kairosBase(func(in *Input) {
			in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net.core.somaxconn": "65535"}}
		}),
		"kairos-hostile-strings": kairosBase(func(in *Input) {
			in.Spec.Labels = map[string]v1.LabelValue{"a": "{{ .Values.x }}", "b": "x,node-role.kubernetes.io/control-plane=y"}
		}),
		"kairos-yaml-lookalike-strings": kairosBase(func(in *Input) {
			in.Spec.Labels = map[string]v1.LabelValue{"a": "true", "b": "null", "c": "0x1F"}
			in.Spec.Taints = []v1.Taint{{Key: "yes", Value: "no", Effect: "NoExecute"}}
		}),
		"kairos-address-change": kairosBase(func(in *Input) {
			in.Cluster.APIServer.ClusterIP = "10.96.200.7"
		}),
		"talos-default": baseInput(t),
		"autoscaled-from-zero": with(func(in *Input) {
			in.Spec.MinReplicas, in.Spec.MaxReplicas = 0, 10
		}),
		"fixed-size": with(func(in *Input) { in.Spec.MinReplicas, in.Spec.MaxReplicas = 3, 3 }),
		"instancetype": with(func(in *Input) {
			in.Spec.Resources, in.Spec.InstanceType = nil, "u1.xlarge"
			in.Machine = MachineSize{MilliCPU: 4000, MemoryBytes: 16 << 30, InstanceType: "u1.xlarge"}
		}),
		"resources-large": with(func(in *Input) {
			in.Spec.Resources = &v1.MachineResources{CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}
			in.Machine = MachineSize{MilliCPU: 16000, MemoryBytes: 64 << 30}
			in.Spec.EphemeralStorage = resource.MustParse("100Gi")
		}),
		"roles": with(func(in *Input) { in.Spec.Roles = []string{"worker", "ingress"} }),
		"labels-and-taints": with(func(in *Input) {
			in.Spec.Labels = map[string]v1.LabelValue{"example.com/team": "payments", "tier": "backend"}
			in.Spec.Taints = []v1.Taint{{Key: "example.com/dedicated", Value: "payments", Effect: "NoSchedule"}, {Key: "spot", Effect: "PreferNoSchedule"}}
		}),
		"gpu": with(func(in *Input) {
			in.Spec.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", Count: 2}}
			in.Spec.KernelModules = []string{"nvidia", "nvidia_uvm"}
			in.Spec.Taints = []v1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}
		}),
		"gpu-tenant-resource": with(func(in *Input) {
			// The tenant's device plugin advertises another resource than the default;
			// a second device of another resource is passed through but not announced.
			in.Spec.MinReplicas, in.Spec.MaxReplicas = 0, 4
			in.Spec.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GH100_H100", Count: 2, ResourceName: "nvidia.com/mig-1g.10gb"},
				{DeviceName: "example.com/FPGA_X", Count: 1, ResourceName: "example.com/fpga"}}
		}),
		"autoscaling-options": with(func(in *Input) {
			in.Spec.MinReplicas, in.Spec.MaxReplicas = 1, 8
			in.Spec.Autoscaling = &v1.Autoscaling{
				ScaleDownUnneededTime: &metav1.Duration{Duration: 5 * 60e9}, ScaleDownUnreadyTime: &metav1.Duration{Duration: 15 * 60e9},
				ScaleDownUtilizationThreshold: "0.4", ScaleDownGPUUtilizationThreshold: "0.25",
				MaxNodeProvisionTime: &metav1.Duration{Duration: 20 * 60e9}, MaxNodeStartupTime: &metav1.Duration{Duration: 10 * 60e9},
			}
		}),
		"custom-class": with(func(in *Input) {
			in.ClassName, in.Spec.NodeGroupClassName = "talos-hardened", "talos-hardened"
			in.Class = v1.NodeGroupClassSpec{OS: v1.OSTalos, Talos: &v1.TalosClassSpec{
				Extensions: []string{"siderolabs/iscsi-tools"}, KernelArgs: []string{"talos.dashboard.disabled=1"},
				InstallerRepository: "registry.example.com/talos/installer",
			}}
		}),
		"long-names": with(func(in *Input) {
			in.Name = strings.Repeat("pool", 15) + ".web"
			in.Cluster.Name = "a-tenant-cluster-with-a-rather-long-name"
			in.Spec.ClusterName = in.Cluster.Name
		}),
		"hostile-strings": with(func(in *Input) {
			// Values the CRD would refuse, fed straight to render: they must come out as
			// inert data, never as something a shell or a YAML parser executes.
			in.Spec.Labels = map[string]v1.LabelValue{"example.com/x": "a\"; rm -rf / #", "y": "$(reboot)"}
			in.Spec.Taints = []v1.Taint{{Key: "k", Value: "`id`\n- evil: true", Effect: "NoSchedule"}}
			in.Spec.Roles = []string{"worker; reboot"}
		}),
		"yaml-lookalike-strings": with(func(in *Input) {
			// Valid label values that a careless YAML writer would turn into booleans,
			// nulls or numbers; they must stay strings.
			in.Spec.Labels = map[string]v1.LabelValue{"a": "true", "b": "null", "c": "1e3", "d": "0x1F", "e": "on", "example.com/f": "Null"}
			in.Spec.Taints = []v1.Taint{{Key: "yes", Value: "no", Effect: "NoSchedule"}}
			in.Spec.Roles = []string{"null"}
		}),
		"location-fsn1": with(func(in *Input) {
			in.LocationName, in.Spec.LocationName = "fsn1", "fsn1"
			in.Location = v1.LocationSpec{Region: "eu-central", Zone: "fsn1-a", Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt,
				KubeVirt: &v1.KubeVirtProvider{StorageClassName: "replicated", EvictionStrategy: "LiveMigrate",
					Networks: []v1.KubeVirtNetwork{{Name: "storage", NetworkName: "infra/storage-net"}}}}}
		}),
		"version-bump": with(func(in *Input) { in.KubernetesVersion = "v1.35.5" }),
		"rollout-and-healthcheck": with(func(in *Input) {
			in.Spec.Rollout = &v1.Rollout{MaxSurge: ptr(intstr.FromString("50%")), MaxUnavailable: ptr(intstr.FromInt32(1))}
			in.Spec.HealthCheck = &v1.HealthCheck{NodeStartupTimeout: &metav1.Duration{Duration: 900e9},
				UnhealthyNotReadyTimeout: &metav1.Duration{Duration: 120e9}, MaxUnhealthy: ptr(intstr.FromString("100%"))}
		}),
		"talos-tuning": with(func(in *Input) {
			in.Spec.OSImage = "registry.example.com/talos/installer:v1.12.12"
			in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net.core.somaxconn": "65535", "vm.max_map_count": "262144"}}
		}),
	}
}

func TestRenderGolden(t *testing.T) {
	for name, in := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			out, err := Render(in)
			if err != nil {
				if strings.Contains(name, "hostile") || strings.HasSuffix(name, "-refused") {
					// render refuses values a shell or the kubelet would misread: that
					// refusal is the golden output.
					golden.Check(t, name, []byte("error: "+err.Error()+"\n"))
					return
				}
				t.Fatal(err)
			}
			// A template of a kind names.TemplateKinds lacks would be neither cleaned up nor
			// cached.
			for _, tmpl := range []client.Object{out.Bootstrap, out.Infrastructure} {
				if gvk := tmpl.GetObjectKind().GroupVersionKind(); !slices.Contains(names.TemplateKinds, gvk) {
					t.Errorf("%s is not one of names.TemplateKinds", gvk)
				}
			}
			first := marshalOutput(t, out)
			again, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, marshalOutput(t, again)) {
				t.Fatal("two renders of the same input differ")
			}
			golden.Check(t, name, first)
		})
	}
}

// TestAddressChangeRerendersOnlyTheBootstrapTemplate: a new apiserver ClusterIP reaches
// the worker's /etc/hosts, so the bootstrap template is renamed; nothing else changes.
func TestAddressChangeRerendersOnlyTheBootstrapTemplate(t *testing.T) {
	cases := goldenCases(t)
	a, err := Render(cases["kairos-default"])
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(cases["kairos-address-change"])
	if err != nil {
		t.Fatal(err)
	}
	if a.Bootstrap.GetName() == b.Bootstrap.GetName() {
		t.Fatalf("bootstrap template kept its name %s across an address change", a.Bootstrap.GetName())
	}
	if a.Infrastructure.GetName() != b.Infrastructure.GetName() {
		t.Errorf("machine template changed on an address change")
	}
	if !strings.Contains(string(marshalOutput(t, b)), "10.96.200.7 tenant-a tenant-a.tenant-a") {
		t.Errorf("the new address is not in the hosts file")
	}
}

// TestVersionBumpChangesOnlyVersionAndTemplates: a patch bump renames the bootstrap
// template (its kubelet image changed) and sets the new version, nothing else.
func TestVersionBumpChangesOnlyVersionAndTemplates(t *testing.T) {
	cases := goldenCases(t)
	a, err := Render(cases["talos-default"])
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(cases["version-bump"])
	if err != nil {
		t.Fatal(err)
	}
	if a.Infrastructure.GetName() != b.Infrastructure.GetName() {
		t.Errorf("the machine template changed on a patch bump: %s -> %s", a.Infrastructure.GetName(), b.Infrastructure.GetName())
	}
	if a.Bootstrap.GetName() == b.Bootstrap.GetName() {
		t.Errorf("the bootstrap template kept its name %s across a kubelet version change", a.Bootstrap.GetName())
	}
	ma, mb := a.MachineDeployment.DeepCopy(), b.MachineDeployment.DeepCopy()
	if mb.Spec.Template.Spec.Version != "v1.35.5" {
		t.Errorf("version = %s", mb.Spec.Template.Spec.Version)
	}
	mb.Spec.Template.Spec.Version = ma.Spec.Template.Spec.Version
	mb.Spec.Template.Spec.Bootstrap.ConfigRef.Name = ma.Spec.Template.Spec.Bootstrap.ConfigRef.Name
	if !bytes.Equal(mustJSON(t, ma), mustJSON(t, mb)) {
		t.Errorf("the MachineDeployment changed beyond version and bootstrap template:\n%s\n%s", mustJSON(t, ma), mustJSON(t, mb))
	}
}

func BenchmarkRenderTalos(b *testing.B) {
	in := baseInput(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderKairos(b *testing.B) {
	in := goldenCases(b)["kairos-default"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(in); err != nil {
			b.Fatal(err)
		}
	}
}
