// What apply does with a mutable object before it reads anything live: leave it alone,
// send the apply at once, or take the uncached way with a dry run. The decision is made
// here only, from what the cache holds, the object's AnnotationApplied and what a dry
// run confirmed before; decide_test.go lists every case.

package apply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// decision is what apply does with a mutable object.
type decision int

const (
	// dryRunFirst: the cache cannot tell. Read the live object, create it when it is
	// missing, and otherwise send the apply only when a dry run of it changes something.
	dryRunFirst decision = iota
	// skipApply: an apply would change nothing, so nothing is sent.
	skipApply
	// sendApply: an apply changes something, so it is sent without a dry run.
	sendApply
)

// cachedFacts are what decide reads of the cache's copy of a mutable object.
type cachedFacts struct {
	// held: the cache answered and holds the object. Without it the rest is unset: there
	// is no cache, it cannot answer for the kind, or the object is not in it (it may
	// still exist, without our label, or the cache may lag).
	held       bool
	uid        types.UID
	generation int64
	// stamp is the object's AnnotationApplied when stamped: it is there and readable.
	stamp   appliedStamp
	stamped bool
	// holdsOurs: its labels, annotations and owner references hold the desired ones.
	holdsOurs bool
	// specSum is the spec digest the cache recorded on it (internal/cachedspec), when desired leaves its replicas to others
	// (only then can a confirmation outlive a generation).
	specSum string
}

// cachedFactsOf reads cur, the cache's copy of desired's object.
func cachedFactsOf(cur client.Object, desired *unstructured.Unstructured) cachedFacts {
	stamp, stamped := readStamp(cur)
	return cachedFacts{
		held: true, uid: cur.GetUID(), generation: cur.GetGeneration(),
		stamp: stamp, stamped: stamped, holdsOurs: holdsOurs(cur, desired),
		specSum: cachedSpecSum(cur, desired),
	}
}

// verdict is decide's answer.
type verdict struct {
	decision
	// generation is, with sendApply, the generation the apply leaves the object at.
	generation int64
	// forget: the remembered confirmation was read and is of an object or a generation
	// that has moved on, so it never holds again.
	forget bool
	// reconfirm: the remembered confirmation holds at the cached generation too (only
	// what the body leaves to others changed), and is to be remembered at it.
	reconfirm bool
}

// decide is the decision for the desired body sum, from the cache's copy of the object
// and the confirmation remembered for it (nil when none). It reads and writes no state:
// the Applier acts on its verdict (decideWith).
//
// An object the cache holds is left alone when its stamp names the desired body at its
// current generation and it holds our metadata: the last apply sent this body, so no
// field we sent before and dropped since is still ours, and nobody changed the spec
// since. It is left alone too when a dry run of this body confirmed it current at its
// generation (someone else moved the generation: cluster-autoscaler scaled it), or at
// an earlier generation whose spec, apart from what the body leaves to others (the
// replicas of an autoscaled pool), is the cached one's: a scale after a scale needs no
// dry run, which under an autoscaler's churn is most of what a pool's reconcile would
// send. A stamp
// at the current generation that does not leave it alone means the spec is as our last
// apply left it, so the apply is sent at once. Anything else takes the uncached way.
func decide(cur cachedFacts, sum digests, remembered *confirmation) verdict {
	if !cur.held {
		return verdict{decision: dryRunFirst}
	}
	current := cur.stamped && cur.stamp.generation == cur.generation
	if current && cur.stamp.body == sum.body && cur.holdsOurs {
		return verdict{decision: skipApply}
	}
	var v verdict
	if remembered != nil {
		ours := remembered.body == sum.body && cur.holdsOurs
		switch {
		case remembered.uid != cur.uid:
			v.forget = true // another object of the name: the confirmation never holds again
		case remembered.generation == cur.generation:
			if ours {
				v.decision = skipApply
				return v
			}
		case ours && remembered.spec != "" && cur.specSum == remembered.spec:
			v.decision, v.reconfirm = skipApply, true
			return v
		default:
			v.forget = true // the spec moved on; the confirmation never holds again
		}
	}
	if current {
		// The spec is as our last apply left it and the body, or our metadata on the
		// object, differs: the apply changes something, and a changed spec is one more
		// generation.
		v.decision, v.generation = sendApply, cur.generation
		if cur.stamp.spec != sum.spec {
			v.generation++
		}
		return v
	}
	v.decision = dryRunFirst
	return v
}

// decideWith is decide with the confirmation the Applier remembers for key, which it
// drops when the verdict says it never holds again.
func (a *Applier) decideWith(key objectKey, cur cachedFacts, sum digests) verdict {
	a.mu.Lock()
	defer a.mu.Unlock()
	var remembered *confirmation
	if c, ok := a.confirmed[key]; ok {
		remembered = &c
	}
	v := decide(cur, sum, remembered)
	switch {
	case v.forget:
		delete(a.confirmed, key)
	case v.reconfirm:
		remembered.generation = cur.generation
		a.confirmed[key] = *remembered
	}
	return v
}
