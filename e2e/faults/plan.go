//go:build e2e

package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// kind is what a step of the run does before its kill.
type kind string

const (
	cold      kind = "cold start"
	wave      kind = "change wave"
	deletion  kind = "deletion"
	rotation  kind = "token rotation"
	scaleUp   kind = "scale-up"
	scaleDown kind = "scale-down"
)

// kinds in the order the run goes through them, with the share of the kills each gets.
var kinds = []struct {
	kind   kind
	weight int
	// perUnit is about how many writes the operator sends for one unit of the step (a
	// pool; a rotated cluster's pools): the kill comes after 1..perUnit*units/2 writes,
	// so it lands while the step's work is in flight.
	perUnit int
}{
	{cold, 14, 6}, {wave, 10, 4}, {deletion, 10, 4}, {rotation, 6, 4}, {scaleUp, 5, 2}, {scaleDown, 5, 2},
}

// pool is one NodeGroup of the run.
type pool struct {
	index int
	// namespace is faults-<ns>; name p<index>.
	ns   int
	name string
	// machines: a fixed pool of one machine; else an autoscaled pool, 0..2, at zero
	// until a scale-up.
	machines bool
}

// step is the work the harness hands the operator before one kill.
type step struct {
	kind kind
	// pools are the pools the step creates, changes, deletes or scales.
	pools []int
	// namespace is the rotated cluster's namespace (rotation).
	namespace int
	// killAfter: the operator is killed after this many of its writes since the step
	// began (the proxy counts them, Proxy.Writes).
	killAfter int64
}

// plan is the whole run, a function of the seed and the sizes only.
type plan struct {
	seed  uint64
	pools []pool
	steps []step
}

// sizes are what a run is made of.
type sizes struct {
	kills, pools, namespaces, machinePools int
	// wavePercent of the pools change in the wave; deleted pools are deleted.
	wavePercent, deleted int
}

// newPlan draws the run from seed with math/rand/v2's PCG: which pools run a machine,
// which the wave changes, which are deleted and scaled, which clusters rotate their
// token, how the kills spread over the phases, and after how many writes each comes.
func newPlan(seed uint64, s sizes) (*plan, error) {
	if s.kills < len(kinds) {
		return nil, fmt.Errorf("%d kills: at least %d, one a phase", s.kills, len(kinds))
	}
	waved := s.pools * s.wavePercent / 100
	if s.namespaces < 1 || s.pools < s.namespaces || waved+s.deleted+s.machinePools > s.pools {
		return nil, fmt.Errorf("%d pools in %d namespaces cannot hold %d changed, %d deleted and %d with machines",
			s.pools, s.namespaces, waved, s.deleted, s.machinePools)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := &plan{seed: seed}
	for i := range s.pools {
		p.pools = append(p.pools, pool{index: i, ns: i % s.namespaces, name: fmt.Sprintf("p%03d", i)})
	}
	for _, i := range rng.Perm(s.pools)[:s.machinePools] {
		p.pools[i].machines = true
	}
	// The wave and the deletion touch disjoint pools, so a deleted pool's clean-up and
	// a changed pool's rollout are told apart; the scaled pools are autoscaled pools
	// that neither touches.
	order := rng.Perm(s.pools)
	wavePools, deleted, rest := order[:waved], order[waved:waved+s.deleted], order[waved+s.deleted:]
	var scalable []int
	for _, i := range rest {
		if !p.pools[i].machines {
			scalable = append(scalable, i)
		}
	}
	kills := share(s.kills)
	scaled := scalable[:min(len(scalable), 2*kills[scaleUp])]
	created := rng.Perm(s.pools)
	for _, k := range kinds {
		n := kills[k.kind]
		var batches [][]int
		switch k.kind {
		case cold:
			batches = split(created, n)
		case wave:
			batches = split(wavePools, n)
		case deletion:
			batches = split(deleted, n)
		case scaleUp, scaleDown:
			batches = split(scaled, n)
		case rotation:
			for _, ns := range rotated(rng, s.namespaces, n) {
				st := step{kind: rotation, namespace: ns}
				for _, pl := range p.pools {
					if pl.ns == ns && !slices.Contains(deleted, pl.index) {
						st.pools = append(st.pools, pl.index)
					}
				}
				st.killAfter = 1 + rng.Int64N(int64(max(1, k.perUnit*len(st.pools)/2)))
				p.steps = append(p.steps, st)
			}
			continue
		}
		for _, b := range batches {
			p.steps = append(p.steps, step{kind: k.kind, pools: b, killAfter: 1 + rng.Int64N(int64(max(1, k.perUnit*len(b)/2)))})
		}
	}
	return p, nil
}

// share spreads kills over the kinds by weight (largest remainder), one each at least.
func share(kills int) map[kind]int {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	out := map[kind]int{}
	left := kills
	for _, k := range kinds {
		out[k.kind] = max(1, (kills-len(kinds))*k.weight/total+1)
		left -= out[k.kind]
	}
	for i := 0; left > 0; i = (i + 1) % len(kinds) {
		out[kinds[i].kind]++
		left--
	}
	return out
}

// split cuts items into n batches as even as can be (some may be empty when there are
// fewer items than batches).
func split(items []int, n int) [][]int {
	out := make([][]int, n)
	for i, it := range items {
		out[i*n/len(items)] = append(out[i*n/len(items)], it)
	}
	return out
}

// rotated picks n namespaces to rotate, each once as long as there are enough.
func rotated(rng *rand.Rand, namespaces, n int) []int {
	var out []int
	for len(out) < n {
		out = append(out, rng.Perm(namespaces)...)
	}
	return out[:n]
}
