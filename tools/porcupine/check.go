package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// resourceResult is Porcupine's verdict on one resource.
type resourceResult struct {
	ro      *resourceOps
	result  porcupine.CheckResult
	elapsed time.Duration
}

// checkReport is the verdict on a whole history.
type checkReport struct {
	locks   *lockHistory
	results []resourceResult // ordered by resource
	elapsed time.Duration
}

func (r *checkReport) with(result porcupine.CheckResult) []resourceResult {
	var out []resourceResult
	for _, rr := range r.results {
		if rr.result == result {
			out = append(out, rr)
		}
	}
	return out
}

// clientRows numbers the clients of the given resources for the
// visualization's rows, in numeric order where they are numbers (the chaos
// tool's are), so that the rows follow the clients.
func clientRows(resources []*resourceOps) func(string) int {
	var names []string
	seen := make(map[string]bool)
	for _, ro := range resources {
		for _, g := range ro.ops {
			if c := g.record.client; !seen[c] {
				seen[c] = true
				names = append(names, c)
			}
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		na, errA := strconv.ParseInt(a, 10, 64)
		nb, errB := strconv.ParseInt(b, 10, 64)
		switch {
		case errA == nil && errB == nil:
			return cmp.Compare(na, nb)
		case errA == nil:
			return -1
		case errB == nil:
			return 1
		}
		return strings.Compare(a, b)
	})
	rows := make(map[string]int, len(names))
	for i, n := range names {
		rows[n] = i
	}
	return func(c string) int { return rows[c] }
}

// checkLocks runs Porcupine on every resource, the largest first, on as
// many workers as Go has processors, all before one deadline: a resource
// not decided by then is Unknown.
func checkLocks(lh *lockHistory, deadline time.Time) *checkReport {
	started := time.Now()
	model := lockModel()
	rows := func(string) int { return 0 } // no visualization here
	order := make([]int, len(lh.resources))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return len(lh.resources[order[a]].ops) > len(lh.resources[order[b]].ops)
	})
	results := make([]resourceResult, len(lh.resources))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				ro := lh.resources[i]
				began := time.Now()
				result := porcupine.Unknown
				if remaining := time.Until(deadline); remaining > 0 {
					result = porcupine.CheckOperationsTimeout(model, operations(ro, rows), remaining)
				}
				results[i] = resourceResult{ro: ro, result: result, elapsed: time.Since(began)}
			}
		})
	}
	for _, i := range order {
		next <- i
	}
	close(next)
	wg.Wait()
	return &checkReport{locks: lh, results: results, elapsed: time.Since(started)}
}

// explain says why Porcupine found a resource not linearizable: it takes
// Porcupine's longest partial linearization, replays it, and asks the model
// why each grant that could come next is refused.
func explain(w io.Writer, ro *resourceOps, timeout time.Duration) []porcupine.Annotation {
	model := lockModel()
	ops := operations(ro, func(string) int { return 0 })
	result, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if result == porcupine.Unknown {
		fmt.Fprintf(w, "  (explaining timed out after %s; the partial linearization below may not be the longest)\n", timeout)
	}
	// The longest; among as long ones (Porcupine keeps them in a map) the
	// first in order, so that the explanation does not change between runs.
	var longest []int
	for _, partition := range info.PartialLinearizations() {
		for _, l := range partition {
			if len(l) > len(longest) || (len(l) == len(longest) && slices.Compare(l, longest) < 0) {
				longest = l
			}
		}
	}
	state := &lockState{}
	placed := make([]bool, len(ro.ops))
	var prefix []*grantOp
	for _, i := range longest {
		next, refused := state.admit(ro.ops[i])
		if refused != nil {
			fmt.Fprintf(w, "  (replaying Porcupine's linearization failed at %s)\n", ro.ops[i].describe())
			return nil
		}
		state, placed[i] = next, true
		prefix = append(prefix, ro.ops[i])
	}
	pendingReturn := int64(-1)
	for i, g := range ro.ops {
		if !placed[i] && (pendingReturn < 0 || g.ret < pendingReturn) {
			pendingReturn = g.ret
		}
	}
	var candidates []*grantOp
	for i, g := range ro.ops {
		if !placed[i] && g.call <= pendingReturn {
			candidates = append(candidates, g)
		}
	}
	fmt.Fprintf(w, "  Porcupine orders at most %d of its %d grants; after them", len(prefix), len(ro.ops))
	if len(prefix) > 0 {
		fmt.Fprintf(w, " (the last: %s)", prefix[len(prefix)-1].describe())
	}
	fmt.Fprintf(w, ", no grant that could come next fits:\n")
	refusals := make([]*refusal, len(candidates))
	onlyOrder := len(candidates) > 0
	for i, g := range candidates {
		_, refusals[i] = state.admit(g)
		onlyOrder = onlyOrder && refusals[i] != nil && refusals[i].kind == refusedOrder
	}
	// The decisive refusals first (a fence, an overlap, the limit), then the
	// grants that only wait for lower fences.
	rank := func(r *refusal) int {
		switch {
		case r == nil:
			return 4
		case r.kind == refusedOrder:
			return 5
		}
		return int(r.kind)
	}
	order := make([]int, len(candidates))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rank(refusals[order[a]]) < rank(refusals[order[b]]) })
	sortedCandidates, sortedRefusals := make([]*grantOp, len(order)), make([]*refusal, len(order))
	for i, j := range order {
		sortedCandidates[i], sortedRefusals[i] = candidates[j], refusals[j]
	}
	candidates, refusals = sortedCandidates, sortedRefusals
	if onlyOrder {
		fmt.Fprintf(w, "  FENCE ORDER: each of them waits for a conflicting grant with a lower fence that cannot come first: no order of the calls gives conflicting grants increasing fences\n")
	}
	const shown = 6
	var notes []porcupine.Annotation
	for n, g := range candidates {
		if n == shown {
			fmt.Fprintf(w, "  ... and %d more\n", len(candidates)-shown)
			break
		}
		fmt.Fprintf(w, "  - %s\n    sent %s, answered %s\n", g.describe(), formatUS(g.call), formatUS(g.ret))
		refused := refusals[n]
		if refused == nil {
			fmt.Fprintf(w, "    fits here, but every way on from it was tried and fails\n")
			continue
		}
		why := refusalText(refused, g, ro, prefix, placed)
		fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(why, "\n", "\n    "))
		if refused.kind == refusedOverlap || refused.kind == refusedSemaphore {
			notes = append(notes, porcupine.Annotation{
				Tag:             "violation on " + ro.resource,
				Start:           refused.during.start,
				End:             refused.during.end,
				Description:     "two holders at once",
				Details:         why,
				BackgroundColor: "#ffb3b3",
			})
		}
	}
	return notes
}

