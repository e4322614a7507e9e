package yamldocs

import (
	"strings"
	"testing"
)

func TestObjects(t *testing.T) {
	cases := []struct {
		name  string
		data  string
		names []string
	}{
		{"one", "kind: A\nmetadata: {name: a}\n", []string{"a"}},
		{"two", "kind: A\nmetadata: {name: a}\n---\nkind: B\nmetadata: {name: b}\n", []string{"a", "b"}},
		{"leading and trailing separators", "---\nkind: A\nmetadata: {name: a}\n---\n", []string{"a"}},
		{"empty and comment-only documents", "# head\n---\n---\nkind: A\nmetadata: {name: a}\n--- # next\n# nothing\n", []string{"a"}},
		{"dashes inside a value do not split", "kind: A\nmetadata: {name: a}\ndata:\n  pem: |\n    -----BEGIN CERTIFICATE-----\n    ---\n    -----END CERTIFICATE-----\n", []string{"a"}},
		{"nothing", "", nil},
		{"CRLF", "kind: A\r\nmetadata: {name: a}\r\n---\r\nkind: B\r\nmetadata: {name: b}\r\n", []string{"a", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := Objects([]byte(c.data))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range objs {
				names = append(names, o.GetName())
			}
			if strings.Join(names, ",") != strings.Join(c.names, ",") {
				t.Errorf("names %v, want %v", names, c.names)
			}
		})
	}
}

func TestObjectsNamesTheBadDocument(t *testing.T) {
	_, err := Objects([]byte("kind: A\n---\nkind: [\n"))
	if err == nil || !strings.Contains(err.Error(), "document 2") {
		t.Fatalf("error %v, want one naming document 2", err)
	}
	for _, s := range []string{"- a\n- b\n", "just a string\n", "\x00\x01", "{", strings.Repeat("[", 10000)} {
		if _, err := Objects([]byte(s)); err == nil {
			t.Errorf("%q accepted", s[:min(len(s), 20)])
		}
	}
}
