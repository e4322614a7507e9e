package operator

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Retry delays of a reconcile that failed.
const (
	// FirstRetry is the wait before the first retry of a failed reconcile. A failure is
	// an API server or a tenant that did not answer, or refused a write: neither is
	// fixed within milliseconds, so a retry sooner (controller-runtime's default starts
	// at 5 ms) only adds requests while the API server is struggling.
	FirstRetry = time.Second
	// LastRetry is the longest wait: the delay doubles with each failure up to it. A
	// failure that ends (an API server back from an outage) is retried within it, so a
	// pool converges soon after, even when no watch event comes to wake it.
	LastRetry = 30 * time.Second
)

// Retries is how every controller of the operator retries a failed reconcile: each
// object backs off from FirstRetry to LastRetry, and all of a controller's retries
// together at most 10 per second after a burst of 100, so thousands of pools failing
// at once (the API server away) are retried as a trickle, not a wave. Conflicts and
// waits are not failures: a controller requeues them after a delay of its own.
func Retries() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](FirstRetry, LastRetry),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// Unanswered tells an error that carries no answer about the request from one that
// does: the API server was not reached, broke the connection, timed out, shed the load
// (429) or failed (5xx). Such an error says nothing of the object, so a controller
// retries it (Retries) and leaves the conditions it would set as they were: a message
// built from it changes with every try (a stream number, a port), and one copied onto
// every pool of a cluster would have each of them write its status on each try, to the
// API server that is failing. A refusal (invalid, forbidden, a conflict) is an answer.
func Unanswered(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
