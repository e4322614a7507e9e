package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A failing object waits a second, then twice as long after each failure, at most
// LastRetry; its success (Forget) starts it over.
func TestRetriesBackOffPerObject(t *testing.T) {
	r := Retries()
	pool := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "p1"}}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, LastRetry, LastRetry}
	for i, w := range want {
		if got := r.When(pool); got != w {
			t.Fatalf("failure %d: retried after %s, want %s", i+1, got, w)
		}
	}
	r.Forget(pool)
	if got := r.When(pool); got != FirstRetry {
		t.Errorf("after a success: retried after %s, want %s", got, FirstRetry)
	}
}

// Many objects failing at once are retried at most 10 a second after the first 100.
func TestRetriesTrickleWhenManyFail(t *testing.T) {
	r := Retries()
	for i := range 1000 {
		got := r.When(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: fmt.Sprintf("p%d", i)}})
		switch {
		case i < 100 && got != FirstRetry:
			t.Fatalf("pool %d of the first 100 failing at once is retried after %s, want %s", i+1, got, FirstRetry)
		case i == 999 && (got < 85*time.Second || got > 90*time.Second):
			// 900 tokens at 10 a second, less the moments the loop took.
			t.Errorf("the 1,000th of 1,000 pools failing at once is retried after %s, want about 90 s", got)
		}
	}
}

// A tenant's cluster backs off on its own, up to a minute, however many others fail.
func TestTenantRetriesPerCluster(t *testing.T) {
	r := TenantRetries()
	for i := range 1000 {
		if got := r.When(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: fmt.Sprintf("t%d", i), Name: "tenant"}}); got != FirstRetry {
			t.Fatalf("cluster %d of 1,000 failing at once is retried after %s, want %s", i+1, got, FirstRetry)
		}
	}
	one := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "t0", Name: "tenant"}}
	var got time.Duration
	for range 10 {
		got = r.When(one)
	}
	if got != LastTenantRetry {
		t.Errorf("after 11 failures a cluster waits %s, want %s", got, LastTenantRetry)
	}
}

// An error with no answer about the request (the API server away, timing out or
// shedding load) is told from an answer: a refusal, or an internal error that may last.
func TestUnanswered(t *testing.T) {
	gr := schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinedeployments"}
	broken := &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis/x", Err: errors.New("stream error: stream ID 441; INTERNAL_ERROR; received from peer")}
	const (
		unreached = "it could not be reached or broke the connection"
		timedOut  = "it timed out"
	)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"a broken connection", fmt.Errorf("apply Secret a/b: reading the live object: %w", broken), unreached},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, unreached},
		{"an unexpected EOF", io.ErrUnexpectedEOF, unreached},
		{"the request's deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), timedOut},
		{"a client timeout", &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}, timedOut},
		{"429", apierrors.NewTooManyRequests("slow down", 1), "it answered 429, too many requests"},
		{"503", apierrors.NewServiceUnavailable("starting"), "it answered 503, unavailable"},
		{"504", apierrors.NewTimeoutError("etcd", 1), timedOut},
		{"a server timeout", apierrors.NewServerTimeout(gr, "patch", 1), timedOut},
		{"a webhook that cannot be called", apierrors.NewInternalError(errors.New(`failed calling webhook "validation.machinedeployment.cluster.x-k8s.io": connection refused`)), ""},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "MachineDeployment"}, "p1", nil), ""},
		{"forbidden", apierrors.NewForbidden(gr, "p1", errors.New("no")), ""},
		{"a conflict", apierrors.NewConflict(gr, "p1", errors.New("changed")), ""},
		{"not found, wrapped with %v", fmt.Errorf("apply: %v", apierrors.NewNotFound(gr, "p1")), ""},
		{"cancelled", context.Canceled, ""},
		{"the operator's own error", errors.New("the template names no image"), ""},
		{"nil", nil, ""},
	} {
		why, ok := Unanswered(c.err)
		if why != c.want || ok != (c.want != "") {
			t.Errorf("%s: Unanswered (%q, %t), want %q", c.name, why, ok, c.want)
		}
	}
}
