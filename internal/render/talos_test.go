package render

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// testCAs are two self-signed CA certificates (PEM), made once per test binary. They are
// random, so tests compare rendered output with itself, never with fixed bytes.
var testCAs = sync.OnceValues(func() (string, string) {
	return testCAPEM("talos-machine-ca"), testCAPEM("kubernetes")
})

func testCAPEM(cn string) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Unix(0, 0).Add(100 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// testTalosInput is a Talos pool as resolve would hand it over: pool workers of tenant-a,
// 2 CPU / 4Gi, on Kubernetes v1.35 from the compiled-in catalog, its cluster served by
// the apiserver Service tenant-a/tenant-a in the management cluster.
func testTalosInput() *Input {
	machineCA, clusterCA := testCAs()
	cat := catalog.Default()
	rel, ok := cat.Lookup("v1.35")
	if !ok {
		panic("catalog has no v1.35")
	}
	return &Input{
		Namespace: "tenant-a",
		Name:      "workers",
		Spec: v1.NodeGroupSpec{
			ClusterName:        "tenant-a",
			NodeGroupClassName: v1.BuiltinTalosClass,
			MinReplicas:        1,
			MaxReplicas:        3,
			Resources:          &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
			EphemeralStorage:   resource.MustParse("20Gi"),
		},
		ClassName:    v1.BuiltinTalosClass,
		Class:        v1.NodeGroupClassSpec{OS: v1.OSTalos},
		LocationName: v1.BuiltinLocation,
		Location:     v1.LocationSpec{Provider: v1.LocationProvider{KubeVirt: &v1.KubeVirtProvider{}}},
		Cluster: Cluster{
			Name:                "tenant-a",
			ControlPlaneHost:    "tenant-a.tenant-a.svc",
			ControlPlanePort:    6443,
			ServiceCIDRs:        []string{"10.95.0.0/16"},
			PodCIDRs:            []string{"10.244.0.0/16"},
			DNSDomain:           "cluster.local",
			TenantDNS:           "10.95.0.10",
			APIServer:           ServiceAddress{Name: "tenant-a", Namespace: "tenant-a", ClusterIP: "10.96.12.34"},
			ManagementDNS:       "10.96.0.10",
			ManagementDNSDomain: "cluster.local",
		},
		Release:           rel,
		Factory:           cat.TalosFactory,
		KubernetesVersion: rel.Kubernetes,
		Machine:           MachineSize{MilliCPU: 2000, MemoryBytes: 4 << 30},
		TalosSecrets: &TalosSecrets{
			MachineToken:   "w7ysn3.2ti4qmz2k6ajb9nt",
			MachineCACert:  machineCA,
			ClusterCACert:  clusterCA,
			ClusterID:      "Nhx0p0XcSPVpeFbSiGrMbT6cVTuqc1UwIuJ0jZ_6rzI=",
			ClusterSecret:  "bx4j3zGGpZ1lx1D0dw4XzVLHzJ8lwnhc0eMdQ+k6sF0=",
			BootstrapToken: "abcdef.0123456789abcdef",
		},
	}
}

// testTalosFullInput is testTalosInput with every optional Talos knob set.
func testTalosFullInput() *Input {
	in := testTalosInput()
	in.Location.Region = "eu-central"
	in.Location.Zone = "eu-central-1a"
	in.Spec.Labels = map[string]v1.LabelValue{
		"example.com/team": "payments",
		"tier":             "backend",
		"gpu":              "",
	}
	in.Spec.Taints = []v1.Taint{
		{Key: "example.com/dedicated", Value: "payments", Effect: "NoSchedule"},
		{Key: "spot", Effect: "PreferNoSchedule"},
	}
	in.Spec.KernelModules = []string{"nvidia", "br_netfilter"}
	in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{
		"net.core.somaxconn":               "65535",
		"vm.max_map_count":                 "262144",
		"net/ipv4/conf/eth0.100/rp_filter": "0",
	}}
	in.Spec.OSImage = "registry.example.com/talos/installer:v1.12.12"
	in.Class.Talos = &v1.TalosClassSpec{
		Extensions:          []string{"siderolabs/nvidia-container-toolkit-lts", "siderolabs/nvidia-open-gpu-kernel-modules-lts"},
		KernelArgs:          []string{"console=ttyS0", "net.ifnames=0"},
		InstallerRepository: "registry.example.com/factory/installer",
	}
	return in
}

