package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// ruleCase is one object the API server must accept (wantErr empty) or refuse with a
// message containing wantErr.
type ruleCase struct {
	name    string
	obj     client.Object
	wantErr string
}

func runCreateCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			err := env.Client.Create(ctx, tc.obj)
			if err == nil {
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tc.obj) })
			}
			checkErr(t, err, tc.wantErr)
		})
	}
}

func checkErr(t *testing.T, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("refused, want accepted: %v", err)
	case wantErr != "" && err == nil:
		t.Fatalf("accepted, want refused with %q", wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("refused with %q, want a message containing %q", err.Error(), wantErr)
	}
}

func class(name string, spec v1.NodeGroupClassSpec) *v1.NodeGroupClass {
	return &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func kairosImage(ref, version string) *v1.ClassImage {
	return &v1.ClassImage{Reference: ref, KubernetesVersion: version}
}

func TestNodeGroupClassRules(t *testing.T) {
	runCreateCases(t, []ruleCase{
		{name: "talos class with extensions", obj: class("gpu-talos", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, Talos: &v1.TalosClassSpec{Extensions: []string{"siderolabs/nvidia-container-toolkit-lts"}}})},
		{name: "kairos class with a pinned image", obj: class("kairos-own", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos@"+digest, "v1.35.4")})},
		{name: "image refused on talos", obj: class("talos-image", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, Image: kairosImage("registry.example.com/w@"+digest, "v1.35.4")}),
			wantErr: "spec.image is only for os Kairos"},
		{name: "image by tag refused", obj: class("kairos-tag", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos:v1.35.4", "v1.35.4")}),
			wantErr: "spec.image.reference must be pinned by digest"},
		{name: "image with short digest refused", obj: class("kairos-short", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos@sha256:abc", "v1.35.4")}),
			wantErr: "spec.image.reference must be pinned by digest"},
		{name: "image version without patch refused", obj: class("kairos-minor", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos@"+digest, "v1.35")}),
			wantErr: "spec.image.kubernetesVersion must be a full release"},
		{name: "image without version refused", obj: class("kairos-noversion", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/workers/kairos@"+digest, "")}),
			wantErr: "spec.image.kubernetesVersion must be a full release"},
		{name: "talos block refused on kairos", obj: class("kairos-talos", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Talos: &v1.TalosClassSpec{KernelArgs: []string{"quiet"}}}),
			wantErr: "spec.talos is only for os Talos"},
		{name: "kairos block refused on talos", obj: class("talos-kairos", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, Kairos: &v1.KairosClassSpec{}}),
			wantErr: "spec.kairos is only for os Kairos"},
		{name: "unknown os refused", obj: class("beos", v1.NodeGroupClassSpec{OS: "BeOS"}),
			wantErr: `spec.os: Unsupported value: "BeOS"`},
		{name: "built-in talos canonical", obj: class("talos", v1.NodeGroupClassSpec{OS: v1.OSTalos})},
		{name: "built-in talos with kairos os refused", obj: class("talos", v1.NodeGroupClassSpec{OS: v1.OSKairos}),
			wantErr: "the built-in class 'talos' must be exactly {os: Talos}"},
		{name: "built-in talos with extensions refused", obj: class("talos", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, Talos: &v1.TalosClassSpec{Extensions: []string{"siderolabs/iscsi-tools"}}}),
			wantErr: "the built-in class 'talos' must be exactly {os: Talos}"},
		{name: "built-in talos with pool rules refused", obj: class("talos", v1.NodeGroupClassSpec{
			OS: v1.OSTalos, PoolRules: []v1.PoolRule{{Rule: "true", Message: "m"}}}),
			wantErr: "the built-in class 'talos' must be exactly {os: Talos}"},
		{name: "built-in kairos canonical", obj: class("kairos", v1.NodeGroupClassSpec{OS: v1.OSKairos})},
		{name: "built-in kairos with image refused", obj: class("kairos", v1.NodeGroupClassSpec{
			OS: v1.OSKairos, Image: kairosImage("registry.example.com/w/kairos@"+digest, "v1.35.4")}),
			wantErr: "the built-in class 'kairos' must have os Kairos and no image"},
		{name: "built-in kairos with talos os refused", obj: class("kairos", v1.NodeGroupClassSpec{OS: v1.OSTalos}),
			wantErr: "the built-in class 'kairos' must have os Kairos and no image"},
	})
}

func TestNodeGroupClassImmutable(t *testing.T) {
	ctx := context.Background()
	c := class("immutable-class", v1.NodeGroupClassSpec{OS: v1.OSTalos, Talos: &v1.TalosClassSpec{KernelArgs: []string{"quiet"}}})
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), c) })

	changed := c.DeepCopy()
	changed.Spec.Talos.KernelArgs = []string{"console=ttyS0"}
	checkErr(t, env.Client.Update(ctx, changed), "spec is immutable: publish a new class")

	relabelled := c.DeepCopy()
	relabelled.Labels = map[string]string{"team": "platform"}
	checkErr(t, env.Client.Update(ctx, relabelled), "")
}

