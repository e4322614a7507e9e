package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// HashVersion is written next to every template hash. The version is part of what is
// hashed, so changing how the hash is computed (a new field, a new encoding) is a
// deliberate step: bump the version and every pool rolls once, on purpose; leave it and
// nothing rolls by accident.
const HashVersion = "v2"

// contentHashLen is the length of the content hash in a template name.
const contentHashLen = 10

// contentHash is the short hash of a template's spec: the first contentHashLen hex
// digits of sha256(HashVersion, a zero byte, the spec as encoding/json writes it). The
// golden files hold the names these hashes give, so a change of encoding or of a type's
// fields that would change a hash, and roll the pools, shows there.
func contentHash(spec any) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("hashing template content: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(HashVersion))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:contentHashLen/2]), nil
}
