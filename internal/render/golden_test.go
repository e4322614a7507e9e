package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// goldenPath is where a render case's expected output lives.
func goldenPath(name string) string { return filepath.Join("testdata", name+".golden.yaml") }

// checkGolden compares got to the golden file, or rewrites it when UPDATE=1 (make test
// UPDATE=1): a change to a golden file is reviewed like code.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := goldenPath(name)
	if os.Getenv("UPDATE") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run `make test UPDATE=1` to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("render output differs from %s (run `make test UPDATE=1` and review the diff):\n%s", path, diffLines(string(want), string(got)))
	}
}

// marshalOutput writes the objects of a render as one YAML stream, in apply order.
func marshalOutput(t *testing.T, out *Output) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i, obj := range out.Objects() {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes()
}

// diffLines shows the first lines that differ, enough to see what changed.
func diffLines(want, got string) string {
	w, g := splitLines(want), splitLines(got)
	var b bytes.Buffer
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			shown++
		}
	}
	return b.String()
}

func splitLines(s string) []string { return strings.Split(s, "\n") }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
