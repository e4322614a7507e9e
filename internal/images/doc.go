// Package images is the worker image build tool behind cmd/nodegroup-images: it plans
// the Kairos worker builds for every Kubernetes minor of the catalog (images/versions.yaml),
// checks release binaries against their SHA-512, wraps the EFI disks AuroraBoot makes into
// KubeVirt containerDisk images, pushes them, and pins their digests back into the
// catalog.
//
// Everything here runs without a container engine: images are written and pushed with
// go-containerregistry. The two steps that do need one, building the Kairos OS image and
// running AuroraBoot on it, belong to the images build (make images); Plan lists them and
// marks them so.
//
// The chain of trust runs one way. kubeadm is checked against its SHA-512 before it goes
// into an OS image; the OS image is pushed and known by digest before AuroraBoot turns it
// into a disk; the disk records that digest (wrap --os-image); and Pin writes nothing
// until it has pulled both images back by digest and found that the disk names the OS
// image being pinned with it.
package images
