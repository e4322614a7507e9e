package metricsauth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/metricsauth"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, false, func(e *testenv.Env) error { env = e; return nil })
}

// reviewCounter counts the reviews sent to the API server, by resource.
type reviewCounter struct {
	next                 http.RoundTripper
	tokens, accessChecks atomic.Int32
}

func (c *reviewCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case strings.HasSuffix(req.URL.Path, "/tokenreviews"):
		c.tokens.Add(1)
	case strings.HasSuffix(req.URL.Path, "/subjectaccessreviews"):
		c.accessChecks.Add(1)
	}
	return c.next.RoundTrip(req)
}

// guarded is a handler that answers "the metrics", behind the filter asking the API
// server of cfg through hc.
func guarded(t *testing.T, cfg *rest.Config, hc *http.Client) http.Handler {
	t.Helper()
	filter, err := metricsauth.Filter(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	handler, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "the metrics")
	}))
	if err != nil {
		t.Fatal(err)
	}
	return handler
}

// accounts are the tokens of two ServiceAccounts (names prefixed): a reader, whose
// ClusterRole may get /metrics, and a stranger, who may view but not scrape; and a
// transport to the API server that counts the reviews sent through it.
func accounts(t *testing.T, prefix string) (reader, stranger *rest.Config, counter *reviewCounter) {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	role := readerRole(t, c)
	if reader, err = localrun.ServiceAccountConfig(ctx, env.Config, "default", prefix+"reader", role.Name, time.Hour); err != nil {
		t.Fatal(err)
	}
	if stranger, err = localrun.ServiceAccountConfig(ctx, env.Config, "default", prefix+"stranger", "view", time.Hour); err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return reader, stranger, &reviewCounter{next: transport}
}

// readerRole is a ClusterRole that may get /metrics, made once.
func readerRole(t *testing.T, c client.Client) *rbacv1.ClusterRole {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metricsauth-test-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if err := c.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return role
}

// TestScrapesNeedAReviewedToken serves a handler behind the filter, asking the real
// API server: no token and a refused token get 401, a token whose user may not get
// /metrics 403, a token of a user bound to a role with get on /metrics the handler.
// The second scrape with the same token asks the API server nothing.
func TestScrapesNeedAReviewedToken(t *testing.T) {
	reader, stranger, counter := accounts(t, "")
	server := httptest.NewServer(guarded(t, env.Config, &http.Client{Transport: counter}))
	defer server.Close()

	scrape := func(authorization string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, server.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	reviews := func() (int32, int32) { return counter.tokens.Load(), counter.accessChecks.Load() }

	for _, tc := range []struct {
		name, authorization string
		code                int
		body                string
		// reviews sent for this scrape: token reviews, access reviews
		tokens, access int32
	}{
		{name: "no token", code: http.StatusUnauthorized},
		{name: "another scheme", authorization: "Basic " + reader.BearerToken, code: http.StatusUnauthorized},
		{name: "a token the API server refuses", authorization: "Bearer not-a-token", code: http.StatusUnauthorized, tokens: 1},
		{name: "the refused token again", authorization: "Bearer not-a-token", code: http.StatusUnauthorized},
		{name: "a user without get on /metrics", authorization: "Bearer " + stranger.BearerToken, code: http.StatusForbidden,
			body: "Authorization denied for user system:serviceaccount:default:stranger", tokens: 1, access: 1},
		{name: "the same user again", authorization: "Bearer " + stranger.BearerToken, code: http.StatusForbidden},
		{name: "a user with get on /metrics", authorization: "Bearer " + reader.BearerToken, code: http.StatusOK,
			body: "the metrics", tokens: 1, access: 1},
		{name: "the same user again, scheme in lower case", authorization: "bearer " + reader.BearerToken, code: http.StatusOK,
			body: "the metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens, access := reviews()
			code, body := scrape(tc.authorization)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("HTTP %d %q, want %d with %q", code, body, tc.code, tc.body)
			}
			gotTokens, gotAccess := reviews()
			if gotTokens-tokens != tc.tokens || gotAccess-access != tc.access {
				t.Errorf("sent %d token and %d access reviews, want %d and %d", gotTokens-tokens, gotAccess-access, tc.tokens, tc.access)
			}
		})
	}
}

// TestAnUnreachableAPIServerIsAServerError: a scrape the filter cannot review is a 500,
// never let through.
func TestAnUnreachableAPIServerIsAServerError(t *testing.T) {
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://127.0.0.1:1"
	handler := guarded(t, cfg, &http.Client{Timeout: 2 * time.Second})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer some-token")
	handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "the metrics") {
		t.Errorf("HTTP %d %q, want 500 without the metrics", rec.Code, rec.Body.String())
	}
}

// TestAnswersExpire: each answer is reused until its time is up, and asked again after:
// a token's review for a minute, a refused token's for ten seconds, an allowed access
// for five minutes, a denied one for thirty seconds.
func TestAnswersExpire(t *testing.T) {
	reader, stranger, counter := accounts(t, "expiring-")
	hc := &http.Client{Transport: counter}
	authn, err := authenticationclient.NewForConfigAndClient(env.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(env.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	handler, err := metricsauth.NewReviewerWithClock(authn.TokenReviews(), authz.SubjectAccessReviews(), clk).Wrap(logr.Discard(),
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the metrics") }))
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(token string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	step := func(d time.Duration, token string, code int, tokens, access int32) {
		t.Helper()
		clk.Step(d)
		beforeTokens, beforeAccess := counter.tokens.Load(), counter.accessChecks.Load()
		if got := scrape(token); got != code {
			t.Fatalf("HTTP %d, want %d", got, code)
		}
		if gotT, gotA := counter.tokens.Load()-beforeTokens, counter.accessChecks.Load()-beforeAccess; gotT != tokens || gotA != access {
			t.Errorf("after %s: %d token and %d access reviews, want %d and %d", d, gotT, gotA, tokens, access)
		}
	}
	testenv.Eventually(t, "the reader may scrape", func() bool { return scrape(reader.BearerToken) == http.StatusOK })
	step(59*time.Second, reader.BearerToken, http.StatusOK, 0, 0)
	step(2*time.Second, reader.BearerToken, http.StatusOK, 1, 0) // the token's minute is up, the access is not
	step(5*time.Minute, reader.BearerToken, http.StatusOK, 1, 1)

	step(0, "not-a-token", http.StatusUnauthorized, 1, 0)
	step(9*time.Second, "not-a-token", http.StatusUnauthorized, 0, 0)
	step(2*time.Second, "not-a-token", http.StatusUnauthorized, 1, 0)

	step(0, stranger.BearerToken, http.StatusForbidden, 1, 1)
	step(29*time.Second, stranger.BearerToken, http.StatusForbidden, 0, 0)
	step(2*time.Second, stranger.BearerToken, http.StatusForbidden, 0, 1)
}
