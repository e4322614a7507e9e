package operator

import (
	"context"
	"errors"
	"io"
	"net"
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
	// an API server that did not answer or refused a write: neither is fixed within
	// milliseconds, so a retry sooner (controller-runtime's default starts at 5 ms) only
	// adds requests while the API server is struggling.
	FirstRetry = time.Second
	// LastRetry is the longest wait of Retries: the delay doubles with each failure up
	// to it. An API server back from an outage is noticed within it, so a pool converges
	// soon after, even when no watch event comes to wake it.
	LastRetry = 30 * time.Second
	// LastTenantRetry is the longest wait of TenantRetries.
	LastTenantRetry = time.Minute
)

// Retries is how the operator's controllers of pools and their platform objects retry
// a failed reconcile: each object backs off from FirstRetry to LastRetry, and all of a
// controller's retries together go at most 10 a second after a burst of 100, so
// thousands of pools failing at once (the API server away) are retried as a trickle,
// not a wave: N of them over about N/10 s. An object refused for good is retried every
// LastRetry, within that bound. A conflict returned as an error waits as a failure; the
// pool controller requeues its status conflicts after a delay of its own.
func Retries() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](FirstRetry, LastRetry),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// TenantRetries is how the controllers that talk to tenant clusters (join identity,
// node link) retry a cluster: from FirstRetry up to LastTenantRetry, each cluster on
// its own. They have no shared bucket: what happens in a tenant (a watch that failed, a
// token changed) queues its cluster through the limiter too (tenant.Queue), and each
// such queueing would take a token, so many tenants away at once would hold back every
// other cluster's retries and token upkeep behind them.
func TenantRetries() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](FirstRetry, LastTenantRetry)
}

// Unanswered tells an error that carries no answer about the request from one that
// does, and says which in words that do not change from one try to the next: the API
// server could not be reached or broke the connection, timed out, or shed the load
// (429, 503). Such an error says nothing of the object, and its own text changes with
// every try (a stream number, a port): a condition that copies it is rewritten on each
// retry, on every pool that mirrors it. A refusal (invalid, forbidden, a conflict) and
// an internal error (500: a webhook that cannot be called, a failed conversion, which
// may last) are answers.
func Unanswered(err error) (why string, ok bool) {
	if err == nil {
		return "", false
	}
	var status apierrors.APIStatus
	var urlErr *url.Error
	var netErr net.Error
	switch {
	case apierrors.IsTooManyRequests(err):
		return "it answered 429, too many requests", true
	case apierrors.IsServiceUnavailable(err):
		return "it answered 503, unavailable", true
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return "it timed out", true
	case errors.As(err, &status):
		return "", false // any other answer
	case errors.Is(err, context.DeadlineExceeded):
		return "it timed out", true
	case errors.As(err, &urlErr), errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "it could not be reached or broke the connection", true
	}
	return "", false
}
