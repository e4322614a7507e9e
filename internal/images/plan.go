package images

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// Arches are the architectures worker images are built for: the ones both Kairos and the
// Kubernetes release binaries ship for.
var Arches = []string{"amd64", "arm64"}

// Unknown stands for an input the catalog does not hold yet. A step that needs it is
// blocked, and verify refuses it as an expected sum.
const Unknown = "unknown"

// KubeadmURL is where the static upstream kubeadm binary of a release is published.
func KubeadmURL(kubernetes, arch string) string {
	return fmt.Sprintf("https://dl.k8s.io/release/%s/bin/linux/%s/kubeadm", kubernetes, arch)
}

// Plan is every build of the catalog: one per Kubernetes minor and architecture, and what
// gets pinned back for each minor.
type Plan struct {
	Naming Naming      `json:"naming"`
	Arches []string    `json:"arches"`
	Builds []Build     `json:"builds"`
	Pins   []PinTarget `json:"pins"`
}

// Build is one worker OS image and its disk: one minor, one architecture.
type Build struct {
	Minor      string `json:"minor"`
	Kubernetes string `json:"kubernetes"`
	Arch       string `json:"arch"`
	// Kubeadm is the upstream binary that goes into the OS image, checked against its
	// SHA-512 first.
	Kubeadm Download `json:"kubeadm"`
	// BaseImage is the Kairos core image the OS image is built from.
	BaseImage string `json:"baseImage"`
	// OSImage, DiskFile and DiskImage are the outputs: the OS image, the qcow2
	// AuroraBoot makes from it, and the containerDisk image wrapping that file.
	OSImage   string `json:"osImage"`
	DiskFile  string `json:"diskFile"`
	DiskImage string `json:"diskImage"`
	Steps     []Step `json:"steps"`
}

// Download is a release binary and the SHA-512 it must have (Unknown until the catalog
// records it).
type Download struct {
	URL    string `json:"url"`
	SHA512 string `json:"sha512"`
}

// PinTarget is what one minor's catalog entry gets: the disk and OS image (indexes when several
// architectures are built), and the tag files that record them by name.
type PinTarget struct {
	Minor      string `json:"minor"`
	Kubernetes string `json:"kubernetes"`
	// OSImage and Disk are the references pushed, which pin writes to kairos.osImage and
	// kairos.disk by digest.
	OSImage string `json:"osImage"`
	Disk    string `json:"disk"`
	// DiskTagFile and OSImageTagFile are the tag files pin writes, relative to images/.
	DiskTagFile    string `json:"diskTagFile"`
	OSImageTagFile string `json:"osImageTagFile"`
	Steps          []Step `json:"steps"`
}

// Step is one thing the images build does, and what it needs.
type Step struct {
	Name string `json:"name"`
	// Does says what the step does; for this tool's own steps, the command line.
	Does string `json:"does"`
	// NeedsContainerEngine marks the steps this tool cannot do: they run in the images
	// build, with docker or podman.
	NeedsContainerEngine bool `json:"needsContainerEngine"`
	// Blocked says why the step cannot run yet, if it cannot.
	Blocked string `json:"blocked,omitempty"`
}

// NewPlan lists the builds of every minor in c for the given architectures, oldest minor
// first.
func NewPlan(c *catalog.Catalog, arches []string, n Naming) (*Plan, error) {
	if len(arches) == 0 {
		return nil, fmt.Errorf("no architecture to build for")
	}
	seen := map[string]bool{}
	for _, a := range arches {
		if !slices.Contains(Arches, a) {
			return nil, fmt.Errorf("architecture %q is not built: choose from %s", a, strings.Join(Arches, ", "))
		}
		if seen[a] {
			return nil, fmt.Errorf("architecture %q is listed twice", a)
		}
		seen[a] = true
	}
	p := &Plan{Naming: n, Arches: slices.Clone(arches)}
	for _, r := range c.Releases {
		pin := PinTarget{
			Minor:          r.Minor,
			Kubernetes:     r.Kubernetes,
			DiskTagFile:    DiskTagFile(r.Minor),
			OSImageTagFile: OSImageTagFile(r.Minor),
		}
		var disks []string
		for _, arch := range arches {
			b, err := newBuild(r, arch, n)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", r.Minor, arch, err)
			}
			p.Builds = append(p.Builds, b)
			disks = append(disks, fmt.Sprintf("--%s %s", diskFlag(arch), b.DiskFile))
			pin.OSImage, pin.Disk = b.OSImage, b.DiskImage
		}
		if len(arches) > 1 {
			var err error
			if pin.OSImage, err = n.OSIndex(r.Kubernetes, arches); err != nil {
				return nil, err
			}
			if pin.Disk, err = n.DiskIndex(r.Kubernetes, arches); err != nil {
				return nil, err
			}
		}
		pin.Steps = []Step{
			{Name: "wrap", Does: fmt.Sprintf("nodegroup-images wrap %s --os-image %s@sha256:<pushed> --tag %s",
				strings.Join(disks, " "), pin.OSImage, pin.Disk)},
			{Name: "pin", Does: fmt.Sprintf("nodegroup-images pin --minor %s --disk %s@sha256:<pushed> --os-image %s@sha256:<pushed>",
				r.Minor, pin.Disk, pin.OSImage)},
		}
		if len(arches) > 1 {
			pin.Steps = append([]Step{{Name: "os-index", NeedsContainerEngine: true,
				Does: fmt.Sprintf("the OS image build pushes the per-arch OS images as one index too, %s (docker buildx --platform %s)",
					pin.OSImage, platforms(arches))}}, pin.Steps...)
		}
		p.Pins = append(p.Pins, pin)
	}
	return p, nil
}

