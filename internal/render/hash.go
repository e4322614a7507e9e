package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// HashVersion is written next to every template hash. The version is part of what is
// hashed, so changing how the hash is computed (a new field, a new encoding) is a
// deliberate step: bump the version and every pool rolls once, on purpose; leave it and
// nothing rolls by accident.
const HashVersion = "v1"

// contentHash is the short hash of a template's spec: the first contentHashLen hex
// digits of sha256(HashVersion, a zero byte, the spec as encoding/json writes it).
func contentHash(spec any) (string, error) {
	buf := getScratch()
	defer putScratch(buf)
	b := append((*buf)[:0], HashVersion...)
	b = append(b, 0)
	b, err := appendSpecJSON(b, spec)
	if err != nil {
		return "", fmt.Errorf("hashing template content: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:contentHashLen/2]), nil
}

// appendSpecJSON appends the spec as encoding/json.Marshal writes it. The specs render
// produces are written by the writers in specjson.go rather than by encoding/json:
// reflection was half the time of a render, and render runs for every pool on every
// resync. They write the same bytes (specjson_test.go checks it field by field), so the
// hashes, and the template names, are the ones encoding/json gives. Any other type is
// an error.
func appendSpecJSON(b []byte, spec any) ([]byte, error) {
	switch s := spec.(type) {
	case *talos.TalosConfigTemplateSpec:
		return appendTalosSpecJSON(b, s), nil
	case *kairos.KairosConfigTemplateSpec:
		return appendKairosSpecJSON(b, s), nil
	case *capk.KubevirtMachineTemplateSpec:
		return appendKubevirtSpecJSON(b, s), nil
	}
	// A template kind without a writer would be hashed by whatever encoding/json gives,
	// which the tests could not tell apart from a writer's output: refuse it instead.
	return b, fmt.Errorf("no JSON writer for a template spec of type %T", spec)
}
