package images

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// PinInput is what pin writes where.
type PinInput struct {
	// VersionsFile is the catalog to edit, images/versions.yaml.
	VersionsFile string
	// TagDir is where the tag files go; empty means next to VersionsFile.
	TagDir string
	// Minor is the catalog entry to pin, e.g. v1.35.
	Minor string
	// Disk and OSImage are the references as pushed, repository[:tag]@sha256:....
	Disk    string
	OSImage string
}

// PinResult is what pin wrote.
type PinResult struct {
	Disk, OSImage                 string // the values written to versions.yaml
	DiskTagFile, OSImageTagFile   string // the tag files' paths
	DiskTagValue, OSImageTagValue string // and their contents
}

// Pin records a pushed disk and the OS image it was made from in the catalog entry of a
// minor: kairos.disk and kairos.osImage in versions.yaml, each as repository@sha256:...,
// and the tag files images/kairos-worker-<minor>.tag (the disk) and
// images/kairos-worker-base-<minor>.tag (the OS image), each holding the reference as
// pushed, repository[:tag]@sha256:..., on one line.
//
// Nothing is written unless both images pull back by digest, the disk is a containerDisk
// whose annotations name that OS image's digest, and every architecture of the disk is
// one of the OS image's. In versions.yaml exactly two lines change, the two values; every
// other byte stays as it was, and the result must still parse as a catalog in which
// nothing but those two values differs.
func Pin(in PinInput, opts ...remote.Option) (*PinResult, error) {
	osRef, err := name.NewDigest(in.OSImage)
	if err != nil {
		return nil, fmt.Errorf("OS image %q must be the pushed reference by digest: %w", in.OSImage, err)
	}
	diskRef, err := name.NewDigest(in.Disk)
	if err != nil {
		return nil, fmt.Errorf("disk %q must be the pushed reference by digest: %w", in.Disk, err)
	}

	osDesc, err := PullByDigest(in.OSImage, opts...)
	if err != nil {
		return nil, fmt.Errorf("OS image: %w", err)
	}
	osArches, err := arches(osDesc)
	if err != nil {
		return nil, fmt.Errorf("OS image %s: %w", in.OSImage, err)
	}
	diskDesc, err := PullByDigest(in.Disk, opts...)
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := checkDisk(diskDesc, osRef.DigestStr(), osArches); err != nil {
		return nil, fmt.Errorf("disk %s: %w", in.Disk, err)
	}

	res := &PinResult{
		Disk:            pinned(diskRef),
		OSImage:         pinned(osRef),
		DiskTagFile:     tagFilePath(in.TagDir, in.VersionsFile, DiskTagFile(in.Minor)),
		OSImageTagFile:  tagFilePath(in.TagDir, in.VersionsFile, OSImageTagFile(in.Minor)),
		DiskTagValue:    diskRef.String(),
		OSImageTagValue: osRef.String(),
	}

	old, err := os.ReadFile(in.VersionsFile)
	if err != nil {
		return nil, err
	}
	updated, err := SetKairos(old, in.Minor, res.Disk, res.OSImage)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.VersionsFile, err)
	}
	if err := checkOnlyKairosChanged(old, updated, in.Minor, res.Disk, res.OSImage); err != nil {
		return nil, fmt.Errorf("%s: %w", in.VersionsFile, err)
	}

	// The tag files first: versions.yaml, the record the operator is built from, changes
	// last, once everything else is in place.
	if err := writeFileAtomic(res.DiskTagFile, []byte(res.DiskTagValue+"\n")); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(res.OSImageTagFile, []byte(res.OSImageTagValue+"\n")); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(in.VersionsFile, updated); err != nil {
		return nil, err
	}
	return res, nil
}

// pinned is the catalog's form of a reference: repository@sha256:..., without the tag
// (internal/catalog refuses a tag next to the digest).
func pinned(d name.Digest) string { return d.Context().Name() + "@" + d.DigestStr() }

