package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy stands between the operator and the management API server when
// Options.OperatorProxy is set: the operator's kubeconfig names it, so everything the
// operator asks goes through it (its credentials pass through unchanged, the API server
// authenticates the operator as before). It counts the operator's writes and its
// requests per second, can run a hook after a chosen write, and can answer for a while
// with errors instead of the API server. A request the API server does not answer
// (stopped) breaks the connection, as a dead server's would.
type Proxy struct {
	// URL is where the proxy listens, https://127.0.0.1:<port>, under the certificate
	// CAData signs.
	URL    string
	CAData []byte

	srv      *http.Server
	upstream *httputil.ReverseProxy

	writes atomic.Int64
	mu     sync.Mutex
	// perSecond counts requests by the Unix second they arrived in, and within it by
	// what they asked (Kind).
	perSecond map[int64]map[string]int
	// afterWrite runs after each counted write has been answered by the API server and
	// before the operator gets the answer.
	afterWrite func(total int64)
	// refuse answers every request with these statuses in turn until refuseUntil.
	refuse      []int
	refuseUntil time.Time
	refused     int
}

// startProxy listens on a free loopback port with cert and forwards to the API server
// of upstream, whose credentials it does not use.
func startProxy(upstream *rest.Config, cert *servingCert) (*Proxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(&rest.Config{Host: upstream.Host, TLSClientConfig: rest.TLSClientConfig{CAData: upstream.CAData}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "https://" + ln.Addr().String(), CAData: cert.CAData, perSecond: map[int64]map[string]int{}}
	p.upstream = &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport: transport,
		// Watches stream: every event goes on at once.
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		// No answer from the API server: the operator sees its connection break, as it
		// would with the server gone, not an answer the server never gave.
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) },
		ModifyResponse: func(resp *http.Response) error {
			if countedWrite(resp.Request) {
				n := p.writes.Add(1)
				p.mu.Lock()
				hook := p.afterWrite
				p.mu.Unlock()
				if hook != nil {
					hook(n)
				}
			}
			return nil
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second,
		// Connections the proxy breaks on purpose are not worth a line each.
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = p.srv.ServeTLS(ln, filepath.Join(cert.Dir, "tls.crt"), filepath.Join(cert.Dir, "tls.key")) }()
	return p, nil
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	p.mu.Lock()
	if p.perSecond[now.Unix()] == nil {
		p.perSecond[now.Unix()] = map[string]int{}
	}
	p.perSecond[now.Unix()][Kind(r)]++
	var status int
	if now.Before(p.refuseUntil) && len(p.refuse) > 0 {
		status = p.refuse[p.refused%len(p.refuse)]
		p.refused++
	}
	p.mu.Unlock()
	if status != 0 {
		// As the API server answers when it sheds load (429, with when to come back) or
		// fails (500): a Status object.
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the e2e proxy","reason":%q,"code":%d}`,
			reason(status), status)
		return
	}
	p.upstream.ServeHTTP(w, r)
}

func reason(status int) string {
	if status == http.StatusTooManyRequests {
		return "TooManyRequests"
	}
	return "InternalError"
}

// countedWrite: a request that changes stored state and is the operator's work on the
// objects it manages. Left out: dry runs, reviews (TokenReviews, SubjectAccessReviews:
// who scrapes its metrics), the leader election lease, and events, which the
// operator's event broadcaster sends in the background on its own schedule, so their
// count would not say how far the work had come.
func countedWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	if strings.Contains(r.URL.RawQuery, "dryRun=All") {
		return false
	}
	path := r.URL.Path
	for _, skip := range []string{"reviews", "/leases/", "/leases", "/events"} {
		if strings.HasSuffix(path, skip) || strings.Contains(path, skip+"/") {
			return false
		}
	}
	return true
}

// Writes is the number of writes (countedWrite) the operator has sent that the API
// server answered, whatever the answer, over every run of the operator.
func (p *Proxy) Writes() int64 { return p.writes.Load() }

// AfterWrite sets f to run after each counted write, with the count so far, before the
// answer goes back to the operator; nil removes it.
func (p *Proxy) AfterWrite(f func(total int64)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.afterWrite = f
}

// Refuse answers every request with statuses, in turn, for d.
func (p *Proxy) Refuse(d time.Duration, statuses ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse, p.refuseUntil, p.refused = statuses, time.Now().Add(d), 0
}

// Rate is the requests per second the operator sent in [from, to): the busiest second
// and the mean.
func (p *Proxy) Rate(from, to time.Time) (peak int, mean float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total int
	for s := from.Unix(); s < to.Unix(); s++ {
		n := 0
		for _, k := range p.perSecond[s] {
			n += k
		}
		total += n
		peak = max(peak, n)
	}
	if secs := to.Sub(from).Seconds(); secs > 0 {
		mean = float64(total) / secs
	}
	return peak, mean
}

// Kind names what a request asked, without object names: its verb (a watch is a
// "watch") and its resource, so the requests of one controller or informer add up.
// "put leases", "watch machinedeployments", "patch nodegroups/status".
func Kind(r *http.Request) string {
	verb := strings.ToLower(r.Method)
	if r.URL.Query().Get("watch") == "true" {
		verb = "watch"
	}
	if strings.Contains(r.URL.RawQuery, "dryRun=All") {
		verb += " (dry run)"
	}
	// /api/v1/namespaces/ns/secrets/name, /apis/group/version/resource/name/sub
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	default:
		return verb + " " + r.URL.Path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		switch {
		case len(parts) == 2:
			return verb + " namespaces"
		case parts[2] == "status" || parts[2] == "finalize": // a Namespace's subresources
			return verb + " namespaces/" + parts[2]
		}
		parts = parts[2:]
	}
	if len(parts) == 0 || parts[0] == "" { // discovery: /api, /apis/group/version
		return verb + " " + r.URL.Path
	}
	resource := parts[0]
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	return verb + " " + resource
}

// Kinds counts the requests the operator sent in [from, to) by Kind, most first.
func (p *Proxy) Kinds(from, to time.Time) []KindCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	sum := map[string]int{}
	for s := from.Unix(); s < to.Unix(); s++ {
		for k, n := range p.perSecond[s] {
			sum[k] += n
		}
	}
	out := make([]KindCount, 0, len(sum))
	for k, n := range sum {
		out = append(out, KindCount{Kind: k, N: n})
	}
	slices.SortFunc(out, func(a, b KindCount) int {
		if a.N != b.N {
			return b.N - a.N
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return out
}

// KindCount is how many requests of one Kind.
type KindCount struct {
	Kind string
	N    int
}

// Close stops listening and breaks every open connection.
func (p *Proxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		_ = p.srv.Close()
	}
	_ = p.srv.Close()
}
