package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Platform is a GOOS/GOARCH pair a binary is built for.
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ImagePlatforms are the platforms of the operator image's index.
var ImagePlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}

// PluginPlatforms are the platforms the kubectl plugin is released for.
var PluginPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// GoBuild builds a main package of the module rooted at dir for a platform into out, the
// same way on every machine: no cgo, no file paths (-trimpath), no VCS stamp, no build
// ID, no symbol table. So the same source and Go version give the same bytes, whatever
// folder and machine they are built in; the version, when set, is linked into the
// package's releaseVersion variable (-X).
func GoBuild(ctx context.Context, dir, pkg string, p Platform, version, out string) error {
	ldflags := "-s -w -buildid="
	if version != "" {
		ldflags += " -X main.releaseVersion=" + version
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s for %s: %w", pkg, p, err)
	}
	return nil
}
