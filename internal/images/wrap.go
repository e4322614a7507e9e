package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The containerDisk layout KubeVirt boots from: one file under /disk, readable by the
// qemu user (uid/gid 107) that virt-launcher runs as. See KubeVirt's containerDisk
// documentation ("ADD --chown=107:107 disk.qcow2 /disk/").
const (
	DiskDir  = "disk"
	DiskPath = DiskDir + "/disk.qcow2"
	QEMUID   = 107
	// DiskFileMode and DiskDirMode: the disk is read-only for its owner and group, the
	// folder readable and searchable by all.
	DiskFileMode = 0o440
	DiskDirMode  = 0o555
)

// Annotations a disk carries to name the OS image it was made from (the OCI
// pre-defined annotation keys for a base image).
const (
	AnnotationBaseName   = "org.opencontainers.image.base.name"
	AnnotationBaseDigest = "org.opencontainers.image.base.digest"
)

// epoch is every timestamp in a wrapped image, so the same disk gives the same digest.
var epoch = time.Unix(0, 0).UTC()

// qcow2Magic starts every qcow2 file ("QFI\xfb").
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// Wrapped is a containerDisk: an image for one architecture, or an index of one image per
// architecture.
type Wrapped struct {
	Image v1.Image
	Index v1.ImageIndex
}

// Digest is the digest of the image or index: what gets pinned.
func (w *Wrapped) Digest() (v1.Hash, error) {
	if w.Index != nil {
		return w.Index.Digest()
	}
	return w.Image.Digest()
}

// Wrap makes a containerDisk of qcow2 disks, one per architecture (arch -> path). osImage
// is the OS image the disks were made from, by digest; it is recorded in the annotations
// so pin can check it. The result depends only on the disks' contents and osImage: file
// names, owners and times on this machine do not enter it.
func Wrap(disks map[string]string, osImage string) (*Wrapped, error) {
	if len(disks) == 0 {
		return nil, errors.New("no disk to wrap")
	}
	base, err := name.NewDigest(osImage)
	if err != nil {
		return nil, fmt.Errorf("OS image %q must be a reference by digest (repository@sha256:...): %w", osImage, err)
	}
	anns := map[string]string{
		AnnotationBaseName:   base.String(),
		AnnotationBaseDigest: base.DigestStr(),
	}

	arches := make([]string, 0, len(disks))
	for a := range disks {
		if !slices.Contains(Arches, a) {
			return nil, fmt.Errorf("architecture %q is not built: choose from %v", a, Arches)
		}
		arches = append(arches, a)
	}
	slices.Sort(arches) // map order must not reach the index

	imgs := make([]v1.Image, 0, len(arches))
	for _, a := range arches {
		img, err := diskImage(disks[a], a, anns)
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, img)
	}
	if len(imgs) == 1 {
		return &Wrapped{Image: imgs[0]}, nil
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range imgs {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arches[i]}},
		})
	}
	idx = mutate.Annotations(idx, anns).(v1.ImageIndex)
	return &Wrapped{Index: idx}, nil
}

// diskImage is the containerDisk image of one qcow2 file for one architecture.
func diskImage(file, arch string, anns map[string]string) (v1.Image, error) {
	layer, err := DiskLayer(file)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: epoch},
			CreatedBy: "nodegroup-images wrap: " + DiskPath,
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, anns).(v1.Image), nil
}

// DiskLayer is the gzip layer holding file at /disk/disk.qcow2. The tar is streamed from
// the file each time the layer is read, never held in memory: disks are gigabytes.
func DiskLayer(file string) (v1.Layer, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", file)
	}
	if err := checkQCOW2(file); err != nil {
		return nil, err
	}
	size := fi.Size()
	opener := func() (io.ReadCloser, error) { return diskTar(file, size) }
	return tarball.LayerFromOpener(opener, tarball.WithMediaType(types.OCILayer))
}

func checkQCOW2(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	magic := make([]byte, len(qcow2Magic))
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, qcow2Magic) {
		return fmt.Errorf("%s is not a qcow2 image (no QFI\\xfb magic): KubeVirt is given the disk as qcow2", file)
	}
	return nil
}

// diskTar streams the layer's tar: the /disk folder, then the disk. Every field that
// could vary between machines is fixed.
func diskTar(file string, size int64) (io.ReadCloser, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer f.Close()
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir, Name: DiskDir + "/", Mode: DiskDirMode,
			Uid: QEMUID, Gid: QEMUID, ModTime: epoch,
		})
		if err == nil {
			err = tw.WriteHeader(&tar.Header{
				Typeflag: tar.TypeReg, Name: DiskPath, Mode: DiskFileMode, Size: size,
				Uid: QEMUID, Gid: QEMUID, ModTime: epoch,
			})
		}
		if err == nil {
			// Exactly the size in the header: a disk that changes while it is wrapped
			// fails here instead of making a layer that does not match its digest.
			var n int64
			n, err = io.CopyN(tw, f, size)
			if err == nil {
				var probe [1]byte
				if k, _ := f.Read(probe[:]); k > 0 {
					err = fmt.Errorf("%s grew while it was being wrapped", path.Base(file))
				}
			} else if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%s shrank while it was being wrapped (%d of %d bytes)", path.Base(file), n, size)
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}
