package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

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

// TestWaitForAPIServer: the wait ends with the first answer of GET /version, after as
// many refusals as the server gives, and with the context when none comes.
func TestWaitForAPIServer(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			t.Errorf("asked %s, want /version", r.URL.Path)
		}
		if calls.Add(1) <= 3 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"major":"1","minor":"35"}`))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitForAPIServer(context.Background(), cs.Discovery().RESTClient(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := calls.Load(); got != 4 {
		t.Errorf("asked %d times, want 4 (three refusals, then the answer)", got)
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "away", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	cs, err = kubernetes.NewForConfig(&rest.Config{Host: down.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := waitForAPIServer(ctx, cs.Discovery().RESTClient(), 10*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("with no answer: %v, want the context's deadline", err)
	}
}
