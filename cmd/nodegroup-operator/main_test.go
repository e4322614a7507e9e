package main

import "testing"

// TestMemoryLimit: CONTAINER_MEMORY_LIMIT is what the chart's Downward API writes
// (limits.memory in bytes); the Go runtime gets 90% of it, and nothing when it is not
// a positive number.
func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		limit     int64
		ok        bool
	}{
		{"unset", "", 0, false},
		{"garbage", "512Mi", 0, false},
		{"zero", "0", 0, false},
		{"negative", "-1", 0, false},
		{"the chart's default limit, 512Mi", "536870912", 483183819, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, ok := memoryLimit(tc.env)
			if ok != tc.ok || limit != tc.limit {
				t.Errorf("memoryLimit(%q) = %d, %v; want %d, %v", tc.env, limit, ok, tc.limit, tc.ok)
			}
		})
	}
}
