package autoscaler

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

const (
	// StatusConfigMapName is the ConfigMap, in StatusNamespace of the tenant cluster,
	// where cluster-autoscaler writes its status on every scan (its flag
	// --status-config-map-name, left at the default), under the key StatusKey.
	StatusConfigMapName = "cluster-autoscaler-status"
	StatusKey           = "status"

	// maxReported bounds what of the autoscaler's own words reaches a pool's condition:
	// the ConfigMap is the tenant's, and its admin may write anything there.
	maxReported = 512
)

// Reasons of the pools' AbleToScaleUp condition.
const (
	ReasonWithinLimits   = "WithinLimits"
	ReasonScalingUp      = "ScalingUp"
	ReasonMaxSizeReached = "MaxSizeReached"
	ReasonBackoff        = "Backoff"
	ReasonUnhealthy      = "Unhealthy"
	ReasonNotDiscovered  = "NotDiscovered"
	ReasonNoStatus       = "NoAutoscalerStatus"
	ReasonNotRunning     = "AutoscalerNotRunning"
	ReasonStatusUnknown  = "StatusUnreadable"
	ReasonStale          = "StaleStatus"
)

// statusTimeLayout is how cluster-autoscaler writes its status's time (Go's
// time.Time.String without the monotonic clock).
const statusTimeLayout = "2006-01-02 15:04:05.999999999 -0700 MST"

// Stale says whether the status was written longer than maxAge before now, by the time
// the autoscaler wrote into it: the ConfigMap outlives an autoscaler that stopped or
// hangs. A status without a readable time is not judged stale.
func (s *Status) Stale(now time.Time, maxAge time.Duration) (bool, string) {
	at, err := time.Parse(statusTimeLayout, s.Time)
	if err != nil || now.Sub(at) <= maxAge {
		return false, ""
	}
	return true, fmt.Sprintf("the autoscaler last wrote its status at %s, more than %s ago: it may not be scanning, so what it said then is not reported",
		at.UTC().Format(time.RFC3339), maxAge)
}

// Status is the part of cluster-autoscaler's status ConfigMap the pools report: per
// node group, its health (target, bounds, node counts) and its scale-up state. It
// mirrors the YAML of k8s.io/autoscaler/cluster-autoscaler/clusterstate/api (the
// format of 1.30 and later), declared here because the module proxy does not serve the
// autoscaler's module; fields the pools do not report are left out, and unknown fields
// are ignored, as a newer autoscaler may add some.
type Status struct {
	Time             string            `json:"time,omitempty"`
	AutoscalerStatus string            `json:"autoscalerStatus,omitempty"`
	NodeGroups       []NodeGroupStatus `json:"nodeGroups,omitempty"`
}

// NodeGroupStatus is one node group's entry: for the clusterapi provider, its name is
// MachineDeployment/<namespace>/<name>.
type NodeGroupStatus struct {
	Name    string `json:"name"`
	Health  Health `json:"health"`
	ScaleUp struct {
		Status      string `json:"status"`
		BackoffInfo struct {
			ErrorCode    string `json:"errorCode,omitempty"`
			ErrorMessage string `json:"errorMessage,omitempty"`
		} `json:"backoffInfo"`
	} `json:"scaleUp"`
}

// Health is a node group's health entry.
type Health struct {
	Status              string `json:"status"`
	CloudProviderTarget int    `json:"cloudProviderTarget"`
	MinSize             int    `json:"minSize"`
	MaxSize             int    `json:"maxSize"`
	NodeCounts          struct {
		Registered struct {
			Total int `json:"total"`
			Ready int `json:"ready"`
		} `json:"registered"`
		LongUnregistered int `json:"longUnregistered"`
	} `json:"nodeCounts"`
}

// ParseStatus reads the status the autoscaler wrote (the ConfigMap's StatusKey).
func ParseStatus(data string) (*Status, error) {
	st := &Status{}
	if err := yaml.Unmarshal([]byte(data), st); err != nil {
		return nil, fmt.Errorf("the autoscaler's status is not the YAML cluster-autoscaler 1.30 and later write: %w", err)
	}
	return st, nil
}

// NodeGroupName is the name the clusterapi provider gives a MachineDeployment's node
// group.
func NodeGroupName(md types.NamespacedName) string {
	return "MachineDeployment/" + md.Namespace + "/" + md.Name
}

// PoolCondition is what the status says of the pool whose MachineDeployment is md:
// whether the autoscaler may add nodes to it, and if not, why, in its own reason.
func (s *Status) PoolCondition(md types.NamespacedName) (status metav1.ConditionStatus, reason, message string) {
	name := NodeGroupName(md)
	var ng *NodeGroupStatus
	for i := range s.NodeGroups {
		if s.NodeGroups[i].Name == name {
			ng = &s.NodeGroups[i]
			break
		}
	}
	if ng == nil {
		return metav1.ConditionUnknown, ReasonNotDiscovered, fmt.Sprintf(
			"the autoscaler's status (ConfigMap %s/%s in the tenant cluster) does not list the node group %s yet", StatusNamespace, StatusConfigMapName, name)
	}
	h := ng.Health
	switch {
	case ng.ScaleUp.Status == "Backoff":
		why := strings.Trim(ng.ScaleUp.BackoffInfo.ErrorCode+": "+ng.ScaleUp.BackoffInfo.ErrorMessage, ": ")
		if why == "" {
			why = "it gave no reason"
		}
		return metav1.ConditionFalse, ReasonBackoff, fmt.Sprintf(
			"the autoscaler backs off adding nodes to the pool after a failed scale-up (%s); it tries again when the backoff ends", bound(why))
	case h.Status == "Unhealthy":
		return metav1.ConditionFalse, ReasonUnhealthy, fmt.Sprintf(
			"the autoscaler finds the pool unhealthy (%d of %d registered nodes ready, %d machines long unregistered) and adds no nodes until it recovers",
			h.NodeCounts.Registered.Ready, h.NodeCounts.Registered.Total, h.NodeCounts.LongUnregistered)
	case h.MaxSize > 0 && h.CloudProviderTarget >= h.MaxSize:
		return metav1.ConditionFalse, ReasonMaxSizeReached, fmt.Sprintf(
			"the autoscaler has the pool at its maximum size, %d (spec.maxReplicas), and adds no more nodes: pods that need another node stay pending until spec.maxReplicas is raised", h.MaxSize)
	case ng.ScaleUp.Status == "InProgress":
		return metav1.ConditionTrue, ReasonScalingUp, fmt.Sprintf("the autoscaler is adding nodes: target %d, at most %d", h.CloudProviderTarget, h.MaxSize)
	}
	return metav1.ConditionTrue, ReasonWithinLimits, fmt.Sprintf("the autoscaler may add nodes: target %d, at most %d", h.CloudProviderTarget, h.MaxSize)
}

// bound shortens s to maxReported bytes, on a rune boundary.
func bound(s string) string {
	if len(s) <= maxReported {
		return s
	}
	cut := maxReported
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
