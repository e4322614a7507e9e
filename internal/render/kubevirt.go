package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
)

const (
	// systemDisk is the name of the boot disk, its volume and its DataVolume template.
	systemDisk = "system"
	// podNetwork is the name of the interface on the management cluster's pod network.
	podNetwork = "default"
	// instancetypeKind is the cluster-wide KubeVirt instancetype kind pools name.
	instancetypeKind = "VirtualMachineClusterInstancetype"
	// talosPlatform is the Talos image flavour for KubeVirt under CAPK: CAPK hands the
	// bootstrap data over a config drive, which the OpenStack image reads and the
	// nocloud image ignores.
	talosPlatform = "openstack"
)

// kubevirtMachineTemplate renders the VM every machine of the pool gets (without its
// name: the name is the hash of this content).
func kubevirtMachineTemplate(in *Input) (*capk.KubevirtMachineTemplate, error) {
	kv := in.Location.Provider.KubeVirt
	if kv == nil {
		return nil, fmt.Errorf("location %q has no kubevirt provider", in.LocationName)
	}
	source, err := systemDiskSource(in)
	if err != nil {
		return nil, err
	}

	storage := capk.StorageSpec{
		Resources: capk.StorageResources{Requests: map[string]resource.Quantity{"storage": in.Spec.EphemeralStorage}},
	}
	if kv.StorageClassName != "" {
		storage.StorageClassName = &kv.StorageClassName
	}

	vm := capk.VirtualMachineSpec{
		RunStrategy: "Always",
		DataVolumeTemplates: []capk.DataVolumeTemplateSpec{{
			Metadata: capk.ObjectMeta{Name: systemDisk},
			Spec:     capk.DataVolumeSpec{Source: source, Storage: storage},
		}},
		Template: capk.VMITemplateSpec{
			Metadata: capk.ObjectMeta{Labels: map[string]string{LabelPool: LabelValue(in.Name)}},
			Spec: capk.VMISpec{
				EvictionStrategy: string(kv.EvictionStrategy),
				Domain: capk.DomainSpec{Devices: capk.Devices{
					Disks:      []capk.Disk{{Name: systemDisk, BootOrder: ptr[uint32](1), Disk: &capk.DiskTarget{Bus: "virtio"}}},
					Interfaces: []capk.Interface{{Name: podNetwork, Bridge: &capk.Empty{}}},
				}},
				Networks: []capk.Network{{Name: podNetwork, Pod: &capk.Empty{}}},
				Volumes:  []capk.Volume{{Name: systemDisk, DataVolume: &capk.DataVolumeSource{Name: systemDisk}}},
			},
		},
	}
	if vm.Template.Spec.EvictionStrategy == "" {
		vm.Template.Spec.EvictionStrategy = "External"
	}
	spec := &vm.Template.Spec
	if in.Machine.InstanceType != "" {
		vm.Instancetype = &capk.InstancetypeMatcher{Kind: instancetypeKind, Name: in.Machine.InstanceType}
	} else {
		cores := uint32((in.Machine.MilliCPU + 999) / 1000)
		memory := resource.NewQuantity(in.Machine.MemoryBytes, resource.BinarySI)
		spec.Domain.CPU = &capk.CPU{Cores: cores}
		spec.Domain.Memory = &capk.Memory{Guest: memory}
	}
	if in.Class.OS == v1.OSKairos {
		// Kairos disks boot with EFI. KubeVirt turns secure boot on by default, which
		// needs SMM; the worker disk is not signed for it, so it is off, explicitly.
		spec.Domain.Firmware = &capk.Firmware{Bootloader: &capk.Bootloader{EFI: &capk.EFI{SecureBoot: ptr(false)}}}
	}
	for _, n := range kv.Networks {
		spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, capk.Interface{Name: n.Name, Bridge: &capk.Empty{}})
		spec.Networks = append(spec.Networks, capk.Network{Name: n.Name, Multus: &capk.MultusNetwork{NetworkName: n.NetworkName}})
	}
	for i, g := range in.Spec.GPUs {
		for j := range gpuCount(g.Count) {
			spec.Domain.Devices.HostDevices = append(spec.Domain.Devices.HostDevices,
				capk.HostDevice{Name: fmt.Sprintf("gpu%d-%d", i, j), DeviceName: g.DeviceName})
		}
	}

	return &capk.KubevirtMachineTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: capkAPIVersion, Kind: "KubevirtMachineTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace},
		Spec: capk.KubevirtMachineTemplateSpec{Template: capk.KubevirtMachineTemplateResource{Spec: capk.KubevirtMachineSpec{
			VirtualMachineTemplate: capk.VirtualMachineTemplateSpec{Spec: vm},
			// Neither Talos nor our Kairos workers run SSH for CAPK to probe.
			VirtualMachineBootstrapCheck: capk.VirtualMachineBootstrapCheck{CheckStrategy: "none"},
		}}},
	}, nil
}

// systemDiskSource is where CDI imports the boot disk from: the Talos Image Factory disk
// of the pool's schematic (talosSchematic) for Talos, the class's image or the catalog's
// disk for Kairos.
func systemDiskSource(in *Input) (capk.DataVolumeSource2, error) {
	switch in.Class.OS {
	case v1.OSTalos:
		id, err := talosSchematic(in)
		if err != nil {
			return capk.DataVolumeSource2{}, fmt.Errorf("class %q: %w", in.ClassName, err)
		}
		url := "https://" + in.Factory.DiskImageBase + "/" + id + "/" + in.Release.Talos.Version + "/" + talosPlatform + "-amd64.raw.xz"
		return capk.DataVolumeSource2{HTTP: &capk.HTTPSource{URL: url}}, nil
	case v1.OSKairos:
		ref := in.Release.Kairos.Disk
		if in.Class.Image != nil {
			ref = in.Class.Image.Reference
		}
		if ref == "" {
			return capk.DataVolumeSource2{}, &ImageNotAvailableError{Minor: in.Release.Minor}
		}
		return capk.DataVolumeSource2{Registry: &capk.RegistrySource{URL: "docker://" + ref, SecretRef: in.ImagePullSecret}}, nil
	default:
		return capk.DataVolumeSource2{}, fmt.Errorf("class os %q is neither Talos nor Kairos", in.Class.OS)
	}
}

// ImageNotAvailableError says no worker disk exists for the pool's Kubernetes minor.
type ImageNotAvailableError struct{ Minor string }

func (e *ImageNotAvailableError) Error() string {
	return fmt.Sprintf("no Kairos worker disk is published for Kubernetes %s yet: use another minor, or a class with its own spec.image", e.Minor)
}

func ptr[T any](v T) *T { return &v }
