package render

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/golden"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// proxmoxInput is the default Talos pool on a Proxmox location that selects its VM
// template by tags and names the tenant API server by a domain.
func proxmoxInput(t testing.TB, mutate func(in *Input, pve *v1.ProxmoxProvider)) *Input {
	in := baseInput(t)
	in.LocationName, in.Spec.LocationName = "pve-lab", "pve-lab"
	pve := &v1.ProxmoxProvider{
		CredentialsRef:  v1.SecretReference{Namespace: "platform", Name: "pve-lab"},
		TenantAPIServer: &v1.ProxmoxTenantAPIServer{Domain: "k8s.lab.example.com", Port: 443},
		IPv4:            &v1.ProxmoxIPPool{Addresses: []string{"10.20.1.0/25", "10.20.0.10-10.20.0.99"}, Prefix: 16, Gateway: "10.20.0.1"},
		DNSServers:      []string{"10.20.0.3", "10.20.0.2"},
		AllowedNodes:    []string{"pve2", "pve1"},
		Network:         v1.ProxmoxNetwork{Bridge: "vmbr0", VLAN: 120},
		Template:        v1.ProxmoxTemplate{Tags: []string{"worker", "talos"}},
		BootDisk:        "scsi0",
	}
	in.Location = v1.LocationSpec{Region: "eu-central", Zone: "lab", Provider: v1.LocationProvider{Type: v1.ProviderProxmox, Proxmox: pve}}
	if mutate != nil {
		mutate(in, pve)
	}
	return in
}

// satellite is the satellite of the pool's cluster on the pool's location.
func satellite(in *Input) *SatelliteInput {
	return &SatelliteInput{Namespace: in.Namespace, Cluster: in.Cluster, LocationName: in.LocationName, Location: in.Location,
		ControlPlaneVersion: in.KubernetesVersion}
}

// proxmoxObjects renders a pool on a Proxmox location (its templates, MachineDeployment
// and health check) and its cluster's satellite on the pool's location: its Cluster,
// SatelliteControlPlane and ProxmoxCluster.
func proxmoxObjects(in *Input) ([]client.Object, error) {
	out, err := Render(in)
	if err != nil {
		return nil, err
	}
	sat := satellite(in)
	cluster, err := SatelliteCluster(sat)
	if err != nil {
		return nil, err
	}
	cp, err := SatelliteControlPlane(sat)
	if err != nil {
		return nil, err
	}
	infra, err := ProxmoxCluster(sat)
	if err != nil {
		return nil, err
	}
	return append(out.Objects(), cluster, cp, infra), nil
}

// proxmoxGoldenCases are the Proxmox render cases held by golden files.
func proxmoxGoldenCases(t testing.TB) map[string]*Input {
	return map[string]*Input{
		"proxmox-tags": proxmoxInput(t, nil),
		"proxmox-template-ids": proxmoxInput(t, func(in *Input, pve *v1.ProxmoxProvider) {
			pve.Template = v1.ProxmoxTemplate{SourceNode: "pve1", IDs: []v1.ProxmoxTemplateID{
				{TalosVersion: "v1.10.7", TemplateID: 9010}, {TalosVersion: in.Release.Talos.Version, TemplateID: 9011}}}
			pve.Storage = "local-lvm"
			pve.AllowedNodes = nil
		}),
		"proxmox-dual-stack-own-endpoint": proxmoxInput(t, func(in *Input, pve *v1.ProxmoxProvider) {
			pve.TenantAPIServer = nil
			in.Cluster.ControlPlaneHost, in.Cluster.ControlPlanePort = "203.0.113.10", 6443
			pve.IPv6 = &v1.ProxmoxIPPool{Addresses: []string{"2001:db8:1::10-2001:db8:1::ff"}, Prefix: 64, Gateway: "2001:db8:1::1"}
			pve.Network.VLAN = 0
			pve.BootDisk = "virtio0"
			in.Spec.Resources = &v1.MachineResources{CPU: resource.MustParse("3"), Memory: resource.MustParse("6000Mi")}
			in.Machine = MachineSize{MilliCPU: 3000, MemoryBytes: 6000 << 20}
			in.Spec.EphemeralStorage = resource.MustParse("40G")
		}),
		"proxmox-no-template-for-release-refused": proxmoxInput(t, func(in *Input, pve *v1.ProxmoxProvider) {
			pve.Template = v1.ProxmoxTemplate{SourceNode: "pve1", IDs: []v1.ProxmoxTemplateID{{TalosVersion: "v1.10.7", TemplateID: 9010}}}
		}),
		"proxmox-kairos-refused": proxmoxInput(t, func(in *Input, _ *v1.ProxmoxProvider) {
			in.ClassName, in.Class, in.TalosSecrets = "kairos", v1.NodeGroupClassSpec{OS: v1.OSKairos}, nil
		}),
		"proxmox-long-endpoint-refused": proxmoxInput(t, func(in *Input, pve *v1.ProxmoxProvider) {
			in.Cluster.Name = strings.Repeat("c", 64)
		}),
	}
}

