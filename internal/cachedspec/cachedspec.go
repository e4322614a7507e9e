// Package cachedspec is the digest that lets a dry run's confirmation outlive a scale.
// The operator's cache keeps of a MachineDeployment little more than its replicas and
// template references (internal/operator), so what the rest of its spec was is kept as
// a digest on the cached copy, computed as the object enters the cache; apply compares
// it with the digest of the spec a dry run found current.
package cachedspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotation holds, on the operator's cached copy of a MachineDeployment or
// MachineHealthCheck only (never on the server's), the Digest of the object as it was
// read, before the cache trimmed its spec.
const Annotation = "nodegroup.io/cached-spec"

// Digest is a digest of obj's spec without the MachineDeployment's replicas, or "" for
// another kind. Two generations of an object with the same Digest differ at most in
// their replicas: when the operator leaves those to cluster-autoscaler, a dry run that
// found one generation current answers for the other.
func Digest(obj client.Object) string {
	var spec any
	switch o := obj.(type) {
	case *clusterv1.MachineDeployment:
		s := o.Spec
		s.Replicas = nil
		spec = &s
	case *clusterv1.MachineHealthCheck:
		spec = &o.Spec
	default:
		return ""
	}
	body, err := json.Marshal(spec) // struct fields in order, map keys sorted: stable
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16])
}

// Annotate is annotations with Annotation set to the Digest of full, the object as read
// (its spec not trimmed yet), or removed for a kind Digest does not know. Whatever the
// server's object carries under the key is replaced: only the operator's digest is read.
func Annotate(annotations map[string]string, full client.Object) map[string]string {
	sum := Digest(full)
	if sum == "" {
		delete(annotations, Annotation)
		return annotations
	}
	if annotations == nil {
		annotations = make(map[string]string, 1)
	}
	annotations[Annotation] = sum
	return annotations
}

// Of is the Digest the cache recorded on its copy cur, "" when none.
func Of(cur client.Object) string { return cur.GetAnnotations()[Annotation] }
