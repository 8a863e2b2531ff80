package main

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The Porcupine model: a fenced lock service with leases, one resource per
// partition. An operation is one granted acquire line (a *grantOp, built in
// locks.go); lines of one token are one lock answered to several calls: they
// never conflict and are not compared for fence order among themselves, and
// every other grant is judged against each of them. The state is what a
// later grant is judged against:
//   - per conflict class, the highest fence granted so far, by which token,
//     the highest of the other tokens, and how many grants there were
//     (property 2, fence order);
//   - how many lines of each lock with several are linearized (until all
//     are), to leave them out of a sibling's count;
//   - the holders that may still be held at a later grant (property 1, no
//     two conflicting holders at once, at most L permits of limit L).
// Extensions and releases are not operations of their own: the span where a
// lock is certainly held is a fact of the whole history (an extension that
// Porcupine placed after a grant still covered it; a release takes effect
// at its send, not where Porcupine places it), so it is computed once and
// carried by the grant. Only the grants' order is Porcupine's to find.

// fenceMark is one conflict class's grants so far.
type fenceMark struct {
	class class
	max   uint64 // the highest fence granted in the class
	// maxTok is the token (grantOp.tok) of max; the least one if several
	// tokens have it, so that the mark does not depend on the order.
	maxTok int
	// second is the highest fence of the other tokens than maxTok, if any
	// (others): what a grant of maxTok is compared with.
	second uint64
	others bool
	count  int // grants in the class
}

// highestOther is the highest fence in the class of a token other than tok.
func (m *fenceMark) highestOther(tok int) (uint64, bool) {
	if m.maxTok != tok {
		return m.max, true
	}
	return m.second, m.others
}

// add is the mark with the grant g of its class.
func (m fenceMark) add(g *grantOp) fenceMark {
	m.count++
	switch {
	case g.tok == m.maxTok:
		m.max = max(m.max, g.fence)
	case g.fence > m.max:
		m.second, m.others = m.max, true
		m.max, m.maxTok = g.fence, g.tok
	case g.fence == m.max:
		m.second, m.others = m.max, true
		m.maxTok = min(m.maxTok, g.tok)
	case m.others:
		m.second = max(m.second, g.fence)
	default:
		m.second, m.others = g.fence, true
	}
	return m
}

// lockCount is how many lines of a lock of several lines are linearized:
// at least one, fewer than all.
type lockCount struct {
	tok, count int
}

// lockState is the model's state for one resource. Immutable: admit
// returns a new one.
type lockState struct {
	marks []fenceMark // ordered by class
	// partial are the locks of several lines some but not all of whose
	// lines are linearized. Ordered by tok.
	partial []lockCount
	// live are the holders that can still overlap a later grant: held after
	// the last step's call (a later grant is answered no earlier than that,
	// and held only after its answer). Ordered by seq.
	live []*grantOp
}

// refusalKind says why a grant cannot be linearized next.
type refusalKind uint8

const (
	// Its fence is not above an earlier conflicting grant's.
	refusedFence refusalKind = iota
	// A conflicting grant with a lower fence has not been linearized yet;
	// it would then come after this one and be refused for its fence. A
	// shortcut, so that the search follows fence order instead of trying
	// every order of waiting grants: it refuses no linearization that could
	// be completed.
	refusedOrder
	// It is held while a conflicting holder is held.
	refusedOverlap
	// It is held while `limit` other permits of its limit are held.
	refusedSemaphore
)

// refusal is why a grant cannot be linearized next.
type refusal struct {
	kind   refusalKind
	class  class      // refusedFence: the class of the fence not below
	fence  uint64     // refusedFence: that fence
	others []*grantOp // refusedOverlap: the holder; refusedSemaphore: the holders
	during span       // refusedOverlap, refusedSemaphore: when
}

