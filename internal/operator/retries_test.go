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
	var last time.Duration
	for i := range 1000 {
		last = r.When(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: fmt.Sprintf("p%d", i)}})
	}
	// The 1,000th waits for 900 tokens at 10 a second: about 90 s (less the moments the
	// loop took).
	if last < 85*time.Second {
		t.Errorf("the 1,000th of 1,000 pools failing at once is retried after %s, want about 90 s", last)
	}
}

// An error with no answer about the request (the API server away, timing out, shedding
// load or failing) is told from a refusal, which is an answer.
func TestUnanswered(t *testing.T) {
	gr := schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinedeployments"}
	broken := &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis/x", Err: errors.New("stream error: stream ID 441; INTERNAL_ERROR; received from peer")}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"a broken connection", fmt.Errorf("apply Secret a/b: reading the live object: %w", broken), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"the request's deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), true},
		{"an unexpected EOF", io.ErrUnexpectedEOF, true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"500", apierrors.NewInternalError(errors.New("etcd")), true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"504", apierrors.NewServerTimeout(gr, "patch", 1), true},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "MachineDeployment"}, "p1", nil), false},
		{"forbidden", apierrors.NewForbidden(gr, "p1", errors.New("no")), false},
		{"a conflict", apierrors.NewConflict(gr, "p1", errors.New("changed")), false},
		{"not found", apierrors.NewNotFound(gr, "p1"), false},
		{"the operator's own error", errors.New("the template names no image"), false},
		{"nil", nil, false},
	} {
		if got := Unanswered(c.err); got != c.want {
			t.Errorf("%s: Unanswered %t, want %t", c.name, got, c.want)
		}
	}
}
