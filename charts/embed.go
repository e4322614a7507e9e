// Package charts carries the chart files that Go code needs at run time. It exists
// because go:embed cannot reach into a parent directory: the CRDs are generated into the
// chart nodegroup-operator-crds (make generate), which installs them, and the kubectl
// plugin checks and defaults objects against the same files offline
// (internal/offline/customresource).
package charts

import "embed"

// crds holds the CustomResourceDefinitions the CRD chart installs, as they were when
// the binary was built: its templates are the generated CRDs, plain YAML.
//
//go:embed nodegroup-operator-crds/templates/*.yaml
var crds embed.FS

const crdDir = "nodegroup-operator-crds/templates"

// CRDs are the CRD chart's files (YAML), by file name.
func CRDs() (map[string][]byte, error) {
	entries, err := crds.ReadDir(crdDir)
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(entries))
	for _, e := range entries {
		b, err := crds.ReadFile(crdDir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	return files, nil
}
