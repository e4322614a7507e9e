//go:build e2e

package main

import (
	"reflect"
	"testing"
)

// The same seed and sizes draw the same run; another seed another one; the kills add
// up to the asked number, every phase gets one, and the wave, the deletion and the
// scaled pools are disjoint.
func TestPlanFollowsTheSeed(t *testing.T) {
	full := sizes{kills: 50, pools: 200, namespaces: 20, machinePools: 20, wavePercent: 20, deleted: 50}
	a, err := newPlan(7, full)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newPlan(7, full)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("seed 7 drew two different runs")
	}
	c, _ := newPlan(8, full)
	if reflect.DeepEqual(a.steps, c.steps) {
		t.Fatal("seeds 7 and 8 drew the same run")
	}
	for _, s := range []sizes{full, {kills: 10, pools: 40, namespaces: 4, machinePools: 4, wavePercent: 20, deleted: 10}} {
		p, err := newPlan(1, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.steps) != s.kills {
			t.Errorf("%+v: %d steps, want %d", s, len(p.steps), s.kills)
		}
		per := map[kind]int{}
		touched := map[kind]map[int]bool{}
		created := 0
		for _, st := range p.steps {
			per[st.kind]++
			if st.killAfter < 1 {
				t.Errorf("%s step killed after %d writes", st.kind, st.killAfter)
			}
			if touched[st.kind] == nil {
				touched[st.kind] = map[int]bool{}
			}
			for _, i := range st.pools {
				touched[st.kind][i] = true
			}
			if st.kind == cold {
				created += len(st.pools)
			}
		}
		for _, k := range kinds {
			if per[k.kind] == 0 {
				t.Errorf("%+v: no kill in the %s", s, k.kind)
			}
		}
		if created != s.pools {
			t.Errorf("%+v: the cold start creates %d pools, want %d", s, created, s.pools)
		}
		if len(touched[wave]) != s.pools*s.wavePercent/100 || len(touched[deletion]) != s.deleted {
			t.Errorf("%+v: %d changed, %d deleted", s, len(touched[wave]), len(touched[deletion]))
		}
		for i := range touched[deletion] {
			if touched[wave][i] || touched[scaleUp][i] {
				t.Errorf("%+v: pool %d is deleted and changed or scaled", s, i)
			}
		}
		for i := range touched[scaleUp] {
			if p.pools[i].machines || touched[wave][i] {
				t.Errorf("%+v: scaled pool %d has a fixed machine or is changed", s, i)
			}
		}
	}
}
