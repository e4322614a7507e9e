package resolve

import "fmt"

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

func fail(condition, reason string, wait bool, format string, args ...any) *Error {
	return &Error{Condition: condition, Reason: reason, Message: fmt.Sprintf(format, args...), Wait: wait}
}
