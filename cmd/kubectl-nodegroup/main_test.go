package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		version  string
		want     string
	}{
		{nil, "v0.3.0", "v0.3.0"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}, "(devel)", "(devel) (revision abc123)"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}, "(devel)", "(devel) (revision abc123, modified)"},
	} {
		info := &debug.BuildInfo{Main: debug.Module{Version: tc.version}, Settings: tc.settings}
		if got := versionOf(info); got != tc.want {
			t.Errorf("versionOf(%v, %v) = %q, want %q", tc.version, tc.settings, got, tc.want)
		}
	}
}

// TestCommands pins the exit codes of the command line itself: no command and an
// unknown flag are bad input (2), help is not.
func TestCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Available Commands"},
		{[]string{"--help"}, 0, "classes"},
		{[]string{"validate", "--nope"}, 2, "unknown flag: --nope"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"version"}, 0, "kubectl-nodegroup "},
		{[]string{"completion", "bash"}, 0, "bash completion"},
		{[]string{"render", "-f", "x.yaml", "-o", "bogus"}, 2, `"bogus"`},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, want %d and %q in:\n%s%s", tc.args, code, tc.code, tc.want, out.String(), errOut.String())
		}
	}
}
