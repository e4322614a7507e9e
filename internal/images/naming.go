package images

import (
	"fmt"
	"strings"

	"github.com/kairos-io/kairos-sdk/versioneer"
)

// Image names follow kairos-sdk's versioneer package (v0.11.0, versioneer/versioneer.go),
// the code Kairos itself names its images and artifacts with:
//
//	image:    <registry-and-org>/<flavor>:<flavor_release>-<variant>-<arch>-<model>-<kairos version>[-<prefix><software version>]
//	          (Artifact.ContainerName; "+" becomes "-", tags cannot hold it)
//	bootable: kairos-<flavor>-<flavor_release>-<variant>-<arch>-<model>-<kairos version>[-<prefix><software version>]
//	          (Artifact.BootableName)
//
// e.g. quay.io/kairos/ubuntu:24.04-core-amd64-generic-v3.7.2 for a Kairos base image.
// Two names kairos-sdk has no helper for are derived from those:
//   - a disk image is the OS image's name with "-img" appended to the tag: versioneer's
//     TagList.Images (versioneer/tag_list.go, ignoredImageSuffixes) treats "-img" tags as
//     images that carry a disk, not an OS, so both live in one repository;
//   - a multi-architecture index has no single arch, so its tag is the per-arch tag with
//     the <arch> field left out.

const (
	// VariantCore is Kairos's variant without a Kubernetes distribution: the base the
	// worker OS image is built from.
	VariantCore = "core"
	// VariantStandard is Kairos's variant with a Kubernetes distribution, which the
	// worker OS image is (kubelet and kubeadm).
	VariantStandard = "standard"
	// SoftwarePrefix names the Kubernetes distribution in the software-version field,
	// as "k3s" does in quay.io/kairos/...-k3sv1.29.3-k3s1: workers join with upstream
	// kubeadm (the "kubeadm" distribution of cluster-api-provider-kairos).
	SoftwarePrefix = "kubeadm"
	// diskSuffix marks a tag whose image carries a disk (see above).
	diskSuffix = "-img"
)

// Naming holds what the names of one build are made of besides the catalog's minor and
// architecture.
type Naming struct {
	// Flavor and FlavorRelease are the Linux distribution of the base, e.g. ubuntu 24.04.
	Flavor        string `json:"flavor"`
	FlavorRelease string `json:"flavorRelease"`
	// Model is the Kairos model (device); "generic" for virtual machines.
	Model string `json:"model"`
	// KairosVersion is the Kairos release of the base image, e.g. v3.7.2.
	KairosVersion string `json:"kairosVersion"`
	// BaseRegistry is the registry and org of the Kairos base images, e.g. quay.io/kairos.
	BaseRegistry string `json:"baseRegistry"`
	// Registry is the registry and org the worker images are pushed under, e.g.
	// ghcr.io/nodegroup-io/kairos-worker (images land in <Registry>/<Flavor>).
	Registry string `json:"registry"`
}

// DefaultNaming is what the images build uses unless told otherwise. Kairos v3.7.2 is the
// last release line whose project-published artifacts include Ubuntu (from v4 the project
// publishes Hadron only); change it with plan --kairos-version.
var DefaultNaming = Naming{
	Flavor:        "ubuntu",
	FlavorRelease: "24.04",
	Model:         "generic",
	KairosVersion: "v3.7.2",
	BaseRegistry:  "quay.io/kairos",
	Registry:      "ghcr.io/nodegroup-io/kairos-worker",
}

func (n Naming) artifact(variant, arch, kubernetes string) *versioneer.Artifact {
	a := &versioneer.Artifact{
		Flavor:        n.Flavor,
		FlavorRelease: n.FlavorRelease,
		Variant:       variant,
		Model:         n.Model,
		Arch:          arch,
		Version:       n.KairosVersion,
	}
	if kubernetes != "" {
		a.SoftwareVersion = kubernetes
		a.SoftwareVersionPrefix = SoftwarePrefix
	}
	return a
}

// BaseImage is the Kairos core image the worker OS image of arch is built from.
func (n Naming) BaseImage(arch string) (string, error) {
	return n.artifact(VariantCore, arch, "").ContainerName(n.BaseRegistry)
}

// OSImage is the worker OS image of a Kubernetes release and arch.
func (n Naming) OSImage(kubernetes, arch string) (string, error) {
	return n.artifact(VariantStandard, arch, kubernetes).ContainerName(n.Registry)
}

// DiskImage is the containerDisk image made from OSImage(kubernetes, arch).
func (n Naming) DiskImage(kubernetes, arch string) (string, error) {
	s, err := n.OSImage(kubernetes, arch)
	return s + diskSuffix, err
}

// DiskFile is the qcow2 file AuroraBoot makes from OSImage(kubernetes, arch), named as
// Kairos names its bootable artifacts.
func (n Naming) DiskFile(kubernetes, arch string) (string, error) {
	s, err := n.artifact(VariantStandard, arch, kubernetes).BootableName()
	return s + ".qcow2", err
}

// OSIndex and DiskIndex name the multi-architecture indexes of a release: the per-arch
// name with the <arch> field left out.
func (n Naming) OSIndex(kubernetes string, arches []string) (string, error) {
	return n.index(kubernetes, arches, "")
}

func (n Naming) DiskIndex(kubernetes string, arches []string) (string, error) {
	return n.index(kubernetes, arches, diskSuffix)
}

func (n Naming) index(kubernetes string, arches []string, suffix string) (string, error) {
	if len(arches) == 0 {
		return "", fmt.Errorf("no architecture")
	}
	s, err := n.OSImage(kubernetes, arches[0])
	if err != nil {
		return "", err
	}
	// The tag reads <flavor_release>-<variant>-<arch>-<model>-...; the variant and model
	// around the arch make this replacement hit the arch field and nothing else.
	field := "-" + VariantStandard + "-" + arches[0] + "-" + n.Model + "-"
	if !strings.Contains(s, field) {
		return "", fmt.Errorf("%s: no %q field to drop the arch from", s, field)
	}
	return strings.Replace(s, field, "-"+VariantStandard+"-"+n.Model+"-", 1) + suffix, nil
}
