package render

import (
	"encoding/json"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// JSON writers for the template specs contentHash hashes. Each writes exactly what
// encoding/json.Marshal writes for its type: the fields in declaration order under their
// json names, omitempty fields left out when empty, map keys sorted, strings escaped the
// way encoding/json escapes them (HTML characters included). specjson_test.go fills
// every field of every type, by reflection, and compares with encoding/json, so a field
// added to a provider type fails the test until it is written here too.

// appendJSONKey writes `"key":` for a field name (which needs no escaping), after a
// comma unless it opens the object.
func appendJSONKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendJSONMapKey writes a map key, which unlike a field name needs escaping.
func appendJSONMapKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	return append(appendJSONString(b, key), ':')
}

// appendJSONItem starts an array element, after a comma unless it is the first.
func appendJSONItem(b []byte) []byte {
	if b[len(b)-1] != '[' {
		b = append(b, ',')
	}
	return b
}

// appendJSONField writes `"key":"value"`.
func appendJSONField(b []byte, key, value string) []byte {
	return appendJSONString(appendJSONKey(b, key), value)
}

// appendJSONFieldOmitEmpty writes `"key":"value"` unless value is empty.
func appendJSONFieldOmitEmpty(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	return appendJSONField(b, key, value)
}

// jsonPlain marks the bytes encoding/json copies into a string as they are: printable
// ASCII (and DEL) but for the quote, the backslash and the HTML characters.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// appendJSONString writes s as encoding/json does. Printable ASCII and the escapes a
// rendered document needs (newline, tab, quote, backslash, the HTML characters) are
// handled here; a string with anything else (other control characters, non-ASCII,
// invalid UTF-8) is rare and handed to encoding/json, so its rules need no copy here.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	mark := len(b)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if jsonPlain[c] {
			continue
		}
		b = append(b, s[start:i]...)
		start = i + 1
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '<', '>', '&':
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			j, _ := json.Marshal(s) // a string always encodes
			return append(b[:mark], j...)
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONStringMap writes a map[string]string with its keys sorted.
func appendJSONStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	var buf [8]string
	for _, k := range sortedKeys(buf[:0], m) {
		b = appendJSONString(appendJSONMapKey(b, k), m[k])
	}
	return append(b, '}')
}

// appendJSONQuantityMap writes a map[string]resource.Quantity with its keys sorted.
func appendJSONQuantityMap(b []byte, m map[string]resource.Quantity) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	var buf [8]string
	for _, k := range sortedKeys(buf[:0], m) {
		b = appendJSONQuantity(appendJSONMapKey(b, k), m[k])
	}
	return append(b, '}')
}

// appendJSONQuantity writes what encoding/json writes for a quantity: its MarshalJSON,
// a quoted string of number and suffix that needs no escaping.
func appendJSONQuantity(b []byte, q resource.Quantity) []byte {
	j, _ := q.MarshalJSON() // never fails
	return append(b, j...)
}

// sortedKeys appends a map's keys to keys in encoding/json's order (byte-wise); callers
// pass a small array's slice, so a small map's keys stay on the stack.
func sortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendJSONStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for _, s := range ss {
		b = appendJSONString(appendJSONItem(b), s)
	}
	return append(b, ']')
}

// Talos

func appendTalosSpecJSON(b []byte, s *talos.TalosConfigTemplateSpec) []byte {
	c := &s.Template.Spec
	b = append(b, `{"template":{"spec":{`...)
	b = appendJSONField(b, "generateType", c.GenerateType)
	b = appendJSONFieldOmitEmpty(b, "talosVersion", c.TalosVersion)
	b = appendJSONFieldOmitEmpty(b, "data", c.Data)
	return append(b, "}}}"...)
}

// Kairos

