package ciworkflow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestWorkflowsLint runs actionlint over every workflow: syntax, expressions, job
// dependencies and the shell of run steps as far as actionlint checks it.
func TestWorkflowsLint(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), ".github", "workflows", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows found (%v)", err)
	}
	for _, f := range files {
		errs := lint(t, f)
		for _, e := range errs {
			t.Errorf("%s:%d:%d: %s [%s]", filepath.Base(f), e.Line, e.Column, e.Message, e.Kind)
		}
	}
}

// TestLintCatchesMistakes: a broken workflow is refused, so the lint can fail.
func TestLintCatchesMistakes(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	content := "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    needs: missing\n    steps:\n      - run: echo ${{ matrix.nope }}\n"
	if err := os.WriteFile(broken, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := lint(t, broken)
	var kinds []string
	for _, e := range errs {
		kinds = append(kinds, e.Kind)
	}
	if len(errs) < 2 {
		t.Fatalf("actionlint found %d problems in a broken workflow, want both the unknown job and the undefined matrix: %v", len(errs), kinds)
	}
}

func lint(t *testing.T, path string) []*actionlint.Error {
	t.Helper()
	var out strings.Builder
	l, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.LintFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return errs
}
