package resolve

import (
	"fmt"
	"slices"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// Reasons of the conditions a resolve failure sets. Each says what the tenant or the
// platform must do; none of them touches what already runs.
const (
	ReasonClassNotFound        = "ClassNotFound"
	ReasonLocationNotFound     = "LocationNotFound"
	ReasonProviderNotSupported = "ProviderNotSupported"
	ReasonClusterNotFound      = "ClusterNotFound"
	ReasonControlPlanePending  = "ControlPlanePending"
	ReasonVersionNotSupported  = "VersionNotSupported"
	ReasonTalosSecretsMissing  = "TalosSecretsMissing"
	ReasonImageNotAvailable    = "ImageNotAvailable"
	ReasonInstanceTypeNotFound = "InstanceTypeNotFound"
	ReasonNetworkNotSupported  = "ServiceNetworkNotSupported"
	// ReasonLocationInUse: the satellite location serves another tenant cluster
	// (policy.LocationTaken).
	ReasonLocationInUse = "LocationInUse"
)

// Error is a resolve failure, reported as a False condition of the given type.
type Error struct {
	// Condition is the condition type to set False (ClassResolved, LocationResolved,
	// ClusterFound or Rendered).
	Condition string
	Reason    string
	Message   string
	// Wait is true when the cause is expected to clear by itself (an object not created
	// yet); the pool is checked again after a delay as well as on watch events.
	Wait bool
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Reason, e.Message) }

// Conditions are the conditions Resolve decides, in the order it checks them. The checks
// after them (the version, the machine size, the secrets) fail on Rendered.
func Conditions() []string {
	return []string{v1.ConditionClassResolved, v1.ConditionLocationResolved, v1.ConditionClusterFound}
}

// Passed are the conditions of Conditions that Resolve found true before it failed:
// those checked before e.Condition, or all of them when e.Condition is a later one.
func (e *Error) Passed() []string {
	all := Conditions()
	if i := slices.Index(all, e.Condition); i >= 0 {
		return all[:i]
	}
	return all
}

func fail(condition, reason string, wait bool, format string, args ...any) *Error {
	return &Error{Condition: condition, Reason: reason, Message: fmt.Sprintf(format, args...), Wait: wait}
}
