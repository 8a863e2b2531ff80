package main

import (
	"fmt"
	"sort"
	"strings"
)

// From records to Porcupine operations: one operation per lock (token) per
// resource. Everything the model's step needs is computed here from the
// whole history and carried in the operation, because it is a fact of the
// history rather than of the order Porcupine tries:
//   - when the lock is certainly held (its held spans): the grant's window
//     chained with its ok extensions' windows, cut at the first release's
//     send;
//   - when it can have taken effect (Call, Return): from the first send of
//     the acquisition to the first grant answer.

// span is the half-open run time [start, end), in µs.
type span struct {
	start, end int64
}

func (s span) empty() bool { return s.end <= s.start }

// classKind is how a grant excludes others on one resource.
type classKind uint8

const (
	classExclusive classKind = iota // plain, and a multi on each of its resources
	classShared
	classPermit
)

// class is a grant's conflict class on one resource: two grants of
// different tokens conflict when their classes do (HISTORY.md).
type class struct {
	kind   classKind
	limit  uint32 // permit only
	permit uint32 // permit only: the permit's index
}

func (c class) conflicts(o class) bool {
	switch {
	case c.kind == classExclusive || o.kind == classExclusive:
		return true
	case c.kind == classShared && o.kind == classShared:
		return false
	case c.kind == classShared || o.kind == classShared:
		return true
	default: // two permits
		return c.limit != o.limit || c.permit == o.permit
	}
}

// less orders classes for the model state's canonical form.
func (c class) less(o class) bool {
	if c.kind != o.kind {
		return c.kind < o.kind
	}
	if c.limit != o.limit {
		return c.limit < o.limit
	}
	return c.permit < o.permit
}

func (c class) String() string {
	switch c.kind {
	case classExclusive:
		return "exclusive"
	case classShared:
		return "shared"
	default:
		return fmt.Sprintf("permit %d of limit %d", c.permit, c.limit)
	}
}

// grantOp is one lock on one resource: the input of one Porcupine
// operation. Immutable once built; the model's states point to it.
type grantOp struct {
	resource string
	// seq is its index among its resource's operations (ordered by call):
	// the canonical order of the holders in a model state.
	seq   int
	token string
	kind  kind
	class class
	fence uint64
	// call and ret bound the moment the grant took effect: from the first
	// send of the acquisition (any call of its request id, granted or not,
	// may have been the one that took the lock) to the first grant answer.
	call, ret int64
	// held is where the lock is certainly held: ascending, disjoint,
	// non-empty spans, each starting at a grant answer (so at or after ret).
	held []span
	// needBefore counts the conflicting grants of the resource with a lower
	// fence: exactly those must be linearized before this one.
	needBefore int
	// records are the granted acquire lines of this lock (more than one for
	// a retry with its request id that answered the same token).
	records []*acquireRecord
	// released is the first release's send, or -1 when there was none.
	released int64
}

// heldEnd is where the lock is last certainly held (-1: never).
func (g *grantOp) heldEnd() int64 {
	if len(g.held) == 0 {
		return -1
	}
	return g.held[len(g.held)-1].end
}

// ids are the acquire lines' ids, for messages.
func (g *grantOp) ids() string {
	ids := make([]string, len(g.records))
	for i, r := range g.records {
		ids[i] = r.id
	}
	return strings.Join(ids, "+")
}

// resourceOps is one resource's operations, ordered by call.
type resourceOps struct {
	resource string
	ops      []*grantOp
}

// lockHistory is the history as locks, by resource.
type lockHistory struct {
	resources []*resourceOps // by name
	records   int            // lines read
	granted   int            // granted acquire lines
	notGrant  int            // acquire lines failed or unknown (left out)
}