// vmMode is a Talos runtime mode for validation. Pools run the openstack image under
// CAPK, which is Talos' cloud mode; metal mode requires install instructions and is
// checked as well, so the install section stays complete.
type vmMode struct {
	name    string
	install bool
}

func (m vmMode) String() string        { return m.name }
func (m vmMode) RequiresInstall() bool { return m.install }
func (m vmMode) InContainer() bool     { return false }

// loadTalos parses a rendered machine config the way Talos does (unknown fields are
// errors) and validates it strictly (warnings are errors) in cloud and metal modes.
func loadTalos(t *testing.T, data string) config.Provider {
	t.Helper()
	cfg, err := configloader.NewFromBytes([]byte(data))
	if err != nil {
		t.Fatalf("Talos refuses to load the machine config: %v\n%s", err, data)
	}
	for _, mode := range []validation.RuntimeMode{vmMode{"cloud", false}, vmMode{"metal", true}} {
		warnings, err := cfg.Validate(mode, validation.WithStrict())
		if err != nil {
			t.Fatalf("Talos validation (%s mode) fails: %v\n%s", mode, err, data)
		}
		if len(warnings) > 0 {
			t.Fatalf("Talos validation (%s mode) warns: %v", mode, warnings)
		}
	}
	return cfg
}

func renderTalos(t *testing.T, in *Input) (string, *v1alpha1.Config) {
	t.Helper()
	data, err := TalosMachineConfig(in)
	if err != nil {
		t.Fatalf("TalosMachineConfig: %v", err)
	}
	return data, loadTalos(t, data).RawV1Alpha1()
}

func TestTalosMachineConfigDefaultPool(t *testing.T) {
	in := testTalosInput()
	_, raw := renderTalos(t, in)
	m, c := raw.MachineConfig, raw.ClusterConfig
	s := in.TalosSecrets

	eq := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	eq("version", raw.ConfigVersion, "v1alpha1")
	eq("machine.type", m.MachineType, "worker")
	eq("machine.token", m.MachineToken, s.MachineToken)
	eq("machine.ca.crt", string(m.MachineCA.Crt), s.MachineCACert)
	eq("machine.ca.key", len(m.MachineCA.Key), 0)
	eq("machine.kubelet.image", m.MachineKubelet.KubeletImage, "ghcr.io/siderolabs/kubelet:v1.35.4")
	eq("machine.kubelet.clusterDNS", m.MachineKubelet.KubeletClusterDNS, []string{"10.95.0.10"})
	eq("machine.kubelet.extraArgs", len(m.MachineKubelet.KubeletExtraArgs), 0)
	eq("machine.install.disk", m.MachineInstall.InstallDisk, "/dev/vda")
	eq("machine.install.image", m.MachineInstall.InstallImage,
		"factory.talos.dev/installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.12.12")
	eq("machine.install.extraKernelArgs", len(m.MachineInstall.InstallExtraKernelArgs), 0)
	eq("machine.kernel", m.MachineKernel, (*v1alpha1.KernelConfig)(nil))
	eq("machine.sysctls", len(m.MachineSysctls), 0)
	eq("machine.network.nameservers", m.MachineNetwork.NameServers, []string{"10.96.0.10"})
	eq("machine.network.searchDomains", m.MachineNetwork.Searches,
		[]string{"tenant-a.svc.cluster.local", "svc.cluster.local", "cluster.local"})
	eq("machine.network.extraHostEntries", len(m.MachineNetwork.ExtraHostEntries), 1)
	eq("machine.network.extraHostEntries[0].ip", m.MachineNetwork.ExtraHostEntries[0].HostIP, "10.96.12.34")
	eq("machine.network.extraHostEntries[0].aliases", m.MachineNetwork.ExtraHostEntries[0].HostAliases,
		[]string{"tenant-a", "tenant-a.tenant-a", "tenant-a.tenant-a.svc", "tenant-a.tenant-a.svc.cluster.local"})

	eq("cluster.id", c.ClusterID, s.ClusterID)
	eq("cluster.secret", c.ClusterSecret, s.ClusterSecret)
	eq("cluster.token", c.BootstrapToken, s.BootstrapToken)
	eq("cluster.ca.crt", string(c.ClusterCA.Crt), s.ClusterCACert)
	eq("cluster.ca.key", len(c.ClusterCA.Key), 0)
	eq("cluster.controlPlane.endpoint", c.ControlPlane.Endpoint.String(), "https://tenant-a.tenant-a.svc:6443")
	eq("cluster.clusterName", c.ClusterName, "tenant-a")
	eq("cluster.network.dnsDomain", c.ClusterNetwork.DNSDomain, "cluster.local")
	eq("cluster.network.podSubnets", c.ClusterNetwork.PodSubnet, []string{"10.244.0.0/16"})
	eq("cluster.network.serviceSubnets", c.ClusterNetwork.ServiceSubnet, []string{"10.95.0.0/16"})
}

