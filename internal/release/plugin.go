package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodegroup-io/nodegroup-operator/internal/gobuild"
)

// PluginName is the kubectl plugin's binary; kubectl runs it as `kubectl nodegroup`.
const PluginName = "kubectl-nodegroup"

// Archive is a plugin archive of one platform.
type Archive struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// PluginArchives builds cmd/kubectl-nodegroup for every PluginPlatforms entry and packs
// each binary alone into out/kubectl-nodegroup_<version>_<os>_<arch>.tar.gz (a gzipped tar
// with fixed times and owner, so the same binary gives the same archive), then writes
// out/checksums.txt in sha256sum's format.
func PluginArchives(ctx context.Context, root, version, work, out string) ([]Archive, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var archives []Archive
	var sums strings.Builder
	for _, p := range PluginPlatforms {
		bin := filepath.Join(work, PluginName+"-"+p.OS+"-"+p.Arch)
		if err := gobuild.Build(ctx, root, "./cmd/"+PluginName, p, version, bin); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		tgz, err := tarGz(PluginName, data)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%s_%s_%s_%s.tar.gz", PluginName, version, p.OS, p.Arch)
		file := filepath.Join(out, name)
		if err := os.WriteFile(file, tgz, 0o644); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(tgz)
		a := Archive{OS: p.OS, Arch: p.Arch, File: file, SHA256: hex.EncodeToString(sum[:])}
		archives = append(archives, a)
		fmt.Fprintf(&sums, "%s  %s\n", a.SHA256, name)
	}
	return archives, os.WriteFile(filepath.Join(out, "checksums.txt"), []byte(sums.String()), 0o644)
}

func tarGz(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{
		Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg,
		ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