// buildLocks turns the records into one operation per (resource, token).
func buildLocks(h *history) (*lockHistory, error) {
	extensions := make(map[string][]*extendRecord)
	for _, e := range h.extends {
		if e.outcome == extendOK {
			extensions[e.grant] = append(extensions[e.grant], e)
		}
	}
	firstRelease := make(map[string]int64)
	for _, r := range h.releases {
		if t, ok := firstRelease[r.grant]; !ok || r.invokeUS < t {
			firstRelease[r.grant] = r.invokeUS
		}
	}
	// The first send of each request id: any of its calls, whatever it
	// answered, may be the one whose lock a later retry was answered.
	firstSend := make(map[string]int64)
	for _, a := range h.acquires {
		if a.requestID == "" {
			continue
		}
		if t, ok := firstSend[a.requestID]; !ok || a.invokeUS < t {
			firstSend[a.requestID] = a.invokeUS
		}
	}

	type lockKey struct{ resource, token string }
	locks := make(map[lockKey]*grantOp)
	byResource := make(map[string]*resourceOps)
	lh := &lockHistory{records: len(h.acquires) + len(h.extends) + len(h.releases)}
	for _, a := range h.acquires {
		if a.outcome != acquireGranted {
			lh.notGrant++
			continue
		}
		lh.granted++
		for i, resource := range a.resources {
			c := class{kind: classExclusive}
			switch a.kind {
			case kindShared:
				c = class{kind: classShared}
			case kindPermit:
				c = class{kind: classPermit, limit: a.limit, permit: a.permit}
			}
			key := lockKey{resource, a.token}
			g, seen := locks[key]
			if !seen {
				g = &grantOp{resource: resource, token: a.token, kind: a.kind, class: c, fence: a.fences[i]}
				locks[key] = g
				ro := byResource[resource]
				if ro == nil {
					ro = &resourceOps{resource: resource}
					byResource[resource] = ro
				}
				ro.ops = append(ro.ops, g)
			} else {
				first := g.records[0]
				if g.kind != a.kind || g.class != c {
					return nil, malformed("%d: acquire %s: token %q on %q was granted as %s (%s) by acquire %s (line %d), now as %s (%s): one token is one lock",
						a.line, a.id, a.token, resource, g.kind, g.class, first.id, first.line, a.kind, c)
				}
				if g.fence != a.fences[i] {
					return nil, malformed("%d: acquire %s: token %q on %q has fence %d, but %d in acquire %s (line %d): one token is one lock",
						a.line, a.id, a.token, resource, a.fences[i], g.fence, first.id, first.line)
				}
			}
			g.records = append(g.records, a)
		}
	}

	for _, g := range locks {
		g.call, g.ret = g.records[0].invokeUS, g.records[0].completeUS
		g.released = -1
		for _, a := range g.records {
			g.call = min(g.call, a.invokeUS)
			if a.requestID != "" {
				g.call = min(g.call, firstSend[a.requestID])
			}
			g.ret = min(g.ret, a.completeUS)
			if t, ok := firstRelease[a.id]; ok && (g.released < 0 || t < g.released) {
				g.released = t
			}
		}
		g.held = heldSpans(g.records, extensions, g.released)
	}

	for _, ro := range byResource {
		sort.Slice(ro.ops, func(i, j int) bool {
			a, b := ro.ops[i], ro.ops[j]
			if a.call != b.call {
				return a.call < b.call
			}
			if a.ret != b.ret {
				return a.ret < b.ret
			}
			return a.token < b.token
		})
		for i, g := range ro.ops {
			g.seq = i
		}
		countLowerConflicting(ro.ops)
		lh.resources = append(lh.resources, ro)
	}
	sort.Slice(lh.resources, func(i, j int) bool { return lh.resources[i].resource < lh.resources[j].resource })
	return lh, nil
}

// window is one guarantee the daemon gave: a grant's or an extension's.
type window struct {
	span
	grant bool // a grant's own window: a chain can start only there
}

// heldSpans is where a lock is certainly held: chains of windows, each
// starting at a grant window and continued by every window that starts
// inside it (a window starting exactly at the chain's end leaves a gap, as
// tools/chaos's clients count it); windows outside a chain count for
// nothing. Everything is cut at the first release's send (released, -1 for
// none): the holder gave the lock up there.
func heldSpans(records []*acquireRecord, extensions map[string][]*extendRecord, released int64) []span {
	var windows []window
	for _, a := range records {
		w := window{span{a.completeUS, a.invokeUS + a.validityUS}, true}
		if !w.empty() {
			windows = append(windows, w)
		}
		for _, e := range extensions[a.id] {
			w := window{span{e.completeUS, e.invokeUS + e.validityUS}, false}
			if !w.empty() {
				windows = append(windows, w)
			}
		}
	}
	sort.Slice(windows, func(i, j int) bool {
		if windows[i].start != windows[j].start {
			return windows[i].start < windows[j].start
		}
		return windows[i].grant && !windows[j].grant
	})
	var held []span
	var chain span
	inChain := false
	for _, w := range windows {
		if inChain && w.start < chain.end {
			chain.end = max(chain.end, w.end)
			continue
		}
		if inChain {
			held = append(held, chain)
			inChain = false
		}
		if w.grant {
			chain, inChain = w.span, true
		}
	}
	if inChain {
		held = append(held, chain)
	}
	if released < 0 {
		return held
	}
	cut := held[:0]
	for _, s := range held {
		s.end = min(s.end, released)
		if !s.empty() {
			cut = append(cut, s)
		}
	}
	return cut
}

// countLowerConflicting sets needBefore: how many grants of the resource
// conflict with each one and have a lower fence.
func countLowerConflicting(ops []*grantOp) {
	fencesByClass := make(map[class][]uint64)
	for _, g := range ops {
		fencesByClass[g.class] = append(fencesByClass[g.class], g.fence)
	}
	for _, fences := range fencesByClass {
		sort.Slice(fences, func(i, j int) bool { return fences[i] < fences[j] })
	}
	for _, g := range ops {
		n := 0
		for c, fences := range fencesByClass {
			if c.conflicts(g.class) {
				n += sort.Search(len(fences), func(i int) bool { return fences[i] >= g.fence })
			}
		}
		g.needBefore = n
	}
}

// spansOverlap is the first moment two sets of held spans share, if any.
func spansOverlap(a, b []span) (span, bool) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		start, end := max(a[i].start, b[j].start), min(a[i].end, b[j].end)
		if start < end {
			return span{start, end}, true
		}
		if a[i].end <= b[j].end {
			i++
		} else {
			j++
		}
	}
	return span{}, false
}
