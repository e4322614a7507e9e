// Package metricsauth lets a scrape of the metrics endpoint through only when the API
// server says so: the bearer token is checked with a TokenReview and the user it names
// must be allowed to get the path (a SubjectAccessReview on the non-resource URL), as
// kube-rbac-proxy and controller-runtime's metrics filter do.
//
// It exists instead of controller-runtime's filters.WithAuthenticationAndAuthorization
// because that filter is built on k8s.io/apiserver's delegating authenticator and
// authorizer, which bring that module's authentication, authorization, CEL and tracing
// code into the binary for two API calls (5 MB of its 103 MB, and the resident pages
// their package initialisation touches). The two reviews are the upstream API types,
// sent with client-go's typed clients.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long a review's answer is reused. The same as controller-runtime's filter: a
// token's review for a minute, an allowed access for five, a denied one for thirty
// seconds (a new binding takes effect that soon). A refused token is asked again
// after ten seconds, so a burst of bad scrapes costs one review per token.
const (
	tokenTTL        = time.Minute
	refusedTokenTTL = 10 * time.Second
	allowTTL        = 5 * time.Minute
	denyTTL         = 30 * time.Second
	reviewTimeout   = 10 * time.Second
)

// maxEntries bounds each cache of answers.
const maxEntries = 1024

// Reviewer asks the API server who a token is and what they may do.
type Reviewer struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface

	// The answers, each until it expires; the least recently used goes first when one is
	// full, so a flood of made-up tokens cannot push out the scraper's.
	users     *cache.LRUExpireCache // token digest: *authenticationv1.UserInfo, nil when refused
	decisions *cache.LRUExpireCache // accessKey: bool
}

// NewReviewer asks the API server of config, through httpClient.
func NewReviewer(config *rest.Config, httpClient *http.Client) (*Reviewer, error) {
	authn, err := authenticationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	return newReviewer(authn.TokenReviews(), authz.SubjectAccessReviews(), clock.RealClock{}), nil
}

func newReviewer(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface, clk clock.PassiveClock) *Reviewer {
	return &Reviewer{tokens: tokens, access: access,
		users: cache.NewLRUExpireCacheWithClock(maxEntries, clk), decisions: cache.NewLRUExpireCacheWithClock(maxEntries, clk)}
}

// Filter is a controller-runtime metrics filter (metricsserver.Options.FilterProvider).
func Filter(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	r, err := NewReviewer(config, httpClient)
	if err != nil {
		return nil, err
	}
	return r.Wrap, nil
}

// Wrap serves handler to the requests the API server authenticates and authorizes:
// 401 without a token or with one it refuses, 403 to a user who may not get the path,
// 500 when it cannot be asked.
func (r *Reviewer) Wrap(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := r.authenticate(req.Context(), token)
		if err != nil {
			log.Error(err, "Reviewing a metrics client's token")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, err := r.authorize(req.Context(), user, verb, req.URL.Path)
		if err != nil {
			log.Error(err, "Reviewing a metrics client's access", "user", user.Username)
			http.Error(w, fmt.Sprintf("Authorization for user %s failed", user.Username), http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("Metrics access denied", "user", user.Username, "verb", verb, "path", req.URL.Path)
			http.Error(w, fmt.Sprintf("Authorization denied for user %s", user.Username), http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, req)
	}), nil
}

// bearerToken is the request's bearer token (RFC 6750: the scheme is case-insensitive).
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

// authenticate is the user the token belongs to, nil when the API server refuses it.
// The cache is keyed by the token's digest, so no token is kept.
func (r *Reviewer) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(token)))
	if user, ok := r.users.Get(key); ok {
		return user.(*authenticationv1.UserInfo), nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	if !review.Status.Authenticated {
		r.users.Add(key, (*authenticationv1.UserInfo)(nil), refusedTokenTTL)
		return nil, nil
	}
	user := review.Status.User
	r.users.Add(key, &user, tokenTTL)
	return &user, nil
}

// authorize says whether user may send verb to the non-resource path.
func (r *Reviewer) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	key := accessKey(user, verb, path)
	if allowed, ok := r.decisions.Get(key); ok {
		return allowed.(bool), nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		Extra:                 extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	r.decisions.Add(key, allowed, ttl)
	return allowed, nil
}

// accessKey names a question to the authorizer: everything the review sends.
func accessKey(user *authenticationv1.UserInfo, verb, path string) string {
	h := sha256.New()
	for _, s := range []string{user.Username, user.UID, verb, path} {
		fmt.Fprintf(h, "%q\x00", s)
	}
	for _, g := range user.Groups {
		fmt.Fprintf(h, "g%q\x00", g)
	}
	for _, k := range slices.Sorted(maps.Keys(user.Extra)) {
		fmt.Fprintf(h, "e%q=%q\x00", k, []string(user.Extra[k]))
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
