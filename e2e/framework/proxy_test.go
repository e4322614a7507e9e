package framework

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

// The proxy counts the operator's writes to the objects it manages, and nothing it sends
// on a schedule of its own or that stores nothing.
func TestCountedWrite(t *testing.T) {
	for _, c := range []struct {
		method, uri string
		want        bool
	}{
		{http.MethodPost, "/apis/cluster.x-k8s.io/v1beta2/namespaces/a/machinedeployments", true},
		{http.MethodPatch, "/apis/cluster.x-k8s.io/v1beta2/namespaces/a/machinedeployments/tenant-p1?fieldManager=nodegroup-operator", true},
		{http.MethodPatch, "/apis/nodegroup.io/v1alpha1/namespaces/a/nodegroups/p1/status", true},
		{http.MethodDelete, "/apis/bootstrap.cluster.x-k8s.io/v1alpha3/namespaces/a/talosconfigtemplates/p1-0a1b2c3d4e", true},
		{http.MethodPut, "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef", true},
		{http.MethodPatch, "/apis/cluster.x-k8s.io/v1beta2/namespaces/a/machinedeployments/tenant-p1?dryRun=All&fieldManager=x", false},
		{http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/namespaces/a/machinedeployments", false},
		{http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/nodegroup-system/leases/nodegroup-operator.nodegroup.io", false},
		{http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/nodegroup-system/leases", false},
		{http.MethodPost, "/api/v1/namespaces/a/events", false},
		{http.MethodPatch, "/apis/events.k8s.io/v1/namespaces/a/events/p1.17f", false},
		{http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", false},
		{http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", false},
	} {
		if got := countedWrite(request(t, c.method, c.uri)); got != c.want {
			t.Errorf("%s %s: counted %t, want %t", c.method, c.uri, got, c.want)
		}
	}
}

// Kind names a request by verb and resource, without namespaces or object names, so
// the requests of one controller or informer add up.
func TestKind(t *testing.T) {
	for _, c := range []struct {
		method, uri, want string
	}{
		{http.MethodPatch, "/apis/nodegroup.io/v1alpha1/namespaces/a/nodegroups/p1/status", "patch nodegroups/status"},
		{http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/machinedeployments?watch=true&resourceVersion=7", "watch machinedeployments"},
		{http.MethodGet, "/api/v1/namespaces/a/secrets/t-talos", "get secrets"},
		{http.MethodGet, "/api/v1/namespaces?limit=500", "get namespaces"},
		{http.MethodGet, "/api/v1/namespaces/a", "get namespaces"},
		{http.MethodPut, "/api/v1/namespaces/a/finalize", "put namespaces/finalize"},
		{http.MethodGet, "/api/v1/namespaces/a/status", "get namespaces/status"},
		{http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/nodegroup-system/leases/nodegroup-operator.nodegroup.io", "put leases"},
		{http.MethodPatch, "/apis/cluster.x-k8s.io/v1beta2/namespaces/a/machinedeployments/t-p1?dryRun=All", "patch (dry run) machinedeployments"},
		{http.MethodGet, "/version", "get /version"},
		{http.MethodGet, "/apis", "get /apis"},
	} {
		if got := Kind(request(t, c.method, c.uri)); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.uri, got, c.want)
		}
	}
}

// Kinds adds up the requests of a window by Kind, most first, and leaves out those
// outside it.
func TestKinds(t *testing.T) {
	p := &Proxy{perSecond: map[int64]map[string]int{
		99:  {"get secrets": 7},
		100: {"get secrets": 2, "put leases": 1},
		101: {"put leases": 4, "get /version": 1},
		102: {"get secrets": 5},
	}}
	got := p.Kinds(time.Unix(100, 0), time.Unix(102, 0))
	want := []KindCount{{"put leases", 5}, {"get secrets", 2}, {"get /version", 1}}
	if !slices.Equal(got, want) {
		t.Errorf("Kinds over [100, 102): %v, want %v", got, want)
	}
	if peak, mean := p.Rate(time.Unix(100, 0), time.Unix(102, 0)); peak != 5 || mean != 4 {
		t.Errorf("Rate over [100, 102): peak %d, mean %.1f, want 5 and 4.0", peak, mean)
	}
}

// request is a request of method to uri, as the proxy receives it.
func request(t *testing.T, method, uri string) *http.Request {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Request{Method: method, URL: u}
}