func kubevirtLocation(name string) *v1.Location {
	return &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.LocationSpec{
		Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{StorageClassName: "replicated"}},
		Region:   "eu-central", Zone: "fsn1-a",
		AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "true"}},
	}}
}

func TestLocationRules(t *testing.T) {
	two := kubevirtLocation("two-providers")
	two.Spec.Provider.HCloud = &v1.HCloudProvider{CredentialsRef: v1.SecretReference{Namespace: "p", Name: "hcloud"}, Location: "fsn1"}
	none := kubevirtLocation("no-provider")
	none.Spec.Provider.KubeVirt = nil
	mismatch := kubevirtLocation("mismatch")
	mismatch.Spec.Provider.Type = v1.ProviderProxmox

	runCreateCases(t, []ruleCase{
		{name: "kubevirt location", obj: kubevirtLocation("fsn1")},
		{name: "two providers refused", obj: two, wantErr: "spec.provider must set exactly one of kubevirt, proxmox, hcloud, static"},
		{name: "no provider refused", obj: none, wantErr: "spec.provider must set exactly one of kubevirt, proxmox, hcloud, static"},
		{name: "type naming another block refused", obj: mismatch, wantErr: "spec.provider.type must name the provider block that is set"},
	})

	t.Run("defaults eviction strategy to External", func(t *testing.T) {
		got := &v1.Location{}
		loc := kubevirtLocation("defaults")
		if err := env.Client.Create(context.Background(), loc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), loc) })
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(loc), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Provider.KubeVirt.EvictionStrategy != "External" {
			t.Fatalf("evictionStrategy = %q, want External", got.Spec.Provider.KubeVirt.EvictionStrategy)
		}
	})
}

func TestLocationImmutable(t *testing.T) {
	ctx := context.Background()
	loc := kubevirtLocation("immutable-location")
	if err := env.Client.Create(ctx, loc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), loc) })
	changed := loc.DeepCopy()
	changed.Spec.Zone = "fsn1-b"
	checkErr(t, env.Client.Update(ctx, changed), "spec is immutable: publish a new location")
}