// TestTalosKubeletReservations pins the kubelet's reservations to Reserve: the
// autoscaler's capacity annotations subtract the same numbers.
func TestTalosKubeletReservations(t *testing.T) {
	for _, size := range []MachineSize{
		{MilliCPU: 2000, MemoryBytes: 4 << 30},
		{MilliCPU: 1500, MemoryBytes: 3<<30 + 512<<20},
		{MilliCPU: 64000, MemoryBytes: 256 << 30},
	} {
		t.Run(fmt.Sprintf("%dm-%dMi", size.MilliCPU, size.MemoryBytes>>20), func(t *testing.T) {
			in := testTalosInput()
			in.Machine = size
			_, raw := renderTalos(t, in)
			r := Reserve(size)
			want := map[string]any{
				"kubeReserved": map[string]any{
					"cpu":    MilliCPUString(r.KubeReservedMilliCPU),
					"memory": MemoryString(r.KubeReservedMemoryBytes),
				},
				"systemReserved": map[string]any{
					"cpu":               MilliCPUString(r.SystemReservedMilliCPU),
					"memory":            MemoryString(r.SystemReservedMemoryBytes),
					"ephemeral-storage": "256Mi",
					"pid":               "100",
				},
				"evictionHard": map[string]any{
					"memory.available":   MemoryString(r.EvictionHardMemoryBytes),
					"nodefs.available":   "10%",
					"nodefs.inodesFree":  "5%",
					"imagefs.available":  "15%",
					"imagefs.inodesFree": "5%",
				},
				"maxPods": int(r.MaxPods),
			}
			if got := raw.MachineConfig.MachineKubelet.KubeletExtraConfig.Object; !reflect.DeepEqual(got, want) {
				t.Errorf("kubelet extraConfig =\n%#v\nwant\n%#v", got, want)
			}
		})
	}
}