func TestProxmoxGolden(t *testing.T) {
	for name, in := range proxmoxGoldenCases(t) {
		t.Run(name, func(t *testing.T) {
			objs, err := proxmoxObjects(in)
			if strings.HasSuffix(name, "-refused") {
				if err == nil {
					t.Fatal("rendered, want refused")
				}
				golden.Check(t, name, []byte("error: "+err.Error()+"\n"))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			first := marshalObjects(t, objs)
			again, err := proxmoxObjects(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, marshalObjects(t, again)) {
				t.Fatal("two renders of the same input differ")
			}
			golden.Check(t, name, first)
		})
	}
}

func marshalObjects(t *testing.T, objs []client.Object) []byte {
	t.Helper()
	var docs [][]byte
	for _, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	return bytes.Join(docs, []byte("---\n"))
}

// TestProxmoxPoolRunsUnderItsSatellite: a pool on a Proxmox location renders a
// MachineDeployment and health check under the tenant cluster's satellite on that
// location, labelled with the tenant's Cluster for the autoscaler, and a Talos config
// that joins through the location's endpoint with the tenant's own identity and nothing
// of the management cluster's Services; the templates are the pool's ProxmoxMachineTemplate
// and TalosConfigTemplate.
func TestProxmoxPoolRunsUnderItsSatellite(t *testing.T) {
	in := proxmoxInput(t, nil)
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	sat := names.SatelliteName(in.Cluster.Name, in.LocationName)
	md, mhc := out.MachineDeployment, out.MachineHealthCheck
	if md.Spec.ClusterName != sat || md.Spec.Template.Spec.ClusterName != sat || mhc.Spec.ClusterName != sat {
		t.Errorf("MachineDeployment %q/%q and health check %q, want all under the satellite %s",
			md.Spec.ClusterName, md.Spec.Template.Spec.ClusterName, mhc.Spec.ClusterName, sat)
	}
	for _, sel := range []map[string]string{md.Spec.Selector.MatchLabels, md.Spec.Template.Labels, mhc.Spec.Selector.MatchLabels, md.Labels} {
		if sel[names.LabelClusterName] != sat {
			t.Errorf("cluster label %q, want the satellite's %s (Cluster API's webhooks set it so)", sel[names.LabelClusterName], sat)
		}
	}
	if md.Labels[names.LabelTenantCluster] != in.Cluster.Name {
		t.Errorf("MachineDeployment labels %v, want the tenant cluster %s for the autoscaler", md.Labels, in.Cluster.Name)
	}
	if md.Name != names.MachineDeploymentName(in.Cluster.Name, in.Name) {
		t.Errorf("MachineDeployment %s, want the pool's usual name", md.Name)
	}
	infra := md.Spec.Template.Spec.InfrastructureRef
	if infra.Kind != "ProxmoxMachineTemplate" || infra.Name != out.Infrastructure.GetName() {
		t.Errorf("infrastructureRef %+v, want the pool's ProxmoxMachineTemplate %s", infra, out.Infrastructure.GetName())
	}
	if !strings.Contains(md.Annotations[names.AnnotationCapacityLabels], names.NodeLabelLocation+"=pve-lab") ||
		!strings.Contains(md.Annotations[names.AnnotationCapacityLabels], names.NodeLabelZone+"=lab") {
		t.Errorf("capacity labels %q, want the location and its zone", md.Annotations[names.AnnotationCapacityLabels])
	}
	cfg := out.Bootstrap.(*talos.TalosConfigTemplate).Spec.Template.Spec.Data
	for _, want := range []string{"https://tenant-a.tenant-a.k8s.lab.example.com:443", "disk: /dev/sda", in.TalosSecrets.MachineToken, in.TalosSecrets.BootstrapToken} {
		if !strings.Contains(cfg, want) {
			t.Errorf("Talos config lacks %q:\n%s", want, cfg)
		}
	}
	for _, never := range []string{in.Cluster.APIServer.ClusterIP, in.Cluster.ManagementDNS, "svc.cluster.local", "tenant-a.svc"} {
		if strings.Contains(cfg, never) {
			t.Errorf("Talos config holds the management cluster's %q:\n%s", never, cfg)
		}
	}
	// The same pool on a KubeVirt location runs under the tenant's Cluster.
	kv := baseInput(t)
	kvOut, err := Render(kv)
	if err != nil {
		t.Fatal(err)
	}
	if got := kvOut.MachineDeployment.Spec.ClusterName; got != kv.Cluster.Name {
		t.Errorf("KubeVirt pool under %q, want the tenant's Cluster %s", got, kv.Cluster.Name)
	}
	// A refusal of the template itself comes through as that refusal.
	in.Location.Provider.Proxmox.Template = v1.ProxmoxTemplate{SourceNode: "pve1", IDs: []v1.ProxmoxTemplateID{{TalosVersion: "v0.0.1", TemplateID: 100}}}
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "has no VM template for Talos") {
		t.Errorf("Render of a pool without a template = %v", err)
	}
}

