package main

import (
	"encoding/json"
	"testing"
)

// TestChurnTimeoutsAreCounted: a churn client's write the API server gave up on (504
// Timeout, or 500 ServerTimeout) is counted as timed out, as a 429 is counted as
// throttled, and is not an anomaly; another failure is.
func TestChurnTimeoutsAreCounted(t *testing.T) {
	const uri = "/apis/cluster.x-k8s.io/v1beta2/namespaces/scale-0092/machinedeployments/w0/status"
	for _, tc := range []struct {
		name, status                 string
		throttled, timedOut, anomaly int
	}{
		{"gateway timeout", `{"code":504,"reason":"Timeout"}`, 0, 1, 0},
		{"server timeout", `{"code":500,"reason":"ServerTimeout"}`, 0, 1, 0},
		{"throttled", `{"code":429,"reason":"TooManyRequests"}`, 1, 0, 0},
		{"internal error", `{"code":500,"reason":"InternalError"}`, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e auditEvent
			line := `{"stage":"ResponseComplete","verb":"patch","requestURI":"` + uri + `",` +
				`"objectRef":{"resource":"machinedeployments","namespace":"scale-0092","name":"w0","subresource":"status"},` +
				`"responseStatus":` + tc.status + `}`
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			h := &harness{res: &Result{}}
			h.countChurnChange(&e)
			c := h.res.Churn
			if c.Throttled != tc.throttled || c.TimedOut != tc.timedOut || len(h.res.Anomalies) != tc.anomaly {
				t.Errorf("throttled %d, timed out %d, anomalies %q; want %d, %d, %d",
					c.Throttled, c.TimedOut, h.res.Anomalies, tc.throttled, tc.timedOut, tc.anomaly)
			}
		})
	}
}