// admit is the model's step: the state after linearizing g next, or why g
// cannot come next.
func (s *lockState) admit(g *grantOp) (*lockState, *refusal) {
	linearizedConflicting := 0
	for _, m := range s.marks {
		if !m.class.conflicts(g.class) {
			continue
		}
		if top, ok := m.highestOther(g.tok); ok && top >= g.fence {
			return nil, &refusal{kind: refusedFence, class: m.class, fence: top}
		}
		linearizedConflicting += m.count
	}
	placedSiblings := 0
	if g.siblings > 1 {
		if at, ok := slices.BinarySearchFunc(s.partial, g.tok, func(c lockCount, tok int) int { return c.tok - tok }); ok {
			placedSiblings = s.partial[at].count
		}
		if g.class.conflicts(g.class) {
			linearizedConflicting -= placedSiblings // counted in its own class's mark
		}
	}
	if linearizedConflicting != g.needBefore {
		return nil, &refusal{kind: refusedOrder}
	}

	// A later grant takes effect no earlier than g.call and is held only
	// after its answer, so a holder whose last span ends by g.call can
	// overlap none: forget it.
	live := make([]*grantOp, 0, len(s.live)+1)
	for _, h := range s.live {
		if h.heldEnd() > g.call {
			live = append(live, h)
		}
	}
	for _, h := range live {
		if h.conflicts(g) {
			if during, ok := spansOverlap(h.held, g.held); ok {
				return nil, &refusal{kind: refusedOverlap, others: []*grantOp{h}, during: during}
			}
		}
	}
	if g.class.kind == classPermit {
		if r := semaphorePeak(live, g); r != nil {
			return nil, r
		}
	}

	next := &lockState{marks: make([]fenceMark, 0, len(s.marks)+1), partial: s.partial}
	placed := false
	first := fenceMark{class: g.class, max: g.fence, maxTok: g.tok, count: 1}
	for _, m := range s.marks {
		if m.class == g.class {
			m = m.add(g)
			placed = true
		} else if !placed && g.class.less(m.class) {
			next.marks = append(next.marks, first)
			placed = true
		}
		next.marks = append(next.marks, m)
	}
	if !placed {
		next.marks = append(next.marks, first)
	}
	if g.siblings > 1 {
		at, found := slices.BinarySearchFunc(s.partial, g.tok, func(c lockCount, tok int) int { return c.tok - tok })
		next.partial = slices.Clone(s.partial)
		switch {
		case placedSiblings+1 == g.siblings: // its lock's last line
			next.partial = slices.Delete(next.partial, at, at+1)
		case found:
			next.partial[at].count++
		default:
			next.partial = slices.Insert(next.partial, at, lockCount{tok: g.tok, count: 1})
		}
	}
	if len(g.held) > 0 {
		at, _ := slices.BinarySearchFunc(live, g.seq, func(h *grantOp, seq int) int { return h.seq - seq })
		live = slices.Insert(live, at, g)
	}
	next.live = live
	return next, nil
}

// semaphorePeak refuses the permit g when, at some moment it is held, its
// limit's other permits held then already number the limit. (Pairs of one
// permit index and different tokens conflict and are caught before; this
// counts distinct tokens: the lines of one lock are one permit.) The
// busiest moment begins where some holder's span does.
func semaphorePeak(live []*grantOp, g *grantOp) *refusal {
	var others []*grantOp
	for _, h := range live {
		if h.class.kind == classPermit && h.class.limit == g.class.limit && h.tok != g.tok {
			others = append(others, h)
		}
	}
	if len(others) < int(g.class.limit) {
		return nil
	}
	heldAt := func(h *grantOp, t int64) (int64, bool) {
		for _, s := range h.held {
			if s.start <= t && t < s.end {
				return s.end, true
			}
		}
		return 0, false
	}
	for _, gs := range g.held {
		for _, o := range others {
			for _, os := range o.held {
				t := max(gs.start, os.start)
				if t >= min(gs.end, os.end) {
					continue
				}
				var at []*grantOp
				until := gs.end
				for _, h := range others {
					if end, ok := heldAt(h, t); ok && !slices.ContainsFunc(at, func(a *grantOp) bool { return a.tok == h.tok }) {
						at = append(at, h)
						until = min(until, end)
					}
				}
				if len(at) >= int(g.class.limit) {
					return &refusal{kind: refusedSemaphore, others: at, during: span{t, until}}
				}
			}
		}
	}
	return nil
}

func (s *lockState) equal(o *lockState) bool {
	return slices.Equal(s.marks, o.marks) && slices.Equal(s.partial, o.partial) && slices.Equal(s.live, o.live)
}

