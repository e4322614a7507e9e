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
// operator's lease requests in the release namespace go to leader-election, its other
// requests to workload-high, and another ServiceAccount's requests to neither of the
// chart's schemas. The server names the schema and the priority level it chose in
// response headers, on every response, whatever its status.
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
	other := fmt.Sprintf("system:serviceaccount:%s:another-client", releaseNamespace)
	lease := "/apis/coordination.k8s.io/v1/namespaces/" + releaseNamespace + "/leases/nodegroup-operator.nodegroup.io"
	otherLease := "/apis/coordination.k8s.io/v1/namespaces/default/leases/nodegroup-operator.nodegroup.io"
	pools := "/apis/nodegroup.io/v1alpha1/namespaces/tenant-a/nodegroups"
	for _, tc := range []struct {
		user, path    string
		schema, level string
	}{
		{operator, lease, string(leaseSchema.UID), string(leaderElection.UID)},
		{operator, otherLease, string(workloadSchema.UID), string(workloadHigh.UID)},
		{operator, pools, string(workloadSchema.UID), string(workloadHigh.UID)},
		{operator, "/api/v1/nodes", string(workloadSchema.UID), string(workloadHigh.UID)},
		{operator, "/version", string(workloadSchema.UID), string(workloadHigh.UID)},
		{other, lease, "", ""},
		{other, pools, "", ""},
	} {
		t.Run(tc.user+tc.path, func(t *testing.T) {
			schema, level := classify(t, tc.user, tc.path)
			if tc.schema == "" {
				if schema == string(leaseSchema.UID) || schema == string(workloadSchema.UID) {
					t.Errorf("%s GET %s matched the chart's FlowSchema %s", tc.user, tc.path, schema)
				}
				return
			}
			if schema != tc.schema || level != tc.level {
				t.Errorf("%s GET %s: FlowSchema %s, priority level %s; want %s, %s", tc.user, tc.path, schema, level, tc.schema, tc.level)
			}
		})
	}
}

// classify sends GET path as user (impersonated, as the authentication filter runs
// before API Priority and Fairness) and returns the FlowSchema and priority level UIDs
// the server reports.
func classify(t *testing.T, user, path string) (schema, level string) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"}}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
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
		t.Fatalf("GET %s as %s (%s): the server reported no FlowSchema or priority level", path, user, resp.Status)
	}
	return schema, level
}
