package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestContainerMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name  string
		files []string
		limit int64
		ok    bool
	}{
		{"cgroup v2 limit", []string{file("v2", "268435456\n")}, 268435456, true},
		{"cgroup v2 without a limit", []string{file("v2max", "max\n"), file("v1", "134217728\n")}, 0, false},
		{"cgroup v1 after a missing v2 file", []string{missing, file("v1b", "134217728\n")}, 134217728, true},
		{"cgroup v1 without a limit", []string{missing, file("v1max", "9223372036854771712\n")}, 0, false},
		{"no cgroup files", []string{missing}, 0, false},
		{"garbage", []string{file("bad", "lots\n")}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, ok := containerMemoryLimit(tc.files)
			if ok != tc.ok || (ok && limit != tc.limit) {
				t.Errorf("got %d, %v; want %d, %v", limit, ok, tc.limit, tc.ok)
			}
		})
	}
}