// pool is a valid NodeGroup that each case changes in one way.
func pool(name string, mutate func(*v1.NodeGroupSpec)) *v1.NodeGroup {
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

func TestNodeGroupRules(t *testing.T) {
	runCreateCases(t, []ruleCase{
		{name: "minimal pool", obj: pool("minimal", nil)},
		{name: "fixed size pool", obj: pool("fixed", func(s *v1.NodeGroupSpec) { s.MinReplicas, s.MaxReplicas = 3, 3 })},
		{name: "from zero", obj: pool("zero", func(s *v1.NodeGroupSpec) { s.MinReplicas = 0 })},
		{name: "min above max refused", obj: pool("min-max", func(s *v1.NodeGroupSpec) { s.MinReplicas, s.MaxReplicas = 4, 3 }),
			wantErr: "spec.minReplicas must not exceed spec.maxReplicas"},
		{name: "max above bound refused", obj: pool("max-bound", func(s *v1.NodeGroupSpec) { s.MaxReplicas = 1001 }),
			wantErr: "spec.maxReplicas: Invalid value: 1001: spec.maxReplicas in body should be less than or equal to 1000"},
		{name: "instance type", obj: pool("itype", func(s *v1.NodeGroupSpec) { s.Resources, s.InstanceType = nil, "u1.large" })},
		{name: "resources and instance type refused", obj: pool("both", func(s *v1.NodeGroupSpec) { s.InstanceType = "u1.large" }),
			wantErr: "set exactly one of spec.resources and spec.instanceType"},
		{name: "neither resources nor instance type refused", obj: pool("neither", func(s *v1.NodeGroupSpec) { s.Resources = nil }),
			wantErr: "set exactly one of spec.resources and spec.instanceType"},
		{name: "zero cpu refused", obj: pool("zero-cpu", func(s *v1.NodeGroupSpec) { s.Resources.CPU = resource.MustParse("0") }),
			wantErr: "spec.resources.cpu must be a whole number of virtual CPUs between 1 and 256"},
		// A VM gets whole cores: 1500m would boot 2 while the autoscaler's capacity and the
		// kubelet's reservations were sized for 1.5.
		{name: "fractional cpu refused", obj: pool("half-cpu", func(s *v1.NodeGroupSpec) { s.Resources.CPU = resource.MustParse("1500m") }),
			wantErr: "spec.resources.cpu must be a whole number of virtual CPUs between 1 and 256"},
		{name: "cpu above bound refused", obj: pool("many-cpu", func(s *v1.NodeGroupSpec) { s.Resources.CPU = resource.MustParse("257") }),
			wantErr: "spec.resources.cpu must be a whole number of virtual CPUs between 1 and 256"},
		{name: "cpu in thousands of millicores", obj: pool("milli-cpu", func(s *v1.NodeGroupSpec) { s.Resources.CPU = resource.MustParse("2000m") })},
		{name: "tiny memory refused", obj: pool("tiny-mem", func(s *v1.NodeGroupSpec) { s.Resources.Memory = resource.MustParse("512Mi") }),
			wantErr: "spec.resources.memory must be between 1Gi and 4Ti"},
		{name: "taints with each effect", obj: pool("taints", func(s *v1.NodeGroupSpec) {
			s.Taints = []v1.Taint{{Key: "gpu", Value: "true", Effect: "NoSchedule"}, {Key: "example.com/a", Effect: "PreferNoSchedule"}, {Key: "b", Effect: "NoExecute"}}
		})},
		{name: "unknown taint effect refused", obj: pool("taint-effect", func(s *v1.NodeGroupSpec) {
			s.Taints = []v1.Taint{{Key: "gpu", Effect: "NoWay"}}
		}), wantErr: `spec.taints[0].effect: Unsupported value: "NoWay"`},
		{name: "hostile taint key refused", obj: pool("taint-key", func(s *v1.NodeGroupSpec) {
			s.Taints = []v1.Taint{{Key: "a;rm -rf /", Effect: "NoSchedule"}}
		}), wantErr: "spec.taints[].key must be a valid label key"},
		{name: "hostile taint value refused", obj: pool("taint-value", func(s *v1.NodeGroupSpec) {
			s.Taints = []v1.Taint{{Key: "a", Value: "$(reboot)", Effect: "NoSchedule"}}
		}), wantErr: "spec.taints[].value must be a valid label value"},
		{name: "labels with prefix", obj: pool("labels", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{"example.com/team": "a", "tier": "web", "empty": ""}
		})},
		{name: "label key with a space refused", obj: pool("label-key", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{"bad key": "a"}
		}), wantErr: "spec.labels keys must be valid label keys"},
		{name: "label name over 63 refused", obj: pool("label-long", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{strings.Repeat("a", 64): "a"}
		}), wantErr: "spec.labels keys must be valid label keys"},
		{name: "reserved label domain refused", obj: pool("label-reserved", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{"node-role.kubernetes.io/control-plane": ""}
		}), wantErr: "spec.labels keys in the kubernetes.io, k8s.io and nodegroup.io domains are reserved"},
		{name: "hostile label value refused", obj: pool("label-value", func(s *v1.NodeGroupSpec) {
			s.Labels = map[string]v1.LabelValue{"a": "x\ny"}
		}), wantErr: "spec.labels values must be valid label values"},
		{name: "roles", obj: pool("roles", func(s *v1.NodeGroupSpec) { s.Roles = []string{"worker", "ingress"} })},
		{name: "role with slash refused", obj: pool("role-slash", func(s *v1.NodeGroupSpec) { s.Roles = []string{"a/b"} }),
			wantErr: "a role must be a valid label name"},
		{name: "minor version", obj: pool("minor", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.35" })},
		{name: "patch version", obj: pool("patch", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.35.4" })},
		{name: "version without v refused", obj: pool("nov", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "1.35" }),
			wantErr: "spec.kubernetesVersion must look like v1.35 or v1.35.4"},
		{name: "version with suffix refused", obj: pool("suffix", func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.35.4-rc.0" }),
			wantErr: "spec.kubernetesVersion must look like v1.35 or v1.35.4"},
		{name: "talos fields on talos class", obj: pool("talos-fields", func(s *v1.NodeGroupSpec) {
			s.OSImage = "factory.talos.dev/installer/abc:v1.11.0"
			s.KernelModules = []string{"nvidia"}
			s.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", Count: 1}}
			s.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net.core.somaxconn": "65535"}}
		})},
		{name: "osImage refused on kairos", obj: pool("kairos-osimage", func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.OSImage = "kairos", "factory.talos.dev/installer/abc:v1.11.0"
		}), wantErr: v1.TalosOnlyFieldsMessage},
		{name: "kernelModules refused on kairos", obj: pool("kairos-modules", func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.KernelModules = "kairos", []string{"nvidia"}
		}), wantErr: v1.TalosOnlyFieldsMessage},
		{name: "gpus refused on kairos", obj: pool("kairos-gpus", func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.GPUs = "kairos", []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10"}}
		}), wantErr: v1.TalosOnlyFieldsMessage},
		{name: "talos block refused on kairos", obj: pool("kairos-talos", func(s *v1.NodeGroupSpec) {
			s.NodeGroupClassName, s.Talos = "kairos", &v1.NodeGroupTalos{}
		}), wantErr: v1.TalosOnlyFieldsMessage},
		{name: "plain kairos pool", obj: pool("kairos-plain", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = "kairos" })},
		{name: "gpu with a tenant resource name", obj: pool("gpu-resource", func(s *v1.NodeGroupSpec) {
			s.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", ResourceName: "nvidia.com/mig-1g.10gb"}}
		})},
		{name: "gpu resource name without a domain refused", obj: pool("gpu-resource-bare", func(s *v1.NodeGroupSpec) {
			s.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", ResourceName: "gpu"}}
		}), wantErr: "spec.gpus[0].resourceName"},
		{name: "autoscaling options", obj: pool("autoscaling", func(s *v1.NodeGroupSpec) {
			s.MinReplicas, s.MaxReplicas = 0, 5
			s.Autoscaling = &v1.Autoscaling{ScaleDownUnneededTime: &metav1.Duration{Duration: 5 * time.Minute},
				ScaleDownUtilizationThreshold: "0.5", ScaleDownGPUUtilizationThreshold: "1", MaxNodeProvisionTime: &metav1.Duration{Duration: 20 * time.Minute}}
		})},
		{name: "utilization threshold above 1 refused", obj: pool("threshold-high", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{ScaleDownUtilizationThreshold: "1.5"}
		}), wantErr: "spec.autoscaling.scaleDownUtilizationThreshold must be a decimal between 0 and 1"},
		{name: "gpu utilization threshold not a number refused", obj: pool("threshold-nan", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{ScaleDownGPUUtilizationThreshold: "half"}
		}), wantErr: "spec.autoscaling.scaleDownGPUUtilizationThreshold must be a decimal between 0 and 1"},
		{name: "negative unneeded time refused", obj: pool("unneeded-negative", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{ScaleDownUnneededTime: &metav1.Duration{Duration: -time.Minute}}
		}), wantErr: "spec.autoscaling.scaleDownUnneededTime must be a duration between 0s and 24h"},
		{name: "provision time too short refused", obj: pool("provision-short", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{MaxNodeProvisionTime: &metav1.Duration{Duration: time.Second}}
		}), wantErr: "spec.autoscaling.maxNodeProvisionTime must be a duration between 1m and 24h"},
		{name: "startup time too long refused", obj: pool("startup-long", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{MaxNodeStartupTime: &metav1.Duration{Duration: 48 * time.Hour}}
		}), wantErr: "spec.autoscaling.maxNodeStartupTime must be a duration between 1m and 24h"},
		{name: "unready time too long refused", obj: pool("unready-long", func(s *v1.NodeGroupSpec) {
			s.Autoscaling = &v1.Autoscaling{ScaleDownUnreadyTime: &metav1.Duration{Duration: 25 * time.Hour}}
		}), wantErr: "spec.autoscaling.scaleDownUnreadyTime must be a duration between 0s and 24h"},
		{name: "hostile sysctl refused", obj: pool("sysctl", func(s *v1.NodeGroupSpec) {
			s.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"kernel.x": "1; reboot"}}
		}), wantErr: "spec.talos.sysctls values must be plain values"},
		{name: "sysctl key escaping /proc/sys refused", obj: pool("sysctl-path", func(s *v1.NodeGroupSpec) {
			s.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net/../../../var/lib/x": "1"}}
		}), wantErr: "spec.talos.sysctls keys must be kernel parameter names"},
		{name: "unpinned osImage with shell refused", obj: pool("osimage-shell", func(s *v1.NodeGroupSpec) { s.OSImage = "x`id`" }),
			wantErr: "spec.osImage must be an image reference"},
		{name: "rollout and health check", obj: pool("rollout", func(s *v1.NodeGroupSpec) {
			s.Rollout = &v1.Rollout{MaxSurge: ptr(intstr.FromInt32(1)), MaxUnavailable: ptr(intstr.FromString("25%"))}
			s.HealthCheck = &v1.HealthCheck{UnhealthyNotReadyTimeout: &metav1.Duration{Duration: 300e9}}
		})},
	})
}

