package images

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerify downloads from a local server: the good binary passes and is written, a
// tampered one fails with both sums in the error and nothing is written.
func TestVerify(t *testing.T) {
	good := bytes.Repeat([]byte("kubeadm\x00"), 4096)
	tampered := append(bytes.Clone(good[:len(good)-1]), 'X')
	sum := sha512.Sum512(good)
	want := hex.EncodeToString(sum[:])
	badSum := sha512.Sum512(tampered)
	bad := hex.EncodeToString(badSum[:])

	mux := http.NewServeMux()
	mux.HandleFunc("/good/kubeadm", func(w http.ResponseWriter, _ *http.Request) { w.Write(good) })
	mux.HandleFunc("/tampered/kubeadm", func(w http.ResponseWriter, _ *http.Request) { w.Write(tampered) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	dir := t.TempDir()

	out := filepath.Join(dir, "kubeadm")
	got, err := Verify(ctx, srv.Client(), srv.URL+"/good/kubeadm", strings.ToUpper(want), out)
	if err != nil {
		t.Fatalf("good binary: %v", err)
	}
	if got != want {
		t.Errorf("good binary: sum %s, want %s", got, want)
	}
	if b := readFile(t, out); !bytes.Equal(b, good) {
		t.Error("good binary: the file written is not the download")
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o755 {
		t.Errorf("good binary: mode %v, want 0755", fi.Mode())
	}

	out2 := filepath.Join(dir, "kubeadm-tampered")
	_, err = Verify(ctx, srv.Client(), srv.URL+"/tampered/kubeadm", want, out2)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("tampered binary: err %v, want a *MismatchError", err)
	}
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), bad) {
		t.Errorf("tampered binary: the error does not show both sums:\n%v", err)
	}
	t.Logf("tampered binary: %v", err)
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Errorf("tampered binary: %s was written (%v)", out2, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}

	// Checking without writing.
	if _, err := Verify(ctx, srv.Client(), srv.URL+"/good/kubeadm", want, ""); err != nil {
		t.Errorf("check only: %v", err)
	}
	for _, c := range []struct{ name, url, sum string }{
		{"unknown sum", srv.URL + "/good/kubeadm", Unknown},
		{"no sum", srv.URL + "/good/kubeadm", ""},
		{"short sum", srv.URL + "/good/kubeadm", want[:64]},
		{"not found", srv.URL + "/missing", want},
	} {
		if _, err := Verify(ctx, srv.Client(), c.url, c.sum, filepath.Join(dir, "x")); err == nil {
			t.Errorf("%s: accepted", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}
