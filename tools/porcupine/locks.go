package main

import (
	"fmt"
	"sort"
)

// From records to Porcupine operations: one operation per granted acquire
// line per resource. Everything the model's step needs is computed here
// from the whole history and carried in the operation, because it is a
// fact of the history rather than of the order Porcupine tries:
//   - when the line's grant is certainly held (its held spans): its window
//     chained with the windows of the ok extensions that name it, cut at
//     the first send of a release that names it;
//   - when it can have taken effect (Call, Return): from the first send of
//     its lock (any line of its token, any call of their request ids) to
//     its own answer;
//   - which lines are its lock's (equal tokens on the resource): they never
//     conflict with it and are not compared with it for fence order.

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

// grantOp is one granted acquire line on one resource: the input of one
// Porcupine operation. Immutable once built; the model's states point to it.
type grantOp struct {
	resource string
	// seq is its index among its resource's operations (ordered by call):
	// the canonical order of the holders in a model state.
	seq   int
	token string
	// tok numbers the token among its resource's (its lock); siblings counts
	// the resource's grants of that token, itself included. Grants of one
	// token are one lock reported to several calls (a request-id retry):
	// they never conflict and are not ordered by fence among themselves.
	tok      int
	siblings int
	kind     kind
	class    class
	fence    uint64
	// call and ret bound the moment the grant took effect: from the first
	// send of its lock (any call of the request ids of its token's lines,
	// granted or not, may have been the one that took the lock) to this
	// line's answer.
	call, ret int64
	// held is where this line's grant is certainly held: ascending,
	// disjoint, non-empty spans, each starting at its answer or later (so
	// at or after ret).
	held []span
	// needBefore counts the grants of the resource that conflict with this
	// one (other tokens) and have a lower fence: exactly those must be
	// linearized before this one.
	needBefore int
	// record is the granted acquire line.
	record *acquireRecord
	// released is the first send of a release naming this line, or -1
	// when there was none.
	released int64
}

// conflicts says whether two grants of one resource conflict: other
// tokens, and classes that exclude each other.
func (g *grantOp) conflicts(o *grantOp) bool {
	return g.tok != o.tok && g.class.conflicts(o.class)
}

// heldEnd is where the grant is last certainly held (-1: never).
func (g *grantOp) heldEnd() int64 {
	if len(g.held) == 0 {
		return -1
	}
	return g.held[len(g.held)-1].end
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

// buildLocks turns the records into one operation per (resource, granted
// acquire line).
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
	locks := make(map[lockKey][]*grantOp)
	byResource := make(map[string]*resourceOps)
	lh := &lockHistory{records: len(h.acquires) + len(h.extends) + len(h.releases)}
	for _, a := range h.acquires {
		if a.outcome != acquireGranted {
			lh.notGrant++
			continue
		}
		lh.granted++
		released, ok := firstRelease[a.id]
		if !ok {
			released = -1
		}
		held := heldSpans(a, extensions[a.id], released)
		sent := a.invokeUS
		if a.requestID != "" {
			sent = min(sent, firstSend[a.requestID])
		}
		for i, resource := range a.resources {
			c := class{kind: classExclusive}
			switch a.kind {
			case kindShared:
				c = class{kind: classShared}
			case kindPermit:
				c = class{kind: classPermit, limit: a.limit, permit: a.permit}
			}
			key := lockKey{resource, a.token}
			if siblings := locks[key]; len(siblings) > 0 {
				first := siblings[0]
				if first.kind != a.kind || first.class != c {
					return nil, malformed("%d: acquire %s: token %q on %q was granted as %s (%s) by acquire %s (line %d), now as %s (%s): one token is one lock",
						a.line, a.id, a.token, resource, first.kind, first.class, first.record.id, first.record.line, a.kind, c)
				}
			}
			g := &grantOp{resource: resource, token: a.token, kind: a.kind, class: c, fence: a.fences[i],
				call: sent, ret: a.completeUS, held: held, record: a, released: released}
			locks[key] = append(locks[key], g)
			ro := byResource[resource]
			if ro == nil {
				ro = &resourceOps{resource: resource}
				byResource[resource] = ro
			}
			ro.ops = append(ro.ops, g)
		}
	}

	// A lock takes effect once: every line of it may date from its first send.
	for _, siblings := range locks {
		call := siblings[0].call
		for _, g := range siblings {
			call = min(call, g.call)
		}
		for _, g := range siblings {
			g.call, g.siblings = call, len(siblings)
		}
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
			if a.token != b.token {
				return a.token < b.token
			}
			return a.record.line < b.record.line
		})
		toks := make(map[string]int)
		for i, g := range ro.ops {
			g.seq = i
			tok, seen := toks[g.token]
			if !seen {
				tok = len(toks)
				toks[g.token] = tok
			}
			g.tok = tok
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

// heldSpans is where a granted line's grant is certainly held: the chain of
// windows that starts at its own window and is continued by every window of
// its ok extensions that starts inside it (a window starting exactly at the
// chain's end leaves a gap, as tools/chaos's clients count it); windows
// after a gap count for nothing. Everything is cut at the first send of a
// release naming the line (released, -1 for none): the holder gave it up
// there. Other lines of its token (another call or session answered the
// same lock) have chains of their own.
func heldSpans(a *acquireRecord, extensions []*extendRecord, released int64) []span {
	chain := span{a.completeUS, a.invokeUS + a.validityUS}
	if chain.empty() {
		return nil
	}
	windows := make([]span, 0, len(extensions))
	for _, e := range extensions {
		if w := (span{e.completeUS, e.invokeUS + e.validityUS}); !w.empty() {
			windows = append(windows, w)
		}
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i].start < windows[j].start })
	for _, w := range windows {
		if w.start >= chain.end {
			break
		}
		chain.end = max(chain.end, w.end)
	}
	if released >= 0 {
		chain.end = min(chain.end, released)
		if chain.empty() {
			return nil
		}
	}
	return []span{chain}
}

// countLowerConflicting sets needBefore: how many grants of the resource
// conflict with each one (other tokens) and have a lower fence.
func countLowerConflicting(ops []*grantOp) {
	fencesByClass := make(map[class][]uint64)
	byTok := make(map[int][]*grantOp)
	for _, g := range ops {
		fencesByClass[g.class] = append(fencesByClass[g.class], g.fence)
		if g.siblings > 1 {
			byTok[g.tok] = append(byTok[g.tok], g)
		}
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
		if g.class.conflicts(g.class) {
			for _, s := range byTok[g.tok] { // its own lock's lines, counted above
				if s.fence < g.fence {
					n--
				}
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