func ptr[T any](v T) *T { return &v }

func TestNodeGroupDefaults(t *testing.T) {
	ctx := context.Background()
	ng := pool("defaults", nil)
	ng.Spec.MinReplicas = 0 // let the API server default it
	raw := map[string]any{
		"apiVersion": "nodegroup.io/v1alpha1", "kind": "NodeGroup",
		"metadata": map[string]any{"name": "defaults", "namespace": "default"},
		"spec":     map[string]any{"clusterName": "tenant-a", "maxReplicas": int64(2), "resources": map[string]any{"cpu": int64(2), "memory": "4Gi"}},
	}
	if err := env.Client.Create(ctx, unstructuredFrom(raw)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ng) })
	got := &v1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeGroupClassName != "talos" || got.Spec.LocationName != "in-cluster" || got.Spec.MinReplicas != 1 ||
		got.Spec.EphemeralStorage.String() != "20Gi" {
		t.Fatalf("defaults: class=%q location=%q min=%d storage=%s, want talos, in-cluster, 1, 20Gi",
			got.Spec.NodeGroupClassName, got.Spec.LocationName, got.Spec.MinReplicas, got.Spec.EphemeralStorage.String())
	}
}

func TestNodeGroupUpdates(t *testing.T) {
	ctx := context.Background()
	ng := pool("updates", nil)
	if err := env.Client.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ng) })

	moved := ng.DeepCopy()
	moved.Spec.ClusterName = "tenant-b"
	checkErr(t, env.Client.Update(ctx, moved), "spec.clusterName is immutable")

	grown := ng.DeepCopy()
	grown.Spec.MaxReplicas = 10
	checkErr(t, env.Client.Update(ctx, grown), "")

	shrunk := grown.DeepCopy()
	shrunk.Spec.MaxReplicas = 0
	checkErr(t, env.Client.Update(ctx, shrunk), "spec.maxReplicas in body should be greater than or equal to 1")
}