// TestProxmoxDiskSizeNeverWraps: a disk size beyond what a VM can have is refused, also
// one above 2^64 bytes, which a resource.Quantity's Value wraps around to a small one.
func TestProxmoxDiskSizeNeverWraps(t *testing.T) {
	for size, want := range map[string]string{"40Gi": "", "4Gi": "between", "18446744084446969856": "between",
		"9223372036854775807": "between", "100Ei": "between", "2147483648Gi": "between", "2147483647Gi": ""} {
		in := proxmoxInput(t, nil)
		in.Spec.EphemeralStorage = resource.MustParse(size)
		tmpl, err := ProxmoxMachineTemplate(in)
		switch {
		case want == "" && err != nil:
			t.Errorf("ephemeralStorage %s: %v", size, err)
		case want == "" && int64(tmpl.Spec.Template.Spec.Disks.BootVolume.SizeGB)<<30 != in.Spec.EphemeralStorage.Value():
			t.Errorf("ephemeralStorage %s: a %d GiB disk", size, tmpl.Spec.Template.Spec.Disks.BootVolume.SizeGB)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("ephemeralStorage %s rendered (%v), want refused", size, err)
		}
	}
}

// TestProxmoxTemplateFollowsTheTalosRelease: a new Talos release selects another VM
// template (another tag or ID) and so renames the machine template; the location's
// set order does not.
func TestProxmoxTemplateFollowsTheTalosRelease(t *testing.T) {
	in := proxmoxInput(t, nil)
	a, err := ProxmoxMachineTemplate(in)
	if err != nil {
		t.Fatal(err)
	}
	sel := a.Spec.Template.Spec.TemplateSelector
	want := []string{"talos", "talos-" + in.Release.Talos.Version, "worker"}
	if sel == nil || strings.Join(sel.MatchTags, ",") != strings.Join(want, ",") || sel.MatchPolicy != "uniqueSubset" {
		t.Fatalf("templateSelector = %+v, want tags %v, uniqueSubset", sel, want)
	}

	reordered := proxmoxInput(t, func(_ *Input, pve *v1.ProxmoxProvider) {
		pve.Template.Tags = []string{"talos", "worker"}
		pve.AllowedNodes = []string{"pve1", "pve2"}
	})
	if b, err := ProxmoxMachineTemplate(reordered); err != nil || b.Name != a.Name {
		t.Errorf("reordering the location's sets renamed the template: %s -> %v (%v)", a.Name, b, err)
	}

	bumped := proxmoxInput(t, func(in *Input, _ *v1.ProxmoxProvider) { in.Release.Talos.Version = "v1.99.0" })
	b, err := ProxmoxMachineTemplate(bumped)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name == a.Name || !strings.Contains(strings.Join(b.Spec.Template.Spec.TemplateSelector.MatchTags, ","), "talos-v1.99.0") {
		t.Errorf("a new Talos release kept template %s or its tags: %v", b.Name, b.Spec.Template.Spec.TemplateSelector.MatchTags)
	}
}