// arches lists the architectures of an image (its config's) or index (its platforms).
func arches(desc *remote.Descriptor) ([]string, error) {
	if desc.MediaType.IsIndex() {
		ii, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		m, err := ii.IndexManifest()
		if err != nil {
			return nil, err
		}
		var out []string
		for _, d := range m.Manifests {
			if d.Platform != nil {
				out = append(out, d.Platform.Architecture)
			}
		}
		return out, nil
	}
	if !desc.MediaType.IsImage() {
		return nil, fmt.Errorf("media type %s is neither an image nor an index", desc.MediaType)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	return []string{cf.Architecture}, nil
}

// checkDisk checks that desc is a containerDisk made from the OS image osDigest: an
// image, or an index of images, each with one layer, each annotated with osDigest, each of
// an architecture the OS image has. The layers are not downloaded: their digests are in
// the manifests the digest covers.
func checkDisk(desc *remote.Descriptor, osDigest string, osArches []string) error {
	var imgs []v1.Image
	var platforms []string
	if desc.MediaType.IsIndex() {
		ii, err := desc.ImageIndex()
		if err != nil {
			return err
		}
		m, err := ii.IndexManifest()
		if err != nil {
			return err
		}
		if got := m.Annotations[AnnotationBaseDigest]; got != osDigest {
			return fmt.Errorf("was made from OS image %q, not %s", got, osDigest)
		}
		for _, d := range m.Manifests {
			if d.Platform == nil {
				return fmt.Errorf("index entry %s has no platform", d.Digest)
			}
			img, err := ii.Image(d.Digest)
			if err != nil {
				return err
			}
			imgs = append(imgs, img)
			platforms = append(platforms, d.Platform.Architecture)
		}
	} else {
		img, err := desc.Image()
		if err != nil {
			return err
		}
		imgs = append(imgs, img)
		platforms = append(platforms, "")
	}
	for i, img := range imgs {
		m, err := img.Manifest()
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		at := cf.Architecture
		switch {
		case m.Annotations[AnnotationBaseDigest] != osDigest:
			return fmt.Errorf("%s image was made from OS image %q, not %s", at, m.Annotations[AnnotationBaseDigest], osDigest)
		case len(m.Layers) != 1:
			return fmt.Errorf("%s image has %d layers, a containerDisk has one", at, len(m.Layers))
		case platforms[i] != "" && platforms[i] != at:
			return fmt.Errorf("index says %s for an %s image", platforms[i], at)
		case !slices.Contains(osArches, at):
			return fmt.Errorf("%s image, but the OS image is built for %v only", at, osArches)
		}
	}
	return nil
}

var (
	entryRE = regexp.MustCompile(`^(\s*)- minor:\s*"([^"]*)"\s*(#.*)?$`)
	valueRE = regexp.MustCompile(`^(\s*)([A-Za-z][A-Za-z0-9]*):(\s*)"[^"\\]*"(\s*(#.*)?)$`)
)

// SetKairos sets kairos.disk and kairos.osImage of the release of minor in a
// versions.yaml, rewriting those two lines in place and nothing else. It relies on the
// file's own editing rules (one value per line, strings double-quoted, each release
// starting with its minor) and fails if the file does not follow them where it looks.
func SetKairos(data []byte, minor, disk, osImage string) ([]byte, error) {
	return setSection(data, minor, "kairos", map[string]string{"disk": disk, "osImage": osImage})
}

// SetKubeadmSHA512 sets kubeadmSHA512.<arch> of the release of minor, in place.
func SetKubeadmSHA512(data []byte, minor, arch, sum string) ([]byte, error) {
	return setSection(data, minor, "kubeadmSHA512", map[string]string{arch: sum})
}

// setSection sets the given keys of one section (such as kairos:) of the release of
// minor, rewriting exactly those lines.
func setSection(data []byte, minor, section string, want map[string]string) ([]byte, error) {
	for _, v := range want {
		if strings.ContainsAny(v, "\"\\\n\r") {
			return nil, fmt.Errorf("%q cannot be written as a plain double-quoted value", v)
		}
	}
	sectionRE := regexp.MustCompile(`^(\s*)` + regexp.QuoteMeta(section) + `:\s*(#.*)?$`)
	lines := bytes.SplitAfter(data, []byte("\n"))
	body := func(i int) (string, string) { // a line without and with its line ending
		s := string(lines[i])
		trimmed := strings.TrimRight(s, "\r\n")
		return trimmed, s[len(trimmed):]
	}
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " \t")) }
	blank := func(s string) bool {
		t := strings.TrimSpace(s)
		return t == "" || strings.HasPrefix(t, "#")
	}

	start, dash := -1, 0
	for i := range lines {
		s, _ := body(i)
		if m := entryRE.FindStringSubmatch(s); m != nil && m[2] == minor {
			if start >= 0 {
				return nil, fmt.Errorf("minor %s has two entries", minor)
			}
			start, dash = i, len(m[1])
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no release entry `- minor: %q`", minor)
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		s, _ := body(i)
		if !blank(s) && indent(s) <= dash {
			end = i
			break
		}
	}

	kairos, kairosIndent := -1, 0
	for i := start; i < end; i++ {
		s, _ := body(i)
		if m := sectionRE.FindStringSubmatch(s); m != nil {
			if kairos >= 0 {
				return nil, fmt.Errorf("release %s has two %s: lines", minor, section)
			}
			kairos, kairosIndent = i, len(m[1])
		}
	}
	if kairos < 0 {
		return nil, fmt.Errorf("release %s has no `%s:` line", minor, section)
	}

	found := map[string]int{}
	out := slices.Clone(lines)
	for i := kairos + 1; i < end; i++ {
		s, eol := body(i)
		if blank(s) {
			continue
		}
		if indent(s) <= kairosIndent {
			break
		}
		m := valueRE.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		if _, wanted := want[m[2]]; !wanted {
			continue
		}
		if _, dup := found[m[2]]; dup {
			return nil, fmt.Errorf("release %s has two %s.%s lines", minor, section, m[2])
		}
		found[m[2]] = i
		out[i] = []byte(m[1] + m[2] + ":" + m[3] + `"` + want[m[2]] + `"` + m[4] + eol)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := found[k]; !ok {
			return nil, fmt.Errorf("release %s has no `%s: \"...\"` line under %s:", minor, k, section)
		}
	}
	return bytes.Join(out, nil), nil
}