func (s *lockState) hash() uint64 {
	h := fnv.New64a()
	var buf [8]byte
	put := func(v uint64) {
		for i := range buf {
			buf[i] = byte(v >> (8 * i))
		}
		h.Write(buf[:])
	}
	for _, m := range s.marks {
		put(uint64(m.class.kind)<<32 | uint64(m.class.limit))
		put(uint64(m.class.permit))
		put(m.max)
		put(uint64(m.maxTok))
		if m.others {
			put(m.second)
		} else {
			put(^uint64(0))
		}
		put(uint64(m.count))
	}
	put(^uint64(0)) // marks, partial and live are told apart
	for _, c := range s.partial {
		put(uint64(c.tok)<<32 | uint64(c.count))
	}
	put(^uint64(0))
	for _, g := range s.live {
		put(uint64(g.seq))
	}
	return h.Sum64()
}

// lockModel is the Porcupine model. Its partition groups the operations by
// resource (one call may also be given a single resource's operations).
func lockModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			index := make(map[string]int)
			var parts [][]porcupine.Operation
			for _, op := range ops {
				resource := op.Input.(*grantOp).resource
				i, ok := index[resource]
				if !ok {
					i = len(parts)
					index[resource] = i
					parts = append(parts, nil)
				}
				parts[i] = append(parts[i], op)
			}
			return parts
		},
		Init: func() any { return &lockState{} },
		Step: func(state, input, _ any) (bool, any) {
			next, refused := state.(*lockState).admit(input.(*grantOp))
			if refused != nil {
				return false, state
			}
			return true, next
		},
		Equal: func(a, b any) bool { return a.(*lockState).equal(b.(*lockState)) },
		Hash:  func(state any) uint64 { return state.(*lockState).hash() },
		DescribeOperation: func(input, _ any) string {
			return input.(*grantOp).describe()
		},
		DescribeState: func(state any) string { return state.(*lockState).describe() },
	}
}

// operations are a resource's grants as Porcupine operations. client maps
// a record's client to its row in the visualization.
func operations(ro *resourceOps, client func(string) int) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(ro.ops))
	for i, g := range ro.ops {
		ops[i] = porcupine.Operation{
			ClientId: client(g.record.client),
			Input:    g,
			Call:     g.call,
			Return:   g.ret,
			Metadata: "acquire " + g.record.id,
		}
	}
	return ops
}

// formatUS shows a run time in seconds, to the µs.
func formatUS(us int64) string {
	sign := ""
	if us < 0 {
		sign, us = "-", -us
	}
	return fmt.Sprintf("%s%d.%06ds", sign, us/1_000_000, us%1_000_000)
}

func formatSpans(spans []span) string {
	if len(spans) == 0 {
		return "never held"
	}
	parts := make([]string, len(spans))
	for i, s := range spans {
		parts[i] = "[" + formatUS(s.start) + ", " + formatUS(s.end) + ")"
	}
	return "held " + strings.Join(parts, " ∪ ")
}

// describe is one grant in a line.
func (g *grantOp) describe() string {
	what := g.kind.String()
	if g.class.kind == classPermit {
		what = g.class.String()
	}
	return fmt.Sprintf("%s (acquire %s, client %s) token %s fence %d, %s",
		what, g.record.id, g.record.client, g.token, g.fence, formatSpans(g.held))
}

// describe is a state in a line.
func (s *lockState) describe() string {
	var b strings.Builder
	b.WriteString("fences:")
	if len(s.marks) == 0 {
		b.WriteString(" none")
	}
	for _, m := range s.marks {
		fmt.Fprintf(&b, " %s up to %d (%d grants);", m.class, m.max, m.count)
	}
	for _, c := range s.partial {
		fmt.Fprintf(&b, " lock #%d: %d lines ordered;", c.tok, c.count)
	}
	b.WriteString(" may still be held:")
	if len(s.live) == 0 {
		b.WriteString(" none")
	}
	for _, g := range s.live {
		fmt.Fprintf(&b, " %s %s until %s;", g.token, g.class, formatUS(g.heldEnd()))
	}
	return b.String()
}
