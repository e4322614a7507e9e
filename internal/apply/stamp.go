// AnnotationApplied, the stamp apply leaves on a mutable object: what body it sent and
// at which generation, so that a later apply can tell from the object alone whether
// sending the body again would change anything.

package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationApplied is set on every mutable object the operator applies:
// "<body>/<spec>/<generation>", the SHA-256 of the applied body without this annotation
// (first 128 bits, hex) and of its spec (first 64 bits), and the metadata.generation
// the apply leaves the object at.
const AnnotationApplied = "nodegroup.io/applied"

// digests are the digests of a desired body and of its spec.
type digests struct{ body, spec string }

// stamped is a copy of desired with AnnotationApplied for its digests and the
// generation the apply is to leave the object at.
func stamped(desired *unstructured.Unstructured, sum digests, generation int64) *unstructured.Unstructured {
	u := desired.DeepCopy()
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationApplied] = sum.body + "/" + sum.spec + "/" + strconv.FormatInt(generation, 10)
	u.SetAnnotations(annotations)
	return u
}

// appliedStamp is AnnotationApplied read back.
type appliedStamp struct {
	digests
	generation int64
}

func readStamp(obj metav1.Object) (appliedStamp, bool) {
	parts := strings.Split(obj.GetAnnotations()[AnnotationApplied], "/")
	if len(parts) != 3 {
		return appliedStamp{}, false
	}
	generation, err := strconv.ParseInt(parts[2], 10, 64)
	return appliedStamp{digests{parts[0], parts[1]}, generation}, err == nil
}

// digest is the first n bytes of the SHA-256 of v's JSON, in hex (maps are marshalled
// in key order, so equal values give equal digests).
func digest(v any, n int) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:n]), nil
}
