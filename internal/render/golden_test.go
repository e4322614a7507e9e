package render

import (
	"bytes"
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"
)

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

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
