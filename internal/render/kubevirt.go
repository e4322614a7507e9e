package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
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

	storage := &cdiv1.StorageSpec{
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: in.Spec.EphemeralStorage}},
	}
	if kv.StorageClassName != "" {
		storage.StorageClassName = &kv.StorageClassName
	}

	evictionStrategy := kubevirtv1.EvictionStrategy(kv.EvictionStrategy)
	if evictionStrategy == "" {
		evictionStrategy = kubevirtv1.EvictionStrategyExternal
	}
	vm := kubevirtv1.VirtualMachineSpec{
		RunStrategy: ptr(kubevirtv1.RunStrategyAlways),
		DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{
			ObjectMeta: metav1.ObjectMeta{Name: systemDisk},
			Spec:       cdiv1.DataVolumeSpec{Source: source, Storage: storage},
		}},
		Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{names.LabelPool: names.LabelValue(in.Name)}},
			Spec: kubevirtv1.VirtualMachineInstanceSpec{
				EvictionStrategy: &evictionStrategy,
				Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
					Disks: []kubevirtv1.Disk{{
						Name:       systemDisk,
						BootOrder:  ptr[uint](1),
						DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}},
					}},
					Interfaces: []kubevirtv1.Interface{bridgeInterface(podNetwork)},
				}},
				Networks: []kubevirtv1.Network{{Name: podNetwork, NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
				Volumes: []kubevirtv1.Volume{{
					Name:         systemDisk,
					VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: systemDisk}},
				}},
			},
		},
	}
	spec := &vm.Template.Spec
	if in.Machine.InstanceType != "" {
		vm.Instancetype = &kubevirtv1.InstancetypeMatcher{Kind: instancetypeKind, Name: in.Machine.InstanceType}
	} else {
		cores := uint32((in.Machine.MilliCPU + 999) / 1000)
		memory := resource.NewQuantity(in.Machine.MemoryBytes, resource.BinarySI)
		spec.Domain.CPU = &kubevirtv1.CPU{Cores: cores}
		spec.Domain.Memory = &kubevirtv1.Memory{Guest: memory}
	}
	if in.Class.OS == v1.OSKairos {
		// Kairos disks boot with EFI. KubeVirt turns secure boot on by default, which
		// needs SMM; the worker disk is not signed for it, so it is off, explicitly.
		spec.Domain.Firmware = &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: ptr(false)}}}
	}
	for _, n := range kv.Networks {
		spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, bridgeInterface(n.Name))
		spec.Networks = append(spec.Networks, kubevirtv1.Network{
			Name:          n.Name,
			NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: n.NetworkName}},
		})
	}
	for i, g := range in.Spec.GPUs {
		for j := range gpuCount(g.Count) {
			spec.Domain.Devices.HostDevices = append(spec.Domain.Devices.HostDevices,
				kubevirtv1.HostDevice{Name: fmt.Sprintf("gpu%d-%d", i, j), DeviceName: g.DeviceName})
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

// bridgeInterface is a VM interface bridged to the network of the same name.
func bridgeInterface(name string) kubevirtv1.Interface {
	return kubevirtv1.Interface{
		Name:                   name,
		InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}},
	}
}

// systemDiskSource is where CDI imports the boot disk from: the Talos Image Factory disk
// of the pool's schematic (talosSchematic) for Talos, the class's image or the catalog's
// disk for Kairos.
func systemDiskSource(in *Input) (*cdiv1.DataVolumeSource, error) {
	switch in.Class.OS {
	case v1.OSTalos:
		id, err := talosSchematic(in)
		if err != nil {
			return nil, fmt.Errorf("class %q: %w", in.ClassName, err)
		}
		url := "https://" + in.Factory.DiskImageBase + "/" + id + "/" + in.Release.Talos.Version + "/" + talosPlatform + "-amd64.raw.xz"
		return &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: url}}, nil
	case v1.OSKairos:
		ref := in.Release.Kairos.Disk
		if in.Class.Image != nil {
			ref = in.Class.Image.Reference
		}
		if ref == "" {
			return nil, &ImageNotAvailableError{Minor: in.Release.Minor}
		}
		registry := &cdiv1.DataVolumeSourceRegistry{URL: ptr("docker://" + ref)}
		if in.ImagePullSecret != "" {
			registry.SecretRef = ptr(in.ImagePullSecret)
		}
		return &cdiv1.DataVolumeSource{Registry: registry}, nil
	default:
		return nil, fmt.Errorf("class os %q is neither Talos nor Kairos", in.Class.OS)
	}
}

// ImageNotAvailableError says no worker disk exists for the pool's Kubernetes minor.
type ImageNotAvailableError struct{ Minor string }

func (e *ImageNotAvailableError) Error() string {
	return fmt.Sprintf("no Kairos worker disk is published for Kubernetes %s yet: use another minor, or a class with its own spec.image", e.Minor)
}

func ptr[T any](v T) *T { return &v }
