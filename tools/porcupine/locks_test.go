package main

import (
	"slices"
	"strings"
	"testing"
)

// Where a granted line is certainly held, from its windows (heldSpans), case by case.
func TestHeldSpans(t *testing.T) {
	grant := func(invoke, complete, validity int64) *acquireRecord {
		return &acquireRecord{id: "a", invokeUS: invoke, completeUS: complete, validityUS: validity, outcome: acquireGranted}
	}
	ext := func(invoke, complete, validity int64) *extendRecord {
		return &extendRecord{grant: "a", invokeUS: invoke, completeUS: complete, validityUS: validity, outcome: extendOK}
	}
	for _, c := range []struct {
		name     string
		record   *acquireRecord
		exts     []*extendRecord
		released int64
		want     []span
	}{
		{"the grant's window: from the answer to send + validity",
			grant(0, 10, 100), nil, -1, []span{{10, 100}}},
		{"an extension answered inside the chain continues it",
			grant(0, 10, 100), []*extendRecord{ext(40, 50, 100)}, -1, []span{{10, 140}}},
		{"extensions chain in the order of their windows, whatever their order in the file",
			grant(0, 10, 100), []*extendRecord{ext(120, 130, 100), ext(40, 50, 100)}, -1, []span{{10, 220}}},
		{"an extension answered exactly at the chain's end leaves a gap (as tools/chaos's clients count it)",
			grant(0, 10, 100), []*extendRecord{ext(90, 100, 100)}, -1, []span{{10, 100}}},
		{"windows after a gap count for nothing, chained among themselves or not",
			grant(0, 10, 100), []*extendRecord{ext(140, 150, 100), ext(190, 200, 100)}, -1, []span{{10, 100}}},
		{"the release's send cuts the chain",
			grant(0, 10, 100), []*extendRecord{ext(40, 50, 100)}, 60, []span{{10, 60}}},
		{"a release sent before the answer: never held",
			grant(0, 10, 100), nil, 5, nil},
		{"an answer after the validity ran out starts no chain, extensions or not",
			grant(0, 200, 100), []*extendRecord{ext(190, 210, 100)}, -1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := heldSpans(c.record, c.exts, c.released); !slices.Equal(got, c.want) {
				t.Fatalf("held %v, want %v", got, c.want)
			}
		})
	}
}

// spansOverlap finds the first shared moment of two span lists, half-open.
func TestSpansOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b []span
		want span
		ok   bool
	}{
		{[]span{{0, 10}}, []span{{10, 20}}, span{}, false},
		{[]span{{0, 10}, {30, 40}}, []span{{12, 28}, {39, 50}}, span{39, 40}, true},
		{[]span{{5, 6}}, []span{{0, 100}}, span{5, 6}, true},
		{nil, []span{{0, 100}}, span{}, false},
	} {
		got, ok := spansOverlap(c.a, c.b)
		if ok != c.ok || got != c.want {
			t.Errorf("spansOverlap(%v, %v) = %v, %v; want %v, %v", c.a, c.b, got, ok, c.want, c.ok)
		}
	}
}

// Which conflict classes conflict, as HISTORY.md says.
func TestClassConflicts(t *testing.T) {
	excl, shared := class{kind: classExclusive}, class{kind: classShared}
	p20, p21, p30 := class{classPermit, 2, 0}, class{classPermit, 2, 1}, class{classPermit, 3, 0}
	for _, c := range []struct {
		a, b class
		want bool
	}{
		{excl, excl, true}, {excl, shared, true}, {excl, p20, true},
		{shared, shared, false}, {shared, p20, true},
		{p20, p20, true}, {p20, p21, false}, {p20, p30, true},
	} {
		if c.a.conflicts(c.b) != c.want || c.b.conflicts(c.a) != c.want {
			t.Errorf("%s vs %s: want conflict %v", c.a, c.b, c.want)
		}
	}
}

// Equal states hash equal whatever the order of non-conflicting grants; dead holders are dropped.
func TestStatesAreCanonical(t *testing.T) {
	h, err := parseHistory(strings.NewReader(
		`{"type":"acquire","id":1,"kind":"shared","resource":"r","invoke_us":0,"complete_us":10,"outcome":"granted","token":"a","fence":1,"validity_us":100}
{"type":"acquire","id":2,"kind":"shared","resource":"r","invoke_us":5,"complete_us":20,"outcome":"granted","token":"b","fence":2,"validity_us":100}
{"type":"acquire","id":3,"kind":"shared","resource":"r","invoke_us":200,"complete_us":210,"outcome":"granted","token":"c","fence":3,"validity_us":100}
`))
	if err != nil {
		t.Fatal(err)
	}
	lh, err := buildLocks(h)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := lh.resources[0].ops[0], lh.resources[0].ops[1], lh.resources[0].ops[2]
	step := func(s *lockState, g *grantOp) *lockState {
		t.Helper()
		next, refused := s.admit(g)
		if refused != nil {
			t.Fatalf("%s refused: %+v", g.describe(), refused)
		}
		return next
	}
	empty := &lockState{}
	ab, ba := step(step(empty, a), b), step(step(empty, b), a)
	if !ab.equal(ba) || ab.hash() != ba.hash() {
		t.Fatalf("orders differ: %s / %s", ab.describe(), ba.describe())
	}
	onlyA := step(empty, a)
	if onlyA.equal(ab) {
		t.Fatalf("a state with one holder equals one with two: %s", onlyA.describe())
	}
	if forgotten := (&lockState{marks: onlyA.marks}); forgotten.equal(onlyA) {
		t.Fatalf("states with the same fences but different holders are equal")
	}
	if abc := step(ab, c); len(abc.live) != 1 || abc.live[0] != c {
		t.Fatalf("holders that ended before c's call are still live: %s", abc.describe())
	}
}

// A class's fence mark depends only on which grants it holds, not their order, and gives each token the others' highest fence.
func TestFenceMarkIsOrderIndependent(t *testing.T) {
	// Lines of one token (tok 0 twice, tok 1 twice, one with another
	// fence) and ties between tokens.
	grants := []*grantOp{{tok: 0, fence: 5}, {tok: 1, fence: 5}, {tok: 0, fence: 7}, {tok: 2, fence: 3}, {tok: 1, fence: 2}}
	var first *fenceMark
	var permute func(k int)
	permute = func(k int) {
		if k == len(grants) {
			m := fenceMark{max: grants[0].fence, maxTok: grants[0].tok, count: 1}
			for _, g := range grants[1:] {
				m = m.add(g)
			}
			if first == nil {
				first = &m
			} else if m != *first {
				t.Fatalf("order %v: mark %+v, another order %+v", grants, m, *first)
			}
			return
		}
		for i := k; i < len(grants); i++ {
			grants[k], grants[i] = grants[i], grants[k]
			permute(k + 1)
			grants[k], grants[i] = grants[i], grants[k]
		}
	}
	permute(0)
	for tok := range 4 {
		var want uint64
		found := false
		for _, g := range grants {
			if g.tok != tok {
				want, found = max(want, g.fence), true
			}
		}
		if got, ok := first.highestOther(tok); got != want || ok != found {
			t.Errorf("tok %d: highest other fence %d, %v; want %d, %v", tok, got, ok, want, found)
		}
	}
}
