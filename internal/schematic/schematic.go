// Package schematic computes Talos Image Factory schematic IDs offline, the way the
// factory does, so that an image with system extensions or kernel arguments can be named
// without asking the factory.
//
// The Image Factory (github.com/siderolabs/image-factory, pkg/schematic) names a schematic
// by the lowercase hex sha256 of its canonical document: what its YAML library writes for
// its Schematic struct (gopkg.in/yaml.v3 until late 2025, go.yaml.in/yaml/v4 since; the
// documents, and so the IDs, are the same). Fields come in the struct's order and empty
// ones are left out; the part this package can express is
//
//	customization:
//	    extraKernelArgs:
//	        - <argument>
//	    systemExtensions:
//	        officialExtensions:
//	            - <extension>
//
// in the library's default block style: four-space indentation, sequence items indented
// under their key, one item per line, and each string plain when YAML reads it back as
// that string, quoted otherwise. A schematic with no customisation is
// "customization: {}\n", whose ID is VanillaID.
//
// The factory does not normalise anything: POST /schematics hashes the document in the
// order it was sent (its integration test sends amd-ucode, gvisor, gasket-driver in that
// order and gets that order back), so the order of both lists is part of the ID. Marshal
// and ID follow it exactly; FromClass is where a class's extensions, a set, get their one
// order.
package schematic

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// VanillaID is the ID of the schematic without customisation, "customization: {}".
const VanillaID = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"

// Schematic is the part of an Image Factory schematic a NodeGroupClass can express.
// Kernel modules come with extensions (the factory has no field for them), and the
// installer repository is where the image is pulled from, not part of the image.
type Schematic struct {
	// ExtraKernelArgs are customization.extraKernelArgs, in order.
	ExtraKernelArgs []string
	// OfficialExtensions are customization.systemExtensions.officialExtensions, in order.
	OfficialExtensions []string
}

// FromClass is the schematic of a class's Talos customisation; nil is the vanilla one.
// Extensions are a set in the API, so they are sorted (as the factory's own UI does) and
// deduplicated: the same set always names the same image. Kernel arguments keep their
// order, which matters on a kernel command line. The result shares no memory with spec.
func FromClass(spec *v1alpha1.TalosClassSpec) Schematic {
	if spec == nil {
		return Schematic{}
	}
	var s Schematic
	if len(spec.KernelArgs) > 0 {
		s.ExtraKernelArgs = slices.Clone(spec.KernelArgs)
	}
	if len(spec.Extensions) > 0 {
		s.OfficialExtensions = slices.Compact(slices.Sorted(slices.Values(spec.Extensions)))
	}
	return s
}

// IsVanilla reports whether the schematic has no customisation (its ID is VanillaID).
func (s Schematic) IsVanilla() bool {
	return len(s.ExtraKernelArgs) == 0 && len(s.OfficialExtensions) == 0
}

// Marshal is the canonical document, the bytes the factory hashes.
func (s Schematic) Marshal() ([]byte, error) {
	if b, ok := s.appendCanonical(make([]byte, 0, s.sizeHint())); ok {
		return b, nil
	}
	// A string that the writer below does not know to be plain: the YAML library decides
	// its quoting, as it does in the factory. Extension names and kernel arguments that
	// start with a letter never get here.
	return yaml.Marshal(s.document())
}

// ID is the schematic's Image Factory ID: 64 lowercase hex characters.
func (s Schematic) ID() (string, error) {
	doc, err := s.Marshal()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:]), nil
}

// The writer. yaml.Marshal takes tens of microseconds for these few lines, and render
// computes a schematic for every customised pool on every resync, so the common shape is
// written directly: it is fixed, and only its strings vary. A string is written plain
// only when plainScalar proves that the YAML library would write it plain too; any other
// string sends the whole document to the library. schematic_internal_test.go checks the
// writer against the library, including by fuzzing.

