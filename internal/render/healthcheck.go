package render

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Health check defaults. A VM boots and joins in a few minutes; Kairos disks are larger
// and their first boot also installs, so they get longer.
const (
	defaultStartupTimeout       = 10 * time.Minute
	defaultKairosStartupTimeout = 20 * time.Minute
	defaultUnhealthyTimeout     = 5 * time.Minute
	// minRemediable is how many unhealthy machines are always remediated, whatever the
	// pool's size, so a one- or two-machine pool still heals.
	minRemediable = 2
)

// machineHealthCheck replaces machines whose node does not come up or goes away.
func machineHealthCheck(in *Input, meta metadata) *clusterv1.MachineHealthCheck {
	startup := defaultStartupTimeout
	if in.Class.OS == "Kairos" {
		startup = defaultKairosStartupTimeout
	}
	notReady, unknown := defaultUnhealthyTimeout, defaultUnhealthyTimeout
	// Remediation stops when more machines than this are unhealthy at once: that is an
	// outage of the location, and replacing machines would only add load.
	maxUnhealthy := intstr.FromInt32(max(minRemediable, (in.Spec.MaxReplicas*40+99)/100))
	if hc := in.Spec.HealthCheck; hc != nil {
		if hc.NodeStartupTimeout != nil {
			startup = hc.NodeStartupTimeout.Duration
		}
		if hc.UnhealthyNotReadyTimeout != nil {
			notReady = hc.UnhealthyNotReadyTimeout.Duration
		}
		if hc.UnhealthyUnknownTimeout != nil {
			unknown = hc.UnhealthyUnknownTimeout.Duration
		}
		if hc.MaxUnhealthy != nil {
			maxUnhealthy = *hc.MaxUnhealthy
		}
	}
	return &clusterv1.MachineHealthCheck{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterAPIVersion, Kind: "MachineHealthCheck"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      meta.name,
			Namespace: in.Namespace,
			Labels:    meta.labels,
		},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: meta.cluster,
			Selector:    metav1.LabelSelector{MatchLabels: meta.selector},
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: seconds(startup),
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: seconds(unknown)},
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: seconds(notReady)},
				},
			},
			Remediation: clusterv1.MachineHealthCheckRemediation{
				TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{UnhealthyLessThanOrEqualTo: &maxUnhealthy},
			},
		},
	}
}

func seconds(d time.Duration) *int32 {
	s := int32(d / time.Second)
	return &s
}
