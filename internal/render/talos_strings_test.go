package render

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// Tenant strings in the Talos machine config: what stays YAML data, read back exactly by
// Talos' own loader, and what render refuses because it would leave YAML for another
// text format.

// hostileStrings are what an attacker would try if a tenant string ever reached a shell,
// a template or a YAML document as text.
var hostileStrings = []string{
	`a"; rm -rf / #`,
	`$(reboot)`,
	"`reboot`",
	"line1\nline2\n",
	"\r\n- injected: true",
	`: {}`,
	`{{ .Values }}`,
	`'single' "double"`,
	`&anchor *alias !tag | > % @`,
	`---`,
	`true`,
	`0x1F`,
	`~`,
	"tab\there",
	"\\n not a newline",
	"ünïcødé ☃",
}

// TestTalosHostileStringsStayData checks that tenant strings placed in the config as
// YAML values come back from Talos' own parser exactly as given: no quoting trick
// escapes the value, adds a field or changes a type. Strings with a line feed are
// refused instead (TestTalosRefusesWhatWouldNotStayData).
func TestTalosHostileStringsStayData(t *testing.T) {
	in := testTalosInput()
	in.Spec.Taints = nil
	in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{}}
	for i, s := range hostileStrings {
		if strings.Contains(s, "\n") {
			continue
		}
		in.Spec.Taints = append(in.Spec.Taints, v1.Taint{Key: fmt.Sprintf("example.com/t%d", i), Value: s, Effect: "NoExecute"})
		in.Spec.Taints = append(in.Spec.Taints, v1.Taint{Key: s, Effect: "NoSchedule"})
		in.Spec.Talos.Sysctls[fmt.Sprintf("net.core.hostile%d", i)] = v1.SysctlValue(s)
	}
	_, raw := renderTalos(t, in)

	got, _ := raw.MachineConfig.MachineKubelet.KubeletExtraConfig.Object["registerWithTaints"].([]any)
	if len(got) != len(in.Spec.Taints) {
		t.Fatalf("registerWithTaints has %d entries, want %d: %#v", len(got), len(in.Spec.Taints), got)
	}
	for i, want := range in.Spec.Taints {
		g, _ := got[i].(map[string]any)
		if g["key"] != want.Key || want.Value != "" && g["value"] != want.Value || g["effect"] != string(want.Effect) {
			t.Errorf("taint %d = %#v, want %+v", i, g, want)
		}
		if _, has := g["value"]; want.Value == "" && has {
			t.Errorf("taint %d has a value %#v, want none", i, g["value"])
		}
	}
	for k, want := range in.Spec.Talos.Sysctls {
		if got := raw.MachineConfig.MachineSysctls[k]; got != string(want) {
			t.Errorf("sysctl %s = %q, want %q", k, got, want)
		}
	}
	if n := len(raw.MachineConfig.MachineSysctls); n != len(in.Spec.Talos.Sysctls) {
		t.Errorf("%d sysctls, want %d", n, len(in.Spec.Talos.Sysctls))
	}
}

