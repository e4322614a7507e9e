package images

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var sha512RE = regexp.MustCompile(`^[0-9a-f]{128}$`)

// MismatchError is a download whose SHA-512 is not the expected one.
type MismatchError struct {
	URL      string
	Expected string
	Got      string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s: SHA-512 mismatch, the download is not the expected binary\n  expected: %s\n  got:      %s",
		e.URL, e.Expected, e.Got)
}

// Verify downloads url and checks it against the expected SHA-512 (128 hex characters).
// With out set, the file is written there (mode 0755: these are binaries) only if the sum
// matches; on a mismatch nothing is written and the error is a *MismatchError carrying
// both sums. It returns the sum of what was downloaded.
func Verify(ctx context.Context, client *http.Client, url, expected, out string) (string, error) {
	expected = strings.ToLower(strings.TrimSpace(expected))
	switch {
	case expected == "" || expected == Unknown:
		return "", fmt.Errorf("%s: no expected SHA-512: a release binary is only used once checked against the sum it must have", url)
	case !sha512RE.MatchString(expected):
		return "", fmt.Errorf("expected SHA-512 %q is not 128 hex characters", expected)
	}
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}

	h := sha512.New()
	if out == "" {
		if _, err := io.Copy(h, resp.Body); err != nil {
			return "", fmt.Errorf("%s: %w", url, err)
		}
		return checkSum(url, expected, h)
	}

	// Download next to the destination, so the final rename cannot cross file systems
	// and the destination never holds an unchecked file.
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".download-*")
	if err != nil {
		return "", err
	}
	keep := false
	defer func() {
		if !keep {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		return "", fmt.Errorf("%s: %w", url, err)
	}
	got, err := checkSum(url, expected, h)
	if err != nil {
		return got, err
	}
	if err := errors.Join(tmp.Chmod(0o755), tmp.Close()); err != nil {
		return got, err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return got, err
	}
	keep = true
	return got, nil
}

func checkSum(url, expected string, h hash.Hash) (string, error) {
	got := hex.EncodeToString(h.Sum(nil))
	if got != expected {
		return got, &MismatchError{URL: url, Expected: expected, Got: got}
	}
	return got, nil
}
