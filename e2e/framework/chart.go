package framework

import "github.com/nodegroup-io/nodegroup-operator/internal/localrun"

// Names the chart gives the operator's objects at this release name.
const (
	ReleaseName      = localrun.ReleaseName
	ReleaseNamespace = localrun.ReleaseNamespace
	ServiceAccount   = localrun.ServiceAccount
)