func TestTalosMachineConfigFullPool(t *testing.T) {
	in := testTalosFullInput()
	_, raw := renderTalos(t, in)
	m := raw.MachineConfig

	wantLabels := "example.com/team=payments,gpu=,tier=backend," +
		"topology.kubernetes.io/region=eu-central,topology.kubernetes.io/zone=eu-central-1a"
	if got := m.MachineKubelet.KubeletExtraArgs; !reflect.DeepEqual(got, map[string]string{"node-labels": wantLabels}) {
		t.Errorf("kubelet extraArgs = %v, want node-labels %s", got, wantLabels)
	}
	wantTaints := []any{
		map[string]any{"key": "example.com/dedicated", "value": "payments", "effect": "NoSchedule"},
		map[string]any{"key": "spot", "effect": "PreferNoSchedule"},
	}
	if got := m.MachineKubelet.KubeletExtraConfig.Object["registerWithTaints"]; !reflect.DeepEqual(got, wantTaints) {
		t.Errorf("registerWithTaints = %#v, want %#v", got, wantTaints)
	}
	if got, want := m.MachineInstall.InstallImage, in.Spec.OSImage; got != want {
		t.Errorf("install image = %q, want the pool's osImage %q", got, want)
	}
	if got, want := m.MachineInstall.InstallExtraKernelArgs, in.Class.Talos.KernelArgs; !reflect.DeepEqual(got, want) {
		t.Errorf("extraKernelArgs = %v, want %v", got, want)
	}
	//lint:ignore SA1019 the test checks that the deprecated field stays empty
	if ext := m.MachineInstall.InstallExtensions; len(ext) != 0 {
		t.Errorf("install extensions = %v: extensions belong in the schematic", ext)
	}
	var modules []string
	for _, mod := range m.MachineKernel.KernelModules {
		modules = append(modules, mod.ModuleName)
	}
	if !reflect.DeepEqual(modules, in.Spec.KernelModules) {
		t.Errorf("kernel modules = %v, want %v", modules, in.Spec.KernelModules)
	}
	wantSysctls := map[string]string{}
	for k, v := range in.Spec.Talos.Sysctls {
		wantSysctls[k] = string(v)
	}
	if !reflect.DeepEqual(m.MachineSysctls, wantSysctls) {
		t.Errorf("sysctls = %v, want %v", m.MachineSysctls, wantSysctls)
	}

	// Without osImage, the class's installer repository replaces the catalog's, with the
	// schematic of the class's extensions and kernel arguments (internal/schematic).
	in.Spec.OSImage = ""
	_, raw = renderTalos(t, in)
	want := "registry.example.com/factory/installer/937719ef6d369eef41318941588567e6a63faabc622ae72d06e6e19ba3e1661c:" + in.Release.Talos.Version
	if got := raw.MachineConfig.MachineInstall.InstallImage; got != want {
		t.Errorf("install image = %q, want %q", got, want)
	}
}

func TestTalosMissingSecrets(t *testing.T) {
	in := testTalosInput()
	in.TalosSecrets = nil
	if _, err := TalosMachineConfig(in); err == nil || !strings.Contains(err.Error(), "Talos secrets") {
		t.Fatalf("TalosMachineConfig error = %v, want one about the Talos secrets", err)
	}
	if _, err := TalosConfigTemplate(in, "workers-abc"); err == nil || !strings.Contains(err.Error(), "Talos secrets") {
		t.Fatalf("TalosConfigTemplate error = %v, want one about the Talos secrets", err)
	}
}

// TestTalosErrorsAreStable checks that a pool with several problems gets every one of
// them, in the same order every time: the message lands in a status condition, and a
// message that changed on every reconcile would rewrite the status each time.
func TestTalosErrorsAreStable(t *testing.T) {
	in := testTalosInput()
	in.Spec.Labels = map[string]v1.LabelValue{"a": "x,y", "b": "x,y", "c": "x,y", "d.k8s.io/e": "f"}
	in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"a/..": "1", "b/..": "1", "c/..": "1"}}
	in.Cluster.ControlPlaneHost = ""
	_, first := TalosMachineConfig(in)
	if first == nil {
		t.Fatal("rendered, want errors")
	}
	for _, want := range []string{`"a"`, `"b"`, `"c"`, `"d.k8s.io/e"`, `"a/.."`, `"c/.."`, "control-plane endpoint host"} {
		if !strings.Contains(first.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, first)
		}
	}
	for range 50 {
		if _, err := TalosMachineConfig(in); err == nil || err.Error() != first.Error() {
			t.Fatalf("error changed between renders:\n%v\n---\n%v", first, err)
		}
	}
}