// TestProxmoxClusterNames: the satellite's InfraCluster and its credentials copy are
// named by the names package, in the tenant's namespace.
func TestProxmoxClusterNames(t *testing.T) {
	in := proxmoxInput(t, nil)
	c, err := ProxmoxCluster(satellite(in))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != names.SatelliteName("tenant-a", "pve-lab") || c.Namespace != "tenant-a" {
		t.Errorf("ProxmoxCluster %s/%s", c.Namespace, c.Name)
	}
	ref := c.Spec.CredentialsRef
	if ref == nil || ref.Name != names.SatelliteCredentialsName("tenant-a", "pve-lab") || ref.Namespace != "tenant-a" {
		t.Errorf("credentialsRef = %+v, want the copy in tenant-a, never the platform's Secret", ref)
	}
	if got := c.Spec.ControlPlaneEndpoint; got.Host != "tenant-a.tenant-a.k8s.lab.example.com" || got.Port != 443 {
		t.Errorf("controlPlaneEndpoint = %+v", got)
	}
	in.Location.Provider.Proxmox.TenantAPIServer = nil
	for host, refused := range map[string]bool{"10.0.0.5": false, "fd00::5": false, "tenant.example.com": false,
		"tenant.example.com\n  port: 1": true, "tenant.example.com:6443": true, "$(reboot)": true,
		"fe80::1%eth0": true, "fe80::1%a b/c\n": true} {
		in.Cluster.ControlPlaneHost, in.Cluster.ControlPlanePort = host, 6443
		c, err := ProxmoxCluster(satellite(in))
		switch {
		case refused && (err == nil || !strings.Contains(err.Error(), "neither an IP address nor a DNS name")):
			t.Errorf("the Cluster's endpoint host %q rendered: %v", host, err)
		case !refused && (err != nil || c.Spec.ControlPlaneEndpoint.Host != host):
			t.Errorf("the Cluster's endpoint host %q: %v, %+v", host, err, c)
		}
	}
	in.Cluster.ControlPlaneHost, in.Cluster.ControlPlanePort = "", 0
	if _, err := ProxmoxCluster(satellite(in)); err == nil || !strings.Contains(err.Error(), "no spec.controlPlaneEndpoint yet") {
		t.Errorf("a cluster without an endpoint rendered: %v", err)
	}
}

// proxmoxHostile puts strings the Location CRD would refuse into every free-text field
// of the location that reaches a Proxmox object.
func proxmoxHostile(t testing.TB) *Input {
	return proxmoxInput(t, func(in *Input, pve *v1.ProxmoxProvider) {
		pve.Network.Bridge = "vmbr0\n- evil: true"
		pve.Storage = "local; rm -rf / #"
		pve.Template.Tags = []string{"$(reboot)", "talos\"\nkey: v"}
		pve.AllowedNodes = []string{"`id`", "{{ .Values.x }}"}
		pve.DNSServers = []string{"10.0.0.2\nnameserver 6.6.6.6"}
		pve.IPv4.Addresses = []string{"10.0.0.10-10.0.0.20: {a: b}"}
		pve.IPv4.Gateway = "10.0.0.1 # x"
		pve.BootDisk = "scsi0\n"
		pve.TenantAPIServer = nil // the Cluster's own endpoint, which must be a host (below)
	})
}

// TestProxmoxHostileStringsStayData: whatever a location's free-text fields hold reaches
// the rendered objects only as the value of its own field, never as structure: the YAML
// written reads back into the same objects, with the same keys as a clean render.
func TestProxmoxHostileStringsStayData(t *testing.T) {
	clean, err := proxmoxObjects(proxmoxInput(t, func(_ *Input, pve *v1.ProxmoxProvider) {
		pve.Storage, pve.TenantAPIServer = "local-lvm", nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := proxmoxObjects(proxmoxHostile(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, obj := range objs {
		data := marshalObjects(t, []client.Object{obj})
		back := obj.DeepCopyObject().(client.Object)
		if err := yaml.UnmarshalStrict(data, back); err != nil {
			t.Fatalf("%s does not read back strictly: %v\n%s", obj.GetObjectKind().GroupVersionKind().Kind, err, data)
		}
		if !bytes.Equal(mustJSON(t, back), mustJSON(t, obj)) {
			t.Errorf("%s reads back differently:\n%s", obj.GetObjectKind().GroupVersionKind().Kind, data)
		}
		if got, want := keyPaths(t, data), keyPaths(t, marshalObjects(t, []client.Object{clean[i]})); got != want {
			t.Errorf("hostile strings changed the structure:\n%s\nwant\n%s", got, want)
		}
	}
}

// keyPaths lists every key path of a YAML document, sorted, skipping values.
func keyPaths(t *testing.T, data []byte) string {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if prefix == ".metadata" && k == "name" {
					continue // the template's name is a hash of its content
				}
				paths = append(paths, prefix+"."+k)
				walk(prefix+"."+k, e)
			}
		case []any:
			for _, e := range v {
				walk(prefix+"[]", e)
			}
		}
	}
	walk("", doc)
	slices.Sort(paths)
	return strings.Join(slices.Compact(paths), "\n")
}
