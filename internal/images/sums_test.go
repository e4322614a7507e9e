package images

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

func TestRecordKubeadmSums(t *testing.T) {
	amd, arm := strings.Repeat("a1", 64), strings.Repeat("b2", 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/release/v1.35.4/bin/linux/amd64/kubeadm.sha512":
			_, _ = w.Write([]byte(amd + "\n"))
		case "/release/v1.35.4/bin/linux/arm64/kubeadm.sha512":
			_, _ = w.Write([]byte(arm + "  kubeadm\n"))
		case "/release/v1.36.3/bin/linux/amd64/kubeadm.sha512":
			_, _ = w.Write([]byte("<html>not a sum</html>"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	orig, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "images", "versions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "versions.yaml")
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	sums, err := RecordKubeadmSums(context.Background(), file, "v1.35", []string{"amd64", "arm64"}, srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if sums["amd64"] != amd || sums["arm64"] != arm {
		t.Fatalf("sums = %v", sums)
	}
	got, _ := os.ReadFile(file)
	// Exactly the two sum lines of v1.35 changed.
	ol, gl := bytes.Split(orig, []byte("\n")), bytes.Split(got, []byte("\n"))
	if len(ol) != len(gl) {
		t.Fatalf("line count changed: %d -> %d", len(ol), len(gl))
	}
	var changed []string
	for i := range ol {
		if !bytes.Equal(ol[i], gl[i]) {
			changed = append(changed, string(gl[i]))
		}
	}
	want := []string{`      amd64: "` + amd + `"`, `      arm64: "` + arm + `"`}
	if strings.Join(changed, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changed lines:\n%s\nwant:\n%s", strings.Join(changed, "\n"), strings.Join(want, "\n"))
	}

	// A page that is not a sum, or a missing one, changes nothing.
	before, _ := os.ReadFile(file)
	if _, err := RecordKubeadmSums(context.Background(), file, "v1.36", []string{"amd64"}, srv.URL, srv.Client()); err == nil ||
		!strings.Contains(err.Error(), "does not hold a SHA-512") {
		t.Fatalf("bad sum file: %v", err)
	}
	if _, err := RecordKubeadmSums(context.Background(), file, "v1.37", []string{"amd64"}, srv.URL, srv.Client()); err == nil ||
		!strings.Contains(err.Error(), "404") {
		t.Fatalf("missing sum file: %v", err)
	}
	after, _ := os.ReadFile(file)
	if !bytes.Equal(before, after) {
		t.Fatal("a failed run changed the file")
	}
}