// TestNodeGroupServerSideApply checks the rules hold for server-side apply too, and that
// the list and map markers give field ownership per item.
func TestNodeGroupServerSideApply(t *testing.T) {
	ctx := context.Background()
	apply := func(manager string, spec map[string]any) error {
		obj := unstructuredFrom(map[string]any{
			"apiVersion": "nodegroup.io/v1alpha1", "kind": "NodeGroup",
			"metadata": map[string]any{"name": "applied", "namespace": "default"},
			"spec":     spec,
		})
		return env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(manager), client.ForceOwnership)
	}
	base := func() map[string]any {
		return map[string]any{"clusterName": "tenant-a", "minReplicas": int64(1), "maxReplicas": int64(3),
			"resources": map[string]any{"cpu": "2", "memory": "4Gi"}}
	}
	if err := apply("tenant", base()); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pool("applied", nil)) })

	if err := apply("tenant", base()); err != nil {
		t.Fatalf("second identical apply: %v", err)
	}

	moved := base()
	moved["clusterName"] = "tenant-b"
	checkErr(t, apply("tenant", moved), "spec.clusterName is immutable")

	inverted := base()
	inverted["minReplicas"] = int64(5)
	checkErr(t, apply("tenant", inverted), "spec.minReplicas must not exceed spec.maxReplicas")

	// A second manager that owns only labels coexists with the first.
	if err := apply("labeller", map[string]any{"clusterName": "tenant-a", "maxReplicas": int64(3), "labels": map[string]any{"tier": "web"}}); err != nil {
		t.Fatalf("apply by a second manager: %v", err)
	}
	got := &v1.NodeGroup{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "applied"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Labels["tier"] != "web" || got.Spec.Resources == nil {
		t.Fatalf("after two managers: labels=%v resources=%v", got.Spec.Labels, got.Spec.Resources)
	}
}