const (
	vanillaDocument  = "customization: {}\n"
	customization    = "customization:\n"
	extraKernelArgs  = "    extraKernelArgs:\n"
	kernelArgItem    = "        - "
	systemExtensions = "    systemExtensions:\n        officialExtensions:\n"
	extensionItem    = "            - "
)

// appendCanonical appends the document, or reports false when a string needs the library.
func (s Schematic) appendCanonical(b []byte) ([]byte, bool) {
	if s.IsVanilla() {
		return append(b, vanillaDocument...), true
	}
	b = append(b, customization...)
	if len(s.ExtraKernelArgs) > 0 {
		b = append(b, extraKernelArgs...)
		for _, a := range s.ExtraKernelArgs {
			if !plainScalar(a) {
				return b, false
			}
			b = append(append(append(b, kernelArgItem...), a...), '\n')
		}
	}
	if len(s.OfficialExtensions) > 0 {
		b = append(b, systemExtensions...)
		for _, e := range s.OfficialExtensions {
			if !plainScalar(e) {
				return b, false
			}
			b = append(append(append(b, extensionItem...), e...), '\n')
		}
	}
	return b, true
}

// sizeHint is the length of the document when every string is plain.
func (s Schematic) sizeHint() int {
	n := len(customization) + len(extraKernelArgs) + len(systemExtensions)
	for _, a := range s.ExtraKernelArgs {
		n += len(kernelArgItem) + len(a) + 1
	}
	for _, e := range s.OfficialExtensions {
		n += len(extensionItem) + len(e) + 1
	}
	return n
}

// plainScalar reports whether the YAML library writes s as a plain scalar, by a rule
// narrower than the library's own: s starts with an ASCII letter and is made only of
// ASCII letters, digits and "_.,=:/-". That leaves out every string the library quotes:
//   - strings YAML would read as something else: numbers, timestamps and base-60 numbers
//     start with a digit, a sign or a dot; what starts with a letter is read as a string
//     unless it is one of the bool and null words, and the YAML 1.1 bool words (y, yes,
//     on, off, ...) are quoted as well. All of them are refused below, in any case;
//   - strings the emitter cannot write plain: an indicator at the start (none is a
//     letter), a space, a tab, a line break, "#" or a non-ASCII character anywhere, and
//     ":" followed by a space or at the end, the only place it can be here.
//
// Extension names and kernel arguments the class API admits that start with a letter
// pass; a digit-first kernel argument goes through the library.
func plainScalar(s string) bool {
	if s == "" || !isLetter(s[0]) || s[len(s)-1] == ':' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !('0' <= c && c <= '9') {
			switch c {
			case '_', '.', ',', '=', ':', '/', '-':
			default:
				return false
			}
		}
	}
	switch {
	case strings.EqualFold(s, "y"), strings.EqualFold(s, "n"), strings.EqualFold(s, "yes"),
		strings.EqualFold(s, "no"), strings.EqualFold(s, "on"), strings.EqualFold(s, "off"),
		strings.EqualFold(s, "true"), strings.EqualFold(s, "false"), strings.EqualFold(s, "null"):
		return false
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// document mirrors the factory's Schematic type for the YAML library: same field names,
// order and omitempty (overlay and the customisation fields a class cannot set, all
// empty and so left out, are not declared).
type document struct {
	Customization documentCustomization `yaml:"customization"`
}

type documentCustomization struct {
	ExtraKernelArgs  []string                 `yaml:"extraKernelArgs,omitempty"`
	SystemExtensions documentSystemExtensions `yaml:"systemExtensions,omitempty"`
}

type documentSystemExtensions struct {
	OfficialExtensions []string `yaml:"officialExtensions,omitempty"`
}

func (s Schematic) document() document {
	return document{Customization: documentCustomization{
		ExtraKernelArgs:  s.ExtraKernelArgs,
		SystemExtensions: documentSystemExtensions{OfficialExtensions: s.OfficialExtensions},
	}}
}