func appendKairosSpecJSON(b []byte, s *kairos.KairosConfigTemplateSpec) []byte {
	c := &s.Template.Spec
	b = append(b, `{"template":{"spec":{`...)
	b = appendJSONField(b, "role", c.Role)
	b = appendJSONField(b, "distribution", c.Distribution)
	b = appendJSONField(b, "kubernetesVersion", c.KubernetesVersion)
	b = appendJSONFieldOmitEmpty(b, "userName", c.UserName)
	if r := c.UserPasswordSecretRef; r != nil {
		b = append(appendJSONKey(b, "userPasswordSecretRef"), '{')
		b = appendJSONField(b, "name", r.Name)
		b = appendJSONFieldOmitEmpty(b, "key", r.Key)
		b = append(b, '}')
	}
	b = appendJSONFieldOmitEmpty(b, "sshPublicKey", c.SSHPublicKey)
	if len(c.DNSServers) > 0 {
		b = appendJSONStrings(appendJSONKey(b, "dnsServers"), c.DNSServers)
	}
	if len(c.Files) > 0 {
		b = append(appendJSONKey(b, "files"), '[')
		for i := range c.Files {
			f := &c.Files[i]
			b = append(appendJSONItem(b), '{')
			b = appendJSONField(b, "path", f.Path)
			b = appendJSONField(b, "content", f.Content)
			b = appendJSONFieldOmitEmpty(b, "owner", f.Owner)
			b = appendJSONFieldOmitEmpty(b, "permissions", f.Permissions)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if k := c.Kubeadm; k != nil {
		b = append(appendJSONKey(b, "kubeadm"), '{')
		b = append(appendJSONKey(b, "joinConfiguration"), '{')
		j := &k.JoinConfiguration
		if r := j.NodeRegistration; r != nil {
			b = appendKairosNodeRegistrationJSON(appendJSONKey(b, "nodeRegistration"), r)
		}
		if p := j.Patches; p != nil {
			b = append(appendJSONKey(b, "patches"), '{')
			b = appendJSONField(b, "directory", p.Directory)
			b = append(b, '}')
		}
		b = append(b, "}}"...)
	}
	return append(b, "}}}"...)
}

func appendKairosNodeRegistrationJSON(b []byte, r *kairos.NodeRegistration) []byte {
	b = append(b, '{')
	if len(r.KubeletExtraArgs) > 0 {
		b = append(appendJSONKey(b, "kubeletExtraArgs"), '[')
		for _, a := range r.KubeletExtraArgs {
			b = append(appendJSONItem(b), '{')
			b = appendJSONField(b, "name", a.Name)
			b = appendJSONField(b, "value", a.Value)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(r.Taints) > 0 {
		b = append(appendJSONKey(b, "taints"), '[')
		for _, t := range r.Taints {
			b = append(appendJSONItem(b), '{')
			b = appendJSONField(b, "key", t.Key)
			b = appendJSONFieldOmitEmpty(b, "value", t.Value)
			b = appendJSONField(b, "effect", t.Effect)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// KubeVirt

func appendKubevirtSpecJSON(b []byte, s *capk.KubevirtMachineTemplateSpec) []byte {
	m := &s.Template.Spec
	b = append(b, `{"template":{"spec":{"virtualMachineTemplate":{`...)
	b = appendCAPKObjectMetaJSON(appendJSONKey(b, "metadata"), &m.VirtualMachineTemplate.Metadata)
	b = appendVirtualMachineSpecJSON(appendJSONKey(b, "spec"), &m.VirtualMachineTemplate.Spec)
	b = append(b, `},"virtualMachineBootstrapCheck":{`...)
	b = appendJSONField(b, "checkStrategy", m.VirtualMachineBootstrapCheck.CheckStrategy)
	return append(b, "}}}}"...)
}

func appendCAPKObjectMetaJSON(b []byte, m *capk.ObjectMeta) []byte {
	b = append(b, '{')
	b = appendJSONFieldOmitEmpty(b, "name", m.Name)
	if len(m.Labels) > 0 {
		b = appendJSONStringMap(appendJSONKey(b, "labels"), m.Labels)
	}
	if len(m.Annotations) > 0 {
		b = appendJSONStringMap(appendJSONKey(b, "annotations"), m.Annotations)
	}
	return append(b, '}')
}

func appendVirtualMachineSpecJSON(b []byte, vm *capk.VirtualMachineSpec) []byte {
	b = append(b, '{')
	b = appendJSONField(b, "runStrategy", vm.RunStrategy)
	if t := vm.Instancetype; t != nil {
		b = append(appendJSONKey(b, "instancetype"), '{')
		b = appendJSONField(b, "kind", t.Kind)
		b = appendJSONField(b, "name", t.Name)
		b = append(b, '}')
	}
	b = append(appendJSONKey(b, "template"), '{')
	b = appendCAPKObjectMetaJSON(appendJSONKey(b, "metadata"), &vm.Template.Metadata)
	b = appendVMISpecJSON(appendJSONKey(b, "spec"), &vm.Template.Spec)
	b = append(b, '}')
	if len(vm.DataVolumeTemplates) > 0 {
		b = append(appendJSONKey(b, "dataVolumeTemplates"), '[')
		for i := range vm.DataVolumeTemplates {
			b = appendDataVolumeTemplateJSON(appendJSONItem(b), &vm.DataVolumeTemplates[i])
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendVMISpecJSON(b []byte, s *capk.VMISpec) []byte {
	b = append(b, '{')
	b = appendDomainSpecJSON(appendJSONKey(b, "domain"), &s.Domain)
	b = appendJSONFieldOmitEmpty(b, "evictionStrategy", s.EvictionStrategy)
	if len(s.Networks) > 0 {
		b = append(appendJSONKey(b, "networks"), '[')
		for _, n := range s.Networks {
			b = append(appendJSONItem(b), '{')
			b = appendJSONField(b, "name", n.Name)
			if n.Pod != nil {
				b = append(appendJSONKey(b, "pod"), "{}"...)
			}
			if n.Multus != nil {
				b = append(appendJSONKey(b, "multus"), '{')
				b = appendJSONField(b, "networkName", n.Multus.NetworkName)
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(s.Volumes) > 0 {
		b = append(appendJSONKey(b, "volumes"), '[')
		for _, v := range s.Volumes {
			b = append(appendJSONItem(b), '{')
			b = appendJSONField(b, "name", v.Name)
			if v.DataVolume != nil {
				b = append(appendJSONKey(b, "dataVolume"), '{')
				b = appendJSONField(b, "name", v.DataVolume.Name)
				b = append(b, '}')
			}
			if v.CloudInit != nil {
				b = append(appendJSONKey(b, "cloudInitConfigDrive"), '{')
				b = appendJSONFieldOmitEmpty(b, "userData", v.CloudInit.UserData)
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendDomainSpecJSON(b []byte, d *capk.DomainSpec) []byte {
	b = append(b, '{')
	if c := d.CPU; c != nil {
		b = append(appendJSONKey(b, "cpu"), '{')
		b = appendJSONUintOmitEmpty(b, "cores", c.Cores)
		b = appendJSONUintOmitEmpty(b, "sockets", c.Sockets)
		b = appendJSONUintOmitEmpty(b, "threads", c.Threads)
		b = append(b, '}')
	}
	if m := d.Memory; m != nil {
		b = append(appendJSONKey(b, "memory"), '{')
		if m.Guest != nil {
			b = appendJSONQuantity(appendJSONKey(b, "guest"), *m.Guest)
		}
		b = append(b, '}')
	}
	if r := d.Resources; r != nil {
		b = append(appendJSONKey(b, "resources"), '{')
		if len(r.Requests) > 0 {
			b = appendJSONQuantityMap(appendJSONKey(b, "requests"), r.Requests)
		}
		if len(r.Limits) > 0 {
			b = appendJSONQuantityMap(appendJSONKey(b, "limits"), r.Limits)
		}
		b = append(b, '}')
	}
	if f := d.Firmware; f != nil {
		b = append(appendJSONKey(b, "firmware"), '{')
		if l := f.Bootloader; l != nil {
			b = append(appendJSONKey(b, "bootloader"), '{')
			if e := l.EFI; e != nil {
				b = append(appendJSONKey(b, "efi"), '{')
				b = appendJSONBoolOmitEmpty(b, "secureBoot", e.SecureBoot)
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if f := d.Features; f != nil {
		b = append(appendJSONKey(b, "features"), '{')
		if s := f.SMM; s != nil {
			b = append(appendJSONKey(b, "smm"), '{')
			b = appendJSONBoolOmitEmpty(b, "enabled", s.Enabled)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = append(appendJSONKey(b, "devices"), '{')
	dev := &d.Devices
	if len(dev.Disks) > 0 {
		b = append(appendJSONKey(b, "disks"), '[')
		for _, disk := range dev.Disks {
			b = append(appendJSONItem(b), '{')
			b = appendJSONField(b, "name", disk.Name)
			if disk.BootOrder != nil {
				b = strconv.AppendUint(appendJSONKey(b, "bootOrder"), uint64(*disk.BootOrder), 10)
			}
			if disk.Disk != nil {
				b = append(appendJSONKey(b, "disk"), '{')
				b = appendJSONFieldOmitEmpty(b, "bus", disk.Disk.Bus)
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(dev.Interfaces) > 0 {
		b = append(appendJSONKey(b, "interfaces"), '[')
		for _, n := range dev.Interfaces {
			b = append(appendJSONItem(b), '{')
			b = appendJSONField(b, "name", n.Name)
			if n.Bridge != nil {
				b = append(appendJSONKey(b, "bridge"), "{}"...)
			}
			if n.Masquerade != nil {
				b = append(appendJSONKey(b, "masquerade"), "{}"...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(dev.HostDevices) > 0 {
		b = append(appendJSONKey(b, "hostDevices"), '[')
		for _, h := range dev.HostDevices {
			b = append(appendJSONItem(b), '{')
			b = appendJSONField(b, "name", h.Name)
			b = appendJSONField(b, "deviceName", h.DeviceName)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, "}}"...)
}

func appendDataVolumeTemplateJSON(b []byte, t *capk.DataVolumeTemplateSpec) []byte {
	b = append(b, '{')
	b = appendCAPKObjectMetaJSON(appendJSONKey(b, "metadata"), &t.Metadata)
	b = append(appendJSONKey(b, "spec"), '{')
	src := &t.Spec.Source
	b = append(appendJSONKey(b, "source"), '{')
	if h := src.HTTP; h != nil {
		b = append(appendJSONKey(b, "http"), '{')
		b = appendJSONField(b, "url", h.URL)
		b = append(b, '}')
	}
	if r := src.Registry; r != nil {
		b = append(appendJSONKey(b, "registry"), '{')
		b = appendJSONField(b, "url", r.URL)
		b = appendJSONFieldOmitEmpty(b, "secretRef", r.SecretRef)
		b = appendJSONFieldOmitEmpty(b, "pullMethod", r.PullMethod)
		b = append(b, '}')
	}
	b = append(b, '}')
	st := &t.Spec.Storage
	b = append(appendJSONKey(b, "storage"), '{')
	if st.StorageClassName != nil {
		b = appendJSONField(b, "storageClassName", *st.StorageClassName)
	}
	if len(st.AccessModes) > 0 {
		b = appendJSONStrings(appendJSONKey(b, "accessModes"), st.AccessModes)
	}
	b = append(appendJSONKey(b, "resources"), '{')
	b = appendJSONQuantityMap(appendJSONKey(b, "requests"), st.Resources.Requests)
	return append(b, "}}}}"...)
}

func appendJSONUintOmitEmpty(b []byte, key string, v uint32) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendUint(appendJSONKey(b, key), uint64(v), 10)
}

func appendJSONBoolOmitEmpty(b []byte, key string, v *bool) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendBool(appendJSONKey(b, key), *v)
}
