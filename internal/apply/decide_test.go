package apply

import "testing"

// TestDecide is the whole decision of the cached path, one row a case: what the cache
// holds of the object (held or not, and whether its labels, annotations and owners hold
// ours), its AnnotationApplied, and the confirmation remembered from an earlier dry run.
func TestDecide(t *testing.T) {
	const uid, generation = "uid-1", int64(7)
	sum := digests{body: "body", spec: "spec"}
	otherBody := digests{body: "other body", spec: sum.spec}
	otherSpec := digests{body: "other body", spec: "other spec"}

	held := func(s *appliedStamp, holdsOurs bool) cachedFacts {
		f := cachedFacts{held: true, uid: uid, generation: generation, holdsOurs: holdsOurs}
		if s != nil {
			f.stamp, f.stamped = *s, true
		}
		return f
	}
	current := func(d digests) *appliedStamp { return &appliedStamp{d, generation} }
	// Our last apply sent this body and left generation-2; someone else moved it since.
	scaled := &appliedStamp{sum, generation - 2}

	confirmed := &confirmation{uid: uid, generation: generation, body: sum.body}
	confirmedOtherBody := &confirmation{uid: uid, generation: generation, body: otherBody.body}
	confirmedEarlier := &confirmation{uid: uid, generation: generation - 1, body: sum.body}
	confirmedRecreated := &confirmation{uid: "uid-0", generation: generation, body: sum.body}
	// Confirmed at an earlier generation with the digest of the spec then.
	const liveSpec = "live spec"
	confirmedBeforeScale := &confirmation{uid: uid, generation: generation - 1, body: sum.body, spec: liveSpec}
	confirmedBeforeScaleOtherBody := &confirmation{uid: uid, generation: generation - 1, body: otherBody.body, spec: liveSpec}
	withSpec := func(f cachedFacts, spec string) cachedFacts { f.specSum = spec; return f }

	for _, tc := range []struct {
		name       string
		cache      cachedFacts
		remembered *confirmation
		want       verdict
	}{
		// Not held: no cache, a kind it cannot answer for, or an object it does not hold.
		{"not held", cachedFacts{}, nil, verdict{decision: dryRunFirst}},
		{"not held, a confirmation is not read", cachedFacts{}, confirmedEarlier, verdict{decision: dryRunFirst}},

		// Held, stamped at its current generation.
		{"stamp of this body, ours", held(current(sum), true), nil, verdict{decision: skipApply}},
		{"stamp of this body, ours; a stale confirmation is not read", held(current(sum), true), confirmedEarlier, verdict{decision: skipApply}},
		{"stamp of this body, our metadata gone", held(current(sum), false), nil, verdict{decision: sendApply, generation: generation}},
		{"stamp of another body, same spec", held(current(otherBody), true), nil, verdict{decision: sendApply, generation: generation}},
		{"stamp of another body and spec", held(current(otherSpec), true), nil, verdict{decision: sendApply, generation: generation + 1}},
		{"stamp of another body; this body confirmed", held(current(otherBody), true), confirmed, verdict{decision: skipApply}},
		{"stamp of another body; another body confirmed", held(current(otherBody), true), confirmedOtherBody, verdict{decision: sendApply, generation: generation}},
		{"stamp of another body; confirmed earlier", held(current(otherSpec), true), confirmedEarlier, verdict{decision: sendApply, generation: generation + 1, forget: true}},

		// Held, stamped at an earlier generation: someone else moved it (a scale).
		{"scaled, nothing confirmed", held(scaled, true), nil, verdict{decision: dryRunFirst}},
		{"scaled, this body confirmed, ours", held(scaled, true), confirmed, verdict{decision: skipApply}},
		{"scaled, this body confirmed, our metadata gone", held(scaled, false), confirmed, verdict{decision: dryRunFirst}},
		{"scaled, another body confirmed", held(scaled, true), confirmedOtherBody, verdict{decision: dryRunFirst}},
		{"scaled, confirmed at an earlier generation", held(scaled, true), confirmedEarlier, verdict{decision: dryRunFirst, forget: true}},
		{"scaled, confirmed for a deleted object of the name", held(scaled, true), confirmedRecreated, verdict{decision: dryRunFirst, forget: true}},

		// Held, scaled again since a dry run confirmed this body: the spec digest tells.
		{"scaled again, spec as confirmed", withSpec(held(scaled, true), liveSpec), confirmedBeforeScale, verdict{decision: skipApply, reconfirm: true}},
		{"scaled again, spec changed since", withSpec(held(scaled, true), "another spec"), confirmedBeforeScale, verdict{decision: dryRunFirst, forget: true}},
		{"scaled again, no spec digest (the pool sets its replicas)", held(scaled, true), confirmedBeforeScale, verdict{decision: dryRunFirst, forget: true}},
		{"scaled again, spec as confirmed, our metadata gone", withSpec(held(scaled, false), liveSpec), confirmedBeforeScale, verdict{decision: dryRunFirst, forget: true}},
		{"scaled again, spec as confirmed for another body", withSpec(held(scaled, true), liveSpec), confirmedBeforeScaleOtherBody, verdict{decision: dryRunFirst, forget: true}},
		{"scaled again, confirmed with no spec digest", withSpec(held(scaled, true), ""), confirmedEarlier, verdict{decision: dryRunFirst, forget: true}},
		{"recreated, spec as confirmed", withSpec(held(scaled, true), liveSpec), &confirmation{uid: "uid-0", generation: generation - 1, body: sum.body, spec: liveSpec}, verdict{decision: dryRunFirst, forget: true}},

		// Held without a readable stamp: someone else wrote or removed it.
		{"no stamp, nothing confirmed", held(nil, true), nil, verdict{decision: dryRunFirst}},
		{"no stamp, this body confirmed, ours", held(nil, true), confirmed, verdict{decision: skipApply}},
		{"no stamp, this body confirmed, our metadata gone", held(nil, false), confirmed, verdict{decision: dryRunFirst}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.cache, sum, tc.remembered); got != tc.want {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}
