// Package gobuild builds the project's binaries the one way they ship: the release's
// images and plugin archives, and the binaries the suites, the demo and hack/scale run,
// come out of the same command, so what is tested is what ships (and a machine that
// ran the suites has the release's compilations in its build cache already).
package gobuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Platform is a GOOS/GOARCH pair a binary is built for.
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Host is the platform this program runs on.
func Host() Platform { return Platform{runtime.GOOS, runtime.GOARCH} }

// Build builds a main package of the module rooted at dir for a platform into out, the
// same way on every machine: no cgo, no file paths (-trimpath), no VCS stamp, no build
// ID, no symbol table. So the same source and Go version give the same bytes, whatever
// folder and machine they are built in; the version, when set, is linked into the
// package's releaseVersion variable (-X), which changes only the link, not what the
// build cache holds.
func Build(ctx context.Context, dir, pkg string, p Platform, version, out string) error {
	ldflags := "-s -w -buildid="
	if version != "" {
		ldflags += " -X main.releaseVersion=" + version
	}
	cmd := exec.CommandContext(ctx, goTool(), "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s for %s: %w", pkg, p, err)
	}
	return nil
}

// goTool is the go command: the one on the PATH, else the toolchain this program was
// built with (a test binary may run without the PATH its go command had).
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	//lint:ignore SA1019 with no go command on the PATH to ask, the root this binary was built with is the one wanted.
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
