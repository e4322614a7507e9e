package golden

import (
	"strings"
	"testing"
)

func TestDiffNamesTheLinesThatDiffer(t *testing.T) {
	d := Diff("a\nb\nc", "a\nB\nc\nd")
	if !strings.Contains(d, "line 2:\n  want: b\n  got:  B") || !strings.Contains(d, "line 4:") || strings.Contains(d, "line 1:") {
		t.Fatalf("diff:\n%s", d)
	}
}
