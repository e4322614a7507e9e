package images

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// DefaultReleaseBase is where Kubernetes publishes release binaries and their sums.
const DefaultReleaseBase = "https://dl.k8s.io"

// RecordKubeadmSums reads the published SHA-512 of the kubeadm binary of a minor's
// release for each architecture (<base>/release/<v>/bin/linux/<arch>/kubeadm.sha512) and
// records it in versions.yaml, rewriting only those lines. It runs where the release
// site is reachable; verify then checks every download against the recorded sum.
func RecordKubeadmSums(ctx context.Context, versionsFile, minor string, arches []string, base string, hc *http.Client) (map[string]string, error) {
	data, err := os.ReadFile(versionsFile)
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Parse(data)
	if err != nil {
		return nil, err
	}
	rel, ok := cat.Lookup(minor)
	if !ok || rel.Minor != minor {
		return nil, fmt.Errorf("%s has no release entry for minor %s", versionsFile, minor)
	}
	sums := map[string]string{}
	updated := data
	for _, arch := range arches {
		url := strings.TrimRight(base, "/") + "/release/" + rel.Kubernetes + "/bin/linux/" + arch + "/kubeadm.sha512"
		sum, err := fetchSum(ctx, hc, url)
		if err != nil {
			return nil, err
		}
		if updated, err = SetKubeadmSHA512(updated, minor, arch, sum); err != nil {
			return nil, err
		}
		sums[arch] = sum
	}
	if _, err := catalog.Parse(updated); err != nil {
		return nil, fmt.Errorf("the updated catalog does not parse: %w", err)
	}
	if bytes.Equal(updated, data) {
		return sums, nil
	}
	return sums, writeFileAtomic(versionsFile, updated)
}

func fetchSum(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	// The file holds the sum, optionally followed by the file name.
	fields := strings.Fields(string(body))
	if len(fields) == 0 || !sha512RE.MatchString(fields[0]) {
		return "", fmt.Errorf("%s does not hold a SHA-512 (128 lowercase hex characters)", url)
	}
	return fields[0], nil
}
