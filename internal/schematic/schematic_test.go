package schematic_test

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"testing"

	"github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/schematic"
)

// The expected values below are not produced by this package. Each case has two of them,
// found by routes that share no code with it:
//
//   - doc, the canonical document written out by hand in the factory's format (see the
//     package comment; read from siderolabs/image-factory, pkg/schematic: yaml.Marshal of
//     its Schematic struct, four-space block style, empty fields left out). The test
//     hashes doc with crypto/sha256 and requires both Marshal and ID to agree with it.
//   - id, a literal. Where the Image Factory project or its users published the ID of
//     that schematic, id is that published value, which pins the hand-written format to
//     the real factory: the source is given on the case. Otherwise id was computed
//     outside Go from the same text, with coreutils (printf '<doc>' | sha256sum), and
//     guards the document against being edited together with the code.
type idCase struct {
	name string
	s    schematic.Schematic
	doc  string
	id   string
}

var cases = []idCase{
	{
		// image-factory pkg/schematic/schematic_test.go ("empty") and the catalog's vanilla.
		name: "vanilla",
		s:    schematic.Schematic{},
		doc:  "customization: {}\n",
		id:   "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba",
	},
	{
		// The factory's ID for qemu-guest-agent alone, in countless public installer
		// references (factory.talos.dev/installer/ce4c9805...:<version>).
		name: "one extension",
		s:    schematic.FromClass(&v1alpha1.TalosClassSpec{Extensions: []string{"siderolabs/qemu-guest-agent"}}),
		doc: "customization:\n" +
			"    systemExtensions:\n" +
			"        officialExtensions:\n" +
			"            - siderolabs/qemu-guest-agent\n",
		id: "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515",
	},
	{
		// A class lists its extensions unsorted; FromClass sorts them. sha256sum.
		name: "several extensions given unsorted",
		s: schematic.FromClass(&v1alpha1.TalosClassSpec{Extensions: []string{
			"siderolabs/gvisor", "siderolabs/amd-ucode", "siderolabs/gasket-driver",
		}}),
		doc: "customization:\n" +
			"    systemExtensions:\n" +
			"        officialExtensions:\n" +
			"            - siderolabs/amd-ucode\n" +
			"            - siderolabs/gasket-driver\n" +
			"            - siderolabs/gvisor\n",
		id: "6ba2913f8a7eb48d86023b9a08d266ec0cc769946b5cf93e405f40157288624d",
	},
	{
		// The same extensions in the order the factory's integration test posts them
		// (internal/integration/schematic_test.go, systemExtensionsSchematicID, checked
		// there against a running factory): a Schematic keeps its order, as the factory.
		name: "several extensions in the factory's order",
		s: schematic.Schematic{OfficialExtensions: []string{
			"siderolabs/amd-ucode", "siderolabs/gvisor", "siderolabs/gasket-driver",
		}},
		doc: "customization:\n" +
			"    systemExtensions:\n" +
			"        officialExtensions:\n" +
			"            - siderolabs/amd-ucode\n" +
			"            - siderolabs/gvisor\n" +
			"            - siderolabs/gasket-driver\n",
		id: "51ff3e49313773332729a5c04e57af0dbe2e6d3f65ff638e6d4c3a05065fefff",
	},
	{
		// Two extensions, as the factory's UI gave them to a user
		// (github.com/bashfulrobot/libvirt-talos, README: "Your image schematic ID is").
		name: "two extensions from the factory UI",
		s: schematic.FromClass(&v1alpha1.TalosClassSpec{Extensions: []string{
			"siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools",
		}}),
		doc: "customization:\n" +
			"    systemExtensions:\n" +
			"        officialExtensions:\n" +
			"            - siderolabs/iscsi-tools\n" +
			"            - siderolabs/qemu-guest-agent\n",
		id: "dc7b152cb3ea99b821fcb7340ce7168313ce393d663740b791c36f6e95fc8586",
	},
	{
		// Kernel arguments only: the factory's integration test (extraArgsSchematicID).
		name: "kernel arguments",
		s:    schematic.FromClass(&v1alpha1.TalosClassSpec{KernelArgs: []string{"nolapic", "nomodeset"}}),
		doc: "customization:\n" +
			"    extraKernelArgs:\n" +
			"        - nolapic\n" +
			"        - nomodeset\n",
		id: "e0fb1129bbbdfb5d002e94af4cdce712a8370e850950a33a242d4c3f178c532d",
	},
	{
		// The render golden's custom class. sha256sum.
		name: "extension and kernel argument",
		s: schematic.FromClass(&v1alpha1.TalosClassSpec{
			Extensions:          []string{"siderolabs/iscsi-tools"},
			KernelArgs:          []string{"talos.dashboard.disabled=1"},
			InstallerRepository: "registry.example.com/factory/installer",
		}),
		doc: "customization:\n" +
			"    extraKernelArgs:\n" +
			"        - talos.dashboard.disabled=1\n" +
			"    systemExtensions:\n" +
			"        officialExtensions:\n" +
			"            - siderolabs/iscsi-tools\n",
		id: "5ad43cc8dea389a8958da6c2043d5512e2362de2bec623ef802545ffe73ccd4b",
	},
	{
		// GPU drivers (their kernel modules come with the extensions) and two kernel
		// arguments, with a duplicate extension. sha256sum.
		name: "extensions and kernel arguments",
		s: schematic.FromClass(&v1alpha1.TalosClassSpec{
			Extensions: []string{
				"siderolabs/nvidia-open-gpu-kernel-modules-lts",
				"siderolabs/nvidia-container-toolkit-lts",
				"siderolabs/nvidia-open-gpu-kernel-modules-lts",
			},
			KernelArgs: []string{"console=ttyS0", "net.ifnames=0"},
		}),
		doc: "customization:\n" +
			"    extraKernelArgs:\n" +
			"        - console=ttyS0\n" +
			"        - net.ifnames=0\n" +
			"    systemExtensions:\n" +
			"        officialExtensions:\n" +
			"            - siderolabs/nvidia-container-toolkit-lts\n" +
			"            - siderolabs/nvidia-open-gpu-kernel-modules-lts\n",
		id: "937719ef6d369eef41318941588567e6a63faabc622ae72d06e6e19ba3e1661c",
	},
	{
		// Strings YAML would read as a number or a bool are double-quoted; a digit-first
		// argument that stays a string is plain. sha256sum.
		name: "quoted kernel arguments",
		s: schematic.Schematic{
			ExtraKernelArgs:    []string{"8250.nr_uarts=4", "1", "on"},
			OfficialExtensions: []string{"siderolabs/iscsi-tools"},
		},
		doc: "customization:\n" +
			"    extraKernelArgs:\n" +
			"        - 8250.nr_uarts=4\n" +
			"        - \"1\"\n" +
			"        - \"on\"\n" +
			"    systemExtensions:\n" +
			"        officialExtensions:\n" +
			"            - siderolabs/iscsi-tools\n",
		id: "f6fc29515118b0ee5033a05715117761816a1aed250b8cb4efa007885aeac379",
	},
}