// TestTalosRefusesWhatWouldNotStayData covers the places where a tenant string leaves
// YAML for another text format: the kubelet's comma-separated --node-labels flag and
// sysctl names that Talos turns into paths. Those are refused, never rendered.
func TestTalosRefusesWhatWouldNotStayData(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(in *Input)
		substr string
	}{
		{"label value with a comma adds a label", func(in *Input) {
			in.Spec.Labels = map[string]v1.LabelValue{"tier": "x,node-role.kubernetes.io/control-plane="}
		}, `node label "tier"`},
		{"label value with an equals sign", func(in *Input) {
			in.Spec.Labels = map[string]v1.LabelValue{"tier": "a=b"}
		}, `node label "tier"`},
		{"label key with a comma", func(in *Input) {
			in.Spec.Labels = map[string]v1.LabelValue{"a=b,c": "d"}
		}, `node label key "a=b,c"`},
		{"label key in a reserved domain", func(in *Input) {
			in.Spec.Labels = map[string]v1.LabelValue{"node-role.kubernetes.io/control-plane": ""}
		}, "reserved domain"},
		{"tenant topology label", func(in *Input) {
			in.Spec.Labels = map[string]v1.LabelValue{"topology.kubernetes.io/zone": "x"}
		}, "reserved domain"},
		{"location zone that is not a label value", func(in *Input) {
			in.Location.Zone = "a b"
		}, `"topology.kubernetes.io/zone"`},
		{"sysctl name that climbs out of /proc/sys", func(in *Input) {
			in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net/../../../var/lib/x": "1"}}
		}, "sysctl"},
		{"sysctl name with an empty component", func(in *Input) {
			in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net.//.x": "1"}}
		}, "sysctl"},
		{"kernel module path", func(in *Input) {
			in.Spec.KernelModules = []string{"../../evil"}
		}, "kernel module"},
		{"kernel argument with a space", func(in *Input) {
			in.Class.Talos = &v1.TalosClassSpec{KernelArgs: []string{"console=ttyS0 init=/bin/sh"}}
		}, "kernel argument"},
		{"taint value with a line break", func(in *Input) {
			in.Spec.Taints = []v1.Taint{{Key: "a", Value: "\nb", Effect: "NoSchedule"}}
		}, "line break"},
		{"taint key with a line break", func(in *Input) {
			in.Spec.Taints = []v1.Taint{{Key: "\t\n", Effect: "NoSchedule"}}
		}, "line break"},
		{"sysctl value with a line break", func(in *Input) {
			in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"vm.x": "1\n- injected: true"}}
		}, "line break"},
		{"osImage with a line break", func(in *Input) {
			in.Spec.OSImage = "\nregistry.example.com/installer:v1"
		}, "line break"},
		{"taint effect", func(in *Input) {
			in.Spec.Taints = []v1.Taint{{Key: "a", Effect: "Evict"}}
		}, "effect"},
		{"CA bundle carrying a private key", func(in *Input) {
			in.TalosSecrets.ClusterCACert += "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"
		}, `"EC PRIVATE KEY"`},
		{"CA that is not PEM", func(in *Input) {
			in.TalosSecrets.MachineCACert = "not a certificate"
		}, "machine CA certificate"},
		{"missing machine token", func(in *Input) {
			in.TalosSecrets.MachineToken = ""
		}, "machine token"},
		{"missing bootstrap token", func(in *Input) {
			in.TalosSecrets.BootstrapToken = ""
		}, "bootstrap token"},
		{"missing control-plane host", func(in *Input) {
			in.Cluster.ControlPlaneHost = ""
		}, "control-plane endpoint host"},
		{"control-plane host with a path", func(in *Input) {
			in.Cluster.ControlPlaneHost = "evil.example.com/x?"
		}, "control-plane endpoint host"},
		{"missing control-plane port", func(in *Input) {
			in.Cluster.ControlPlanePort = 0
		}, "port"},
		{"apiserver ClusterIP", func(in *Input) {
			in.Cluster.APIServer.ClusterIP = "10.96.12.34 evil"
		}, "ClusterIP"},
		{"service CIDR", func(in *Input) {
			in.Cluster.ServiceCIDRs = []string{"10.95.0.0"}
		}, "service CIDR"},
		{"DNS domain", func(in *Input) {
			in.Cluster.DNSDomain = "cluster.local\nevil: true"
		}, "cluster DNS domain"},
		{"no Talos release and no osImage", func(in *Input) {
			in.Spec.OSImage = ""
			in.Release.Talos = catalog.Talos{}
		}, "Talos version or schematic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := testTalosFullInput()
			tc.edit(in)
			data, err := TalosMachineConfig(in)
			if err == nil {
				t.Fatalf("rendered, want an error containing %q:\n%s", tc.substr, data)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error %q does not contain %q", err, tc.substr)
			}
			if data != "" {
				t.Errorf("returned data with the error")
			}
		})
	}
}

