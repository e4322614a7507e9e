package autoscaler_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
)

// statusYAML is a status of the shape cluster-autoscaler 1.36 writes (the e2e reads the
// real one): one node group per case below, and one the pools do not have.
const statusYAML = `time: 2026-12-02 11:00:00.000000000 +0000 UTC
autoscalerStatus: Running
clusterWide:
  health: {status: Healthy}
nodeGroups:
- name: MachineDeployment/tenant-a/demo-room
  health: {status: Healthy, cloudProviderTarget: 2, minSize: 0, maxSize: 5, nodeCounts: {registered: {total: 2, ready: 2}}}
  scaleUp: {status: NoActivity}
- name: MachineDeployment/tenant-a/demo-growing
  health: {status: Healthy, cloudProviderTarget: 3, minSize: 0, maxSize: 5}
  scaleUp: {status: InProgress}
- name: MachineDeployment/tenant-a/demo-full
  health: {status: Healthy, cloudProviderTarget: 3, minSize: 1, maxSize: 3}
  scaleUp: {status: NoActivity}
- name: MachineDeployment/tenant-a/demo-failing
  health: {status: Healthy, cloudProviderTarget: 1, minSize: 0, maxSize: 3}
  scaleUp:
    status: Backoff
    backoffInfo: {errorCode: timeout, errorMessage: "machines did not register in 15m"}
- name: MachineDeployment/tenant-a/demo-sick
  health:
    status: Unhealthy
    cloudProviderTarget: 4
    minSize: 0
    maxSize: 6
    nodeCounts: {registered: {total: 4, ready: 1}, longUnregistered: 2}
  scaleUp: {status: NoActivity}
  futureField: ignored
`

func TestPoolCondition(t *testing.T) {
	st, err := autoscaler.ParseStatus(statusYAML)
	if err != nil {
		t.Fatal(err)
	}
	for md, want := range map[string]struct {
		status       metav1.ConditionStatus
		reason, text string
	}{
		"demo-room":    {metav1.ConditionTrue, autoscaler.ReasonWithinLimits, "target 2, at most 5"},
		"demo-growing": {metav1.ConditionTrue, autoscaler.ReasonScalingUp, "adding nodes: target 3, at most 5"},
		"demo-full":    {metav1.ConditionFalse, autoscaler.ReasonMaxSizeReached, "maximum size, 3 (spec.maxReplicas)"},
		"demo-failing": {metav1.ConditionFalse, autoscaler.ReasonBackoff, "(timeout: machines did not register in 15m)"},
		"demo-sick":    {metav1.ConditionFalse, autoscaler.ReasonUnhealthy, "1 of 4 registered nodes ready, 2 machines long unregistered"},
		"demo-absent":  {metav1.ConditionUnknown, autoscaler.ReasonNotDiscovered, "does not list the node group MachineDeployment/tenant-a/demo-absent"},
	} {
		s, reason, msg := st.PoolCondition(types.NamespacedName{Namespace: "tenant-a", Name: md})
		if s != want.status || reason != want.reason || !strings.Contains(msg, want.text) {
			t.Errorf("%s: got %s %s %q, want %s %s containing %q", md, s, reason, msg, want.status, want.reason, want.text)
		}
	}
	// Another namespace's node group of the same name is not this pool's.
	if s, reason, _ := st.PoolCondition(types.NamespacedName{Namespace: "tenant-b", Name: "demo-full"}); s != metav1.ConditionUnknown || reason != autoscaler.ReasonNotDiscovered {
		t.Errorf("tenant-b/demo-full: got %s %s, want Unknown NotDiscovered", s, reason)
	}
}

// TestPoolConditionBoundsTheTenantsWords: the ConfigMap is the tenant's to write; what
// of it reaches a condition is bounded, cut on a rune boundary.
func TestPoolConditionBoundsTheTenantsWords(t *testing.T) {
	long := strings.Repeat("é", 2000)
	st, err := autoscaler.ParseStatus(`nodeGroups:
- name: MachineDeployment/ns/md
  scaleUp: {status: Backoff, backoffInfo: {errorMessage: "` + long + `"}}
`)
	if err != nil {
		t.Fatal(err)
	}
	_, reason, msg := st.PoolCondition(types.NamespacedName{Namespace: "ns", Name: "md"})
	if reason != autoscaler.ReasonBackoff || len(msg) > 700 || !strings.Contains(msg, "é…") || !strings.HasPrefix(msg, "the autoscaler backs off") {
		t.Errorf("got %s %q (%d bytes)", reason, msg, len(msg))
	}
	if strings.ContainsRune(msg, '\uFFFD') {
		t.Errorf("cut inside a rune: %q", msg)
	}
}

func TestParseStatusRefusesWhatIsNotTheFormat(t *testing.T) {
	for _, bad := range []string{"nodeGroups: {name: x}", "nodeGroups:\n- name: [1, 2]", "\t- :"} {
		if _, err := autoscaler.ParseStatus(bad); err == nil || !strings.Contains(err.Error(), "1.30 and later") {
			t.Errorf("%q: got %v, want an error naming the format", bad, err)
		}
	}
	// The plain text a pre-1.30 autoscaler wrote is refused, never read as a verdict.
	if _, err := autoscaler.ParseStatus("Cluster-autoscaler status at 2023-01-01 ...\nNodeGroups:\n  Name: MachineDeployment/ns/md\n  Health: Healthy"); err == nil {
		t.Error("the pre-1.30 plain-text status parsed")
	}
}

func TestStale(t *testing.T) {
	st, err := autoscaler.ParseStatus(statusYAML)
	if err != nil {
		t.Fatal(err)
	}
	written := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	if stale, _ := st.Stale(written.Add(4*time.Minute), 5*time.Minute); stale {
		t.Error("a status 4 min old is stale with a 5 min limit")
	}
	stale, msg := st.Stale(written.Add(6*time.Minute), 5*time.Minute)
	if !stale || !strings.Contains(msg, "2026-12-02T11:00:00Z") {
		t.Errorf("a status 6 min old: stale %v %q", stale, msg)
	}
	st.Time = "not a time"
	if stale, _ := st.Stale(written.Add(time.Hour), 5*time.Minute); stale {
		t.Error("a status without a readable time is judged stale")
	}
}