func TestID(t *testing.T) {
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sum := sha256.Sum256([]byte(c.doc))
			if got := hex.EncodeToString(sum[:]); got != c.id {
				t.Fatalf("sha256 of the hand-written document = %s, want %s: the test case is inconsistent", got, c.id)
			}
			doc, err := c.s.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if string(doc) != c.doc {
				t.Errorf("Marshal =\n%s\nwant\n%s", doc, c.doc)
			}
			id, err := c.s.ID()
			if err != nil {
				t.Fatal(err)
			}
			if id != c.id {
				t.Errorf("ID = %s, want %s", id, c.id)
			}
			if !hex64.MatchString(id) {
				t.Errorf("ID %q is not 64 lowercase hex characters", id)
			}
			if other, dup := seen[id]; dup && other != c.name {
				t.Errorf("ID %s of %q is also the ID of %q", id, c.name, other)
			}
			seen[id] = c.name
		})
	}
}

func TestVanilla(t *testing.T) {
	for name, s := range map[string]schematic.Schematic{
		"zero":                         {},
		"empty lists":                  {ExtraKernelArgs: []string{}, OfficialExtensions: []string{}},
		"no class customisation":       schematic.FromClass(nil),
		"only an installer repository": schematic.FromClass(&v1alpha1.TalosClassSpec{InstallerRepository: "registry.example.com/installer"}),
	} {
		if !s.IsVanilla() {
			t.Errorf("%s: IsVanilla is false", name)
		}
		if id, err := s.ID(); err != nil || id != schematic.VanillaID {
			t.Errorf("%s: ID = %s, %v; want %s", name, id, err, schematic.VanillaID)
		}
	}
	if (schematic.Schematic{OfficialExtensions: []string{"siderolabs/iscsi-tools"}}).IsVanilla() ||
		(schematic.Schematic{ExtraKernelArgs: []string{"nosmt"}}).IsVanilla() {
		t.Error("a customised schematic is vanilla")
	}
}