// tenantStringRoundTrip renders a pool with s in every tenant string that reaches the
// machine config as YAML data (a taint's key and value, a sysctl's value, the osImage,
// and a node label's value when s is a valid one), loads the config with Talos' strict
// loader (unknown fields are errors) and checks that each reads back exactly as s, and
// that the fields around it are still the ones render wrote: however s is quoted, it
// adds no field, changes no type and alters no value. A string with a line feed must be
// refused instead.
func tenantStringRoundTrip(t *testing.T, s string) {
	t.Helper()
	in := testTalosInput()
	in.Spec.Taints = []v1.Taint{{Key: s, Value: s, Effect: "NoSchedule"}, {Key: "k", Value: s, Effect: "NoExecute"}}
	in.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net.core.x": v1.SysctlValue(s), "vm.y": "1"}}
	in.Spec.OSImage = s
	label := len(k8svalidation.IsValidLabelValue(s)) == 0
	if label {
		in.Spec.Labels = map[string]v1.LabelValue{"example.com/l": v1.LabelValue(s)}
	}
	data, err := TalosMachineConfig(in)
	if strings.Contains(s, "\n") {
		if err == nil || !strings.Contains(err.Error(), "line break") {
			t.Fatalf("%q: error %v, want a refusal of the line break\n%s", s, err, data)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	cfg, err := configloader.NewFromBytes([]byte(data))
	if err != nil {
		t.Fatalf("Talos refuses the config with %q: %v\n%s", s, err, data)
	}
	m := cfg.RawV1Alpha1().MachineConfig
	fail := func(what string, got any) {
		t.Helper()
		t.Fatalf("%s reads back as %#v, want %q\n%s", what, got, s, data)
	}

	extra := m.MachineKubelet.KubeletExtraConfig.Object
	if got := slices.Sorted(maps.Keys(extra)); !slices.Equal(got, []string{"evictionHard", "kubeReserved", "maxPods", "registerWithTaints", "systemReserved"}) {
		fail("kubelet extraConfig's fields", got)
	}
	taints, _ := extra["registerWithTaints"].([]any)
	if len(taints) != 2 {
		fail("registerWithTaints", extra["registerWithTaints"])
	}
	for i, effect := range []string{"NoSchedule", "NoExecute"} {
		want := map[string]any{"key": "k", "value": s, "effect": effect}
		if i == 0 {
			want["key"] = s
		}
		if s == "" {
			delete(want, "value")
		}
		if !reflect.DeepEqual(taints[i], want) {
			fail(fmt.Sprintf("taint %d", i), taints[i])
		}
	}
	if want := map[string]string{"net.core.x": s, "vm.y": "1"}; !maps.Equal(m.MachineSysctls, want) {
		fail("sysctls", m.MachineSysctls)
	}
	if got := m.MachineInstall.InstallImage; s != "" && got != s {
		fail("install image", got)
	}
	if got := m.MachineKubelet.KubeletExtraArgs; label && !maps.Equal(got, map[string]string{"node-labels": "example.com/l=" + s}) {
		fail("kubelet extraArgs", got)
	}
	if m.MachineType != "worker" || m.MachineInstall.InstallDisk != talosInstallDisk {
		t.Fatalf("machine type %q, install disk %q around %q", m.MachineType, m.MachineInstall.InstallDisk, s)
	}
}

// tenantStringCases are strings that YAML could read as something else: indicators,
// keys, comments, booleans, nulls and numbers of YAML 1.1 and 1.2, control characters,
// line breaks YAML folds, a byte order mark, and bytes that are not UTF-8.
var tenantStringCases = []string{
	"", " ", "a ", " a", "a:", "a: b", "a:b", "-", "- a", "?", "? a", "!", "&a", "*a", "|", ">",
	"#", "a #b", "a#b", "%TAG", "@a", "`a", "[a]", "{a}", "a,b", "a=b", "=", "<<",
	"y", "Y", "n", "N", "yes", "No", "ON", "off", "true", "False", "null", "Null", "~",
	"0", "1", "-1", "+1", "1.5", ".5", "1e3", "0x1F", "0o17", "017", "1_000", "1:20", ".inf", "-.Inf", ".NaN",
	"2001-12-14", "2001-12-14t21:59:43.10-05:00", "v1alpha1", "/dev/vda", "https://a:6443",
	"\x00", "\x1f", "\x7f", "\u0085", "\u00a0", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff",
	"\U0001F600", "a\r\nb", "a\n", "a\n\n", " \n", "\\", "\"", "'", "''", "\\\"",
	"\xff", "a\xc3", "\xed\xa0\x80",
}

func TestTalosTenantStringsRoundTrip(t *testing.T) {
	for _, s := range append(slices.Clone(tenantStringCases), hostileStrings...) {
		tenantStringRoundTrip(t, s)
	}
	// Every character of the Basic Multilingual Plane and some beyond, in runs.
	var run strings.Builder
	for r := rune(0); r <= 0x10ffff; r++ {
		if r >= 0xd800 && r <= 0xdfff || r > 0xffff && r%0x1001 != 0 {
			continue
		}
		run.WriteRune(r)
		if run.Len() > 3000 {
			tenantStringRoundTrip(t, run.String())
			run.Reset()
		}
	}
	tenantStringRoundTrip(t, run.String())
}

func FuzzTalosTenantStrings(f *testing.F) {
	for _, s := range append(slices.Clone(tenantStringCases), hostileStrings...) {
		f.Add(s)
	}
	f.Fuzz(tenantStringRoundTrip)
}