// refusalText is a refusal in words.
func refusalText(r *refusal, g *grantOp, ro *resourceOps, prefix []*grantOp, placed []bool) string {
	switch r.kind {
	case refusedFence:
		earlier := "?"
		for _, p := range prefix {
			if p.class == r.class && p.fence == r.fence && p.tok != g.tok {
				earlier = p.describe()
			}
		}
		return fmt.Sprintf("FENCE ORDER: fence %d is not above fence %d of the earlier conflicting grant\n  %s",
			g.fence, r.fence, earlier)
	case refusedOrder:
		var lines []string
		for i, o := range ro.ops {
			if placed[i] || !o.conflicts(g) || o.fence >= g.fence {
				continue
			}
			why := "not placeable yet"
			if o.call > g.ret {
				why = fmt.Sprintf("sent at %s, after this one was answered: FENCE ORDER", formatUS(o.call))
			}
			lines = append(lines, fmt.Sprintf("  %s (%s)", o.describe(), why))
			if len(lines) == 3 {
				break
			}
		}
		return "waits for conflicting grants with lower fences, not ordered yet:\n" + strings.Join(lines, "\n")
	case refusedOverlap:
		return fmt.Sprintf("OVERLAP during [%s, %s) with the conflicting holder\n  %s",
			formatUS(r.during.start), formatUS(r.during.end), r.others[0].describe())
	default:
		lines := make([]string, len(r.others))
		for i, o := range r.others {
			lines[i] = "  " + o.describe()
		}
		return fmt.Sprintf("SEMAPHORE: during [%s, %s) %d permits of limit %d held at once with these:\n%s",
			formatUS(r.during.start), formatUS(r.during.end), len(r.others)+1, g.class.limit, strings.Join(lines, "\n"))
	}
}

// visualize writes Porcupine's HTML visualization of the given resources.
func visualize(path string, lh *lockHistory, resources []*resourceOps, notes []porcupine.Annotation, timeout time.Duration) error {
	model := lockModel()
	rows := clientRows(resources)
	var ops []porcupine.Operation
	for _, ro := range resources {
		ops = append(ops, operations(ro, rows)...)
	}
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	info.AddAnnotations(notes)
	return porcupine.VisualizePath(model, info, path)
}

// summary is the accepted history's figures in a line.
func (r *checkReport) summary() string {
	if len(r.results) == 0 {
		return fmt.Sprintf("%d records: no grant (%d acquires failed or unknown), nothing to order", r.locks.records, r.locks.notGrant)
	}
	ops := 0
	var slowest resourceResult
	for _, rr := range r.results {
		ops += len(rr.ro.ops)
		if rr.elapsed > slowest.elapsed {
			slowest = rr
		}
	}
	largest := slices.MaxFunc(r.results, func(a, b resourceResult) int { return len(a.ro.ops) - len(b.ro.ops) })
	return fmt.Sprintf("%d records: %d granted acquires (%d failed or unknown, left out) as %d grants on %d resources, checked in %s; largest %q (%d grants); slowest %q (%d grants, %s)",
		r.locks.records, r.locks.granted, r.locks.notGrant, ops, len(r.results), r.elapsed.Round(time.Microsecond),
		largest.ro.resource, len(largest.ro.ops), slowest.ro.resource, len(slowest.ro.ops), slowest.elapsed.Round(time.Microsecond))
}