func newBuild(r catalog.Release, arch string, n Naming) (Build, error) {
	b := Build{
		Minor:      r.Minor,
		Kubernetes: r.Kubernetes,
		Arch:       arch,
		// Without a checksum in the catalog, verify refuses to run.
		Kubeadm: Download{URL: KubeadmURL(r.Kubernetes, arch), SHA512: orUnknown(r.KubeadmSHA512.For(arch))},
	}
	var err error
	if b.BaseImage, err = n.BaseImage(arch); err != nil {
		return b, err
	}
	if r.Kairos.Base != "" {
		b.BaseImage = r.Kairos.Base // the catalog's pinned base wins over the naming default
	}
	if b.OSImage, err = n.OSImage(r.Kubernetes, arch); err != nil {
		return b, err
	}
	if b.DiskFile, err = n.DiskFile(r.Kubernetes, arch); err != nil {
		return b, err
	}
	if b.DiskImage, err = n.DiskImage(r.Kubernetes, arch); err != nil {
		return b, err
	}
	kubeadm := Step{Name: "kubeadm",
		Does: fmt.Sprintf("nodegroup-images verify --url %s --sha512 %s --out kubeadm", b.Kubeadm.URL, b.Kubeadm.SHA512)}
	if b.Kubeadm.SHA512 == Unknown {
		kubeadm.Blocked = "kubeadm SHA-512 unknown: the catalog records none yet"
	}
	b.Steps = []Step{
		kubeadm,
		{Name: "os-image", NeedsContainerEngine: true,
			Does: fmt.Sprintf("build %s from %s: kubelet %s built without cgo from the release source, the verified kubeadm; push it",
				b.OSImage, b.BaseImage, r.Kubernetes)},
		{Name: "disk", NeedsContainerEngine: true,
			Does: fmt.Sprintf("AuroraBoot: %s@sha256:<pushed> -> EFI disk %s", b.OSImage, b.DiskFile)},
	}
	return b, nil
}

func platforms(arches []string) string {
	out := make([]string, len(arches))
	for i, a := range arches {
		out[i] = "linux/" + a
	}
	return strings.Join(out, ",")
}

// diskFlag is wrap's flag for the disk of arch.
func diskFlag(arch string) string {
	if arch == "amd64" {
		return "disk"
	}
	return "disk-" + arch
}

// DiskTagFile and OSImageTagFile are the names of the tag files pin writes for a minor,
// in the images/ folder next to versions.yaml.
func DiskTagFile(minor string) string    { return "kairos-worker-" + minor + ".tag" }
func OSImageTagFile(minor string) string { return "kairos-worker-base-" + minor + ".tag" }

// WriteJSON writes the plan as indented JSON.
func (p *Plan) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "<pushed>" placeholders stay readable
	return enc.Encode(p)
}

// WriteTable writes the plan for people: the builds, what each minor pins, and the steps,
// with the ones that need a container engine marked.
func (p *Plan) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MINOR\tKUBERNETES\tARCH\tKUBEADM\tKUBEADM SHA-512\tBASE IMAGE\tOS IMAGE\tDISK FILE\tDISK IMAGE")
	for _, b := range p.Builds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Minor, b.Kubernetes, b.Arch,
			b.Kubeadm.URL, b.Kubeadm.SHA512, b.BaseImage, b.OSImage, b.DiskFile, b.DiskImage)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "MINOR\tkairos.osImage FROM\tkairos.disk FROM\tTAG FILES (images/)")
	for _, pin := range p.Pins {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s, %s\n", pin.Minor, pin.OSImage, pin.Disk, pin.DiskTagFile, pin.OSImageTagFile)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The steps are the same for every build; show those of the first build and the first
	// minor as the pattern.
	if len(p.Builds) > 0 && len(p.Pins) > 0 {
		fmt.Fprintf(w, "\nSteps (shown for %s/%s; every build and minor has the same):\n", p.Builds[0].Minor, p.Builds[0].Arch)
		i := 1
		for _, s := range append(slices.Clone(p.Builds[0].Steps), p.Pins[0].Steps...) {
			mark := "this tool"
			if s.NeedsContainerEngine {
				mark = "needs a container engine"
			}
			fmt.Fprintf(w, "  %d. %-9s [%s] %s\n", i, s.Name, mark, s.Does)
			if s.Blocked != "" {
				fmt.Fprintf(w, "     BLOCKED: %s\n", s.Blocked)
			}
			i++
		}
	}
	return nil
}

// orUnknown is the catalog's value, or Unknown while the catalog records none.
func orUnknown(v string) string {
	if v == "" {
		return Unknown
	}
	return v
}
