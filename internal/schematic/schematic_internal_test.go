package schematic

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The writer (appendCanonical) must write what the YAML library writes whenever it
// writes anything. These tests compare the two; yaml.Marshal of the mirror struct is the
// factory's own route to the document.

// lookalikes are strings near the edge of plainScalar's rule.
var lookalikes = []string{
	"nosmt", "console=ttyS0,115200", "net.ifnames=0", "talos.dashboard.disabled=1",
	"siderolabs/iscsi-tools", "a:b", "a:", "a::b", "a,", "a-", "a.", "a/", "a=", "a_b",
	"y", "Y", "n", "yes", "Yes", "YES", "no", "on", "On", "off", "OFF", "true", "True",
	"false", "FALSE", "null", "Null", "NULL", "yEs", "nul", "nulls", "tru", "offf",
	"8250.nr_uarts=4", "1", "1.5", "0x1f", "1e3", "1_000", "2001-12-14", "1:20", "-x", "-",
	".inf", ".x", "~", "<<", "=", ",", ":", "/", "_x", "a b", "a #b", "a#b", "a\tb", "a\nb",
	"é", "aé", "a\"b", "a'b", "a\\b", "", "x" + strings.Repeat("y", 200),
	"a" + strings.Repeat(":b", 50), "ip=10.0.0.1::10.0.0.254:255.255.255.0:h:eth0:off",
}

func checkWriter(t *testing.T, s Schematic) {
	t.Helper()
	want, err := yaml.Marshal(s.document())
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%#v:\nMarshal =\n%s\nthe YAML library writes\n%s", s, got, want)
	}
}

func TestWriterMatchesLibrary(t *testing.T) {
	checkWriter(t, Schematic{})
	for _, a := range lookalikes {
		checkWriter(t, Schematic{ExtraKernelArgs: []string{a}})
		checkWriter(t, Schematic{OfficialExtensions: []string{a}})
		checkWriter(t, Schematic{ExtraKernelArgs: []string{"nosmt", a}, OfficialExtensions: []string{a, "siderolabs/gvisor"}})
	}
}

// TestWriterIsUsed guards the speed: strings the class API admits, starting with a
// letter, never need the library.
func TestWriterIsUsed(t *testing.T) {
	s := Schematic{
		ExtraKernelArgs:    []string{"console=ttyS0,115200", "talos.dashboard.disabled=1", "ip=10.0.0.1::10.0.0.254:255.255.255.0:h:eth0:off"},
		OfficialExtensions: []string{"siderolabs/nvidia-container-toolkit-lts", "ghcr.io/example/ext-1.2"},
	}
	if _, ok := s.appendCanonical(nil); !ok {
		t.Errorf("%#v needs the YAML library", s)
	}
	if n, b := s.sizeHint(), func() []byte { b, _ := s.appendCanonical(nil); return b }(); n != len(b) {
		t.Errorf("sizeHint = %d, document is %d bytes", n, len(b))
	}
}

func FuzzWriterMatchesLibrary(f *testing.F) {
	for _, a := range lookalikes {
		f.Add(a, "siderolabs/gvisor")
		f.Add("nosmt", a)
	}
	f.Fuzz(func(t *testing.T, arg, ext string) {
		checkWriter(t, Schematic{ExtraKernelArgs: []string{arg}, OfficialExtensions: []string{ext}})
		checkWriter(t, Schematic{ExtraKernelArgs: []string{arg, arg}})
	})
}