func TestFromClass(t *testing.T) {
	spec := &v1alpha1.TalosClassSpec{
		Extensions: []string{"siderolabs/gvisor", "siderolabs/amd-ucode", "siderolabs/gvisor"},
		KernelArgs: []string{"nosmt", "console=ttyS0", "nosmt"},
	}
	s := schematic.FromClass(spec)
	if want := []string{"siderolabs/amd-ucode", "siderolabs/gvisor"}; !slices.Equal(s.OfficialExtensions, want) {
		t.Errorf("extensions = %v, want %v (sorted, deduplicated)", s.OfficialExtensions, want)
	}
	if want := []string{"nosmt", "console=ttyS0", "nosmt"}; !slices.Equal(s.ExtraKernelArgs, want) {
		t.Errorf("kernel arguments = %v, want %v (as given)", s.ExtraKernelArgs, want)
	}
	if !slices.Equal(spec.Extensions, []string{"siderolabs/gvisor", "siderolabs/amd-ucode", "siderolabs/gvisor"}) {
		t.Errorf("FromClass changed the class's extensions: %v", spec.Extensions)
	}
	s.ExtraKernelArgs[0] = "changed"
	if spec.KernelArgs[0] != "nosmt" {
		t.Error("the schematic shares its kernel arguments with the class")
	}
}

func TestDeterministic(t *testing.T) {
	exts := []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools", "siderolabs/qemu-guest-agent", "siderolabs/amd-ucode"}
	args := []string{"console=ttyS0", "net.ifnames=0"}
	want, err := schematic.FromClass(&v1alpha1.TalosClassSpec{Extensions: exts, KernelArgs: args}).ID()
	if err != nil {
		t.Fatal(err)
	}
	// Every order of a class's extensions (all 24) names the same image, every time.
	perm := slices.Clone(exts)
	var permute func(k int)
	permute = func(k int) {
		if k == len(perm) {
			got, err := schematic.FromClass(&v1alpha1.TalosClassSpec{Extensions: slices.Clone(perm), KernelArgs: args}).ID()
			if err != nil || got != want {
				t.Errorf("extensions %v: ID = %s, %v; want %s", perm, got, err, want)
			}
			return
		}
		for i := k; i < len(perm); i++ {
			perm[k], perm[i] = perm[i], perm[k]
			permute(k + 1)
			perm[k], perm[i] = perm[i], perm[k]
		}
	}
	permute(0)
	// The order of kernel arguments is part of the image, as in the factory.
	swapped, err := schematic.FromClass(&v1alpha1.TalosClassSpec{Extensions: exts, KernelArgs: []string{args[1], args[0]}}).ID()
	if err != nil || swapped == want {
		t.Errorf("swapping the kernel arguments gives ID %s, %v; want another ID than %s", swapped, err, want)
	}
	// A Schematic keeps its extensions' order, as the factory does.
	a, _ := schematic.Schematic{OfficialExtensions: []string{"siderolabs/gvisor", "siderolabs/amd-ucode"}}.ID()
	b, _ := schematic.Schematic{OfficialExtensions: []string{"siderolabs/amd-ucode", "siderolabs/gvisor"}}.ID()
	if a == b {
		t.Error("a Schematic's extension order does not change its ID; the factory's does")
	}
}

func BenchmarkID(b *testing.B) {
	s := schematic.FromClass(&v1alpha1.TalosClassSpec{
		Extensions: []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools"},
		KernelArgs: []string{"talos.dashboard.disabled=1"},
	})
	for b.Loop() {
		if _, err := s.ID(); err != nil {
			b.Fatal(err)
		}
	}
}