// TestTalosDeterministic renders a pool with many map entries (labels, sysctls) many
// times: Go randomises map iteration, so any order that leaked into the output would
// show up as a difference.
func TestTalosDeterministic(t *testing.T) {
	in := testTalosFullInput()
	for i := range 20 {
		in.Spec.Labels[fmt.Sprintf("example.com/l%02d", i)] = v1.LabelValue(fmt.Sprintf("v%d", i))
		in.Spec.Talos.Sysctls[fmt.Sprintf("net.core.s%02d", i)] = v1.SysctlValue(fmt.Sprint(i))
	}
	first, err := TalosMachineConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	loadTalos(t, first)
	for range 50 {
		again, err := TalosMachineConfig(in)
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Fatalf("render differs between runs:\n%s\n---\n%s", first, again)
		}
	}
}

func TestTalosConfigTemplate(t *testing.T) {
	in := testTalosInput()
	tmpl, err := TalosConfigTemplate(in, "workers-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	data, err := TalosMachineConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.APIVersion != "bootstrap.cluster.x-k8s.io/v1alpha3" || tmpl.Kind != "TalosConfigTemplate" {
		t.Errorf("type = %s %s", tmpl.APIVersion, tmpl.Kind)
	}
	if tmpl.Name != "workers-0123456789" || tmpl.Namespace != "tenant-a" {
		t.Errorf("object = %s/%s", tmpl.Namespace, tmpl.Name)
	}
	if len(tmpl.Labels) != 0 || len(tmpl.Annotations) != 0 || len(tmpl.OwnerReferences) != 0 {
		t.Errorf("labels, annotations and owners are the caller's: %v %v %v", tmpl.Labels, tmpl.Annotations, tmpl.OwnerReferences)
	}
	want := talos.TalosConfigSpec{GenerateType: "none", TalosVersion: "v1.12.12", Data: data}
	if got := tmpl.Spec.Template.Spec; got != want {
		t.Errorf("spec.template.spec = %+v, want %+v", got, want)
	}
	loadTalos(t, tmpl.Spec.Template.Spec.Data)
}

// TestTalosEdgeInputsLoad renders inputs at the edges of what resolve hands over (a
// cluster with nothing but an endpoint, a CA bundle that does not start with its PEM
// header) and checks that Talos loads and validates them and reads the CAs back.
func TestTalosEdgeInputsLoad(t *testing.T) {
	oddCA := testTalosInput()
	oddCA.TalosSecrets.ClusterCACert = "\u3000" + oddCA.TalosSecrets.ClusterCACert
	bare := testTalosInput()
	bare.Cluster = Cluster{Name: "c", ControlPlaneHost: "10.0.0.1", ControlPlanePort: 443}

	for name, in := range map[string]*Input{"bare": bare, "odd CA": oddCA} {
		t.Run(name, func(t *testing.T) {
			_, raw := renderTalos(t, in)
			if got := string(raw.ClusterConfig.ClusterCA.Crt); got != in.TalosSecrets.ClusterCACert {
				t.Errorf("cluster CA reads back as %q", got)
			}
			if got := string(raw.MachineConfig.MachineCA.Crt); got != in.TalosSecrets.MachineCACert {
				t.Errorf("machine CA reads back as %q", got)
			}
			if got, want := raw.ClusterConfig.ControlPlane.Endpoint.String(), "https://"+in.Cluster.ControlPlaneHost+":"+fmt.Sprint(in.Cluster.ControlPlanePort); got != want {
				t.Errorf("endpoint = %s, want %s", got, want)
			}
		})
	}
}

func BenchmarkTalosMachineConfig(b *testing.B) {
	in := testTalosFullInput()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := TalosMachineConfig(in); err != nil {
			b.Fatal(err)
		}
	}
}
