package chart

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestFlowSchemasClassifyTheOperator installs the chart's FlowSchemas and asks the API
// server's own API Priority and Fairness filter how it classifies requests: the
// operator's lease requests in the release namespace (get, and the create and update
// leader election sends) go to leader-election, its other requests to workload-high,
// and another ServiceAccount's requests to neither of the chart's schemas. The server
// names the schema and the priority level it chose in response headers, on every
// response, whatever its status: it classifies before it authorizes or reads a body.
func TestFlowSchemasClassifyTheOperator(t *testing.T) {
	objs := objects(t, render(t, nil))
	createRendered(t, objs, "FlowSchema/nodegroup-operator-leader-election", "FlowSchema/nodegroup-operator-workload")
	ctx := context.Background()
	var leaseSchema, workloadSchema flowcontrolv1.FlowSchema
	var leaderElection, workloadHigh flowcontrolv1.PriorityLevelConfiguration
	// The server writes its suggested priority levels shortly after it starts.
	testenv.Eventually(t, "the priority levels leader-election and workload-high", func() bool {
		return env.Client.Get(ctx, types.NamespacedName{Name: "leader-election"}, &leaderElection) == nil &&
			env.Client.Get(ctx, types.NamespacedName{Name: "workload-high"}, &workloadHigh) == nil
	})
	for name, fs := range map[string]*flowcontrolv1.FlowSchema{"nodegroup-operator-leader-election": &leaseSchema, "nodegroup-operator-workload": &workloadSchema} {
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, fs); err != nil {
			t.Fatal(err)
		}
	}

	operator := fmt.Sprintf("system:serviceaccount:%s:%s", releaseNamespace, releaseName)
	leases := "/apis/coordination.k8s.io/v1/namespaces/" + releaseNamespace + "/leases"
	// The server reads a new FlowSchema into its classifier a moment after storing it
	// (and marks it Dangling=False once it has): ask until it does.
	testenv.Eventually(t, "the API server classifies by the chart's FlowSchemas", func() bool {
		lease, _ := classify(t, http.MethodGet, operator, leases+"/x")
		other, _ := classify(t, http.MethodGet, operator, "/version")
		return lease == string(leaseSchema.UID) && other == string(workloadSchema.UID)
	})
	other := fmt.Sprintf("system:serviceaccount:%s:another-client", releaseNamespace)
	lease := leases + "/nodegroup-operator.nodegroup.io"
	otherLease := "/apis/coordination.k8s.io/v1/namespaces/default/leases/nodegroup-operator.nodegroup.io"
	pools := "/apis/nodegroup.io/v1alpha1/namespaces/tenant-a/nodegroups"
	for _, tc := range []struct {
		method, user, path string
		schema, level      string
	}{
		{http.MethodGet, operator, lease, string(leaseSchema.UID), string(leaderElection.UID)},
		{http.MethodPost, operator, leases, string(leaseSchema.UID), string(leaderElection.UID)},
		{http.MethodPut, operator, lease, string(leaseSchema.UID), string(leaderElection.UID)},
		{http.MethodGet, operator, otherLease, string(workloadSchema.UID), string(workloadHigh.UID)},
		{http.MethodGet, operator, pools, string(workloadSchema.UID), string(workloadHigh.UID)},
		{http.MethodGet, operator, "/api/v1/nodes", string(workloadSchema.UID), string(workloadHigh.UID)},
		{http.MethodGet, operator, "/version", string(workloadSchema.UID), string(workloadHigh.UID)},
		{http.MethodGet, other, lease, "", ""},
		{http.MethodGet, other, pools, "", ""},
	} {
		t.Run(tc.method+" "+tc.user+tc.path, func(t *testing.T) {
			schema, level := classify(t, tc.method, tc.user, tc.path)
			if tc.schema == "" {
				if schema == string(leaseSchema.UID) || schema == string(workloadSchema.UID) {
					t.Errorf("%s %s %s matched the chart's FlowSchema %s", tc.user, tc.method, tc.path, schema)
				}
				return
			}
			if schema != tc.schema || level != tc.level {
				t.Errorf("%s %s %s: FlowSchema %s, priority level %s; want %s, %s", tc.user, tc.method, tc.path, schema, level, tc.schema, tc.level)
			}
		})
	}
}

// classify sends method path as user, impersonated (the server impersonates before it
// classifies), with an empty body, and returns the FlowSchema and priority level UIDs
// the server reports.
func classify(t *testing.T, method, user, path string) (schema, level string) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"}}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, cfg.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	schema = resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)
	level = resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
	if schema == "" || level == "" {
		t.Fatalf("%s %s as %s (%s): the server reported no FlowSchema or priority level", method, path, user, resp.Status)
	}
	return schema, level
}
