// Package charts carries the chart files that Go code needs at run time. It exists
// because go:embed cannot reach into a parent directory: the CRDs are generated into the
// chart (make generate), which installs them, and the kubectl plugin checks pools
// against the same files offline (internal/offline/customresource).
package charts

import _ "embed"

// NodeGroupCRD is the NodeGroup CustomResourceDefinition the chart installs, as it was
// when the binary was built.
//
//go:embed nodegroup-operator/crds/nodegroup.io_nodegroups.yaml
var NodeGroupCRD []byte
