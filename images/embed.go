// Package images carries the files under images/ that the operator binary needs at run
// time. It exists because go:embed cannot reach into a parent directory: the catalog
// lives next to the worker image recipes, where CI rewrites it, and internal/catalog
// reads it from here.
package images

import _ "embed"

// VersionsYAML is versions.yaml as it was when the binary was built. Read it through
// internal/catalog, which validates it, rather than parsing it here.
//
//go:embed versions.yaml
var VersionsYAML []byte