// checkOnlyKairosChanged parses both versions of the catalog and checks that the edit did
// what it should and nothing more.
func checkOnlyKairosChanged(old, updated []byte, minor, disk, osImage string) error {
	before, err := catalog.Parse(old)
	if err != nil {
		return fmt.Errorf("before the edit: %w", err)
	}
	after, err := catalog.Parse(updated)
	if err != nil {
		return fmt.Errorf("after the edit: %w", err)
	}
	if len(before.Releases) != len(after.Releases) {
		return errors.New("the edit changed the number of releases")
	}
	hit := false
	for i := range after.Releases {
		if after.Releases[i].Minor == minor {
			hit = true
			if after.Releases[i].Kairos != (catalog.Kairos{Disk: disk, OSImage: osImage}) {
				return fmt.Errorf("after the edit, release %s has kairos %+v", minor, after.Releases[i].Kairos)
			}
			after.Releases[i].Kairos = before.Releases[i].Kairos
		}
	}
	if !hit {
		return fmt.Errorf("the catalog has no release %s", minor)
	}
	if !reflect.DeepEqual(before, after) {
		return errors.New("the edit changed more than kairos.disk and kairos.osImage")
	}
	return nil
}

// writeFileAtomic replaces a file by renaming a complete new one over it, keeping its
// mode (0644 for a new file), so a reader never sees half a catalog.
func writeFileAtomic(file string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(file); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err2 := tmp.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// tagFilePath is where pin writes a tag file: next to the versions file unless told.
func tagFilePath(dir, versionsFile, name string) string {
	if dir == "" {
		dir = filepath.Dir(versionsFile)
	}
	return filepath.Join(dir, name)
}
