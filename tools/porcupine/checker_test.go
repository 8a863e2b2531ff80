package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Histories are written as the chaos tool writes them (JSON lines) and go
// through the command's whole path: parsing, locks, Porcupine, verdict.
// Times are µs; most grants here have a validity of 1 s (1_000_000).

type rec map[string]any

func (r rec) with(kv ...any) rec {
	out := maps.Clone(r)
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func (r rec) without(keys ...string) rec {
	out := maps.Clone(r)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// granted is a granted unary acquire of one resource; its id is its client.
func granted(id int, kind, resource string, invoke, complete int64, token string, fence uint64, validity int64) rec {
	return rec{"type": "acquire", "id": id, "client": id, "replica": 0, "via": "unary", "kind": kind,
		"resource": resource, "invoke_us": invoke, "complete_us": complete, "outcome": "granted",
		"token": token, "fence": fence, "validity_us": validity}
}

// permitGrant is a granted permit of a semaphore.
func permitGrant(id int, resource string, limit, index int, invoke, complete int64, token string, fence uint64, validity int64) rec {
	return granted(id, "permit", resource, invoke, complete, token, fence, validity).with("limit", limit, "permit", index)
}

// attempt is an acquire that was not granted: outcome "failed" or "unknown".
func attempt(id int, resource string, invoke int64, outcome string) rec {
	return rec{"type": "acquire", "id": id, "client": id, "replica": 0, "via": "unary", "kind": "plain",
		"resource": resource, "invoke_us": invoke, "outcome": outcome, "code": "DEADLINE_EXCEEDED"}
}

// extended is an ok extension of grant.
func extended(id, grant int, invoke, complete, validity int64) rec {
	return rec{"type": "extend", "id": id, "grant": grant, "invoke_us": invoke, "complete_us": complete,
		"outcome": "ok", "validity_us": validity}
}

// released is a release of grant sent at invoke.
func released(id, grant int, invoke int64) rec {
	return rec{"type": "release", "id": id, "grant": grant, "invoke_us": invoke, "complete_us": invoke + 500,
		"outcome": "ok", "was_held": true}
}

func writeHistory(t *testing.T, recs []rec) string {
	t.Helper()
	var b bytes.Buffer
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runOn runs the command on a file: its exit status and everything it printed.
func runOn(t *testing.T, path string, extra ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(append([]string{"--history", path, "--timeout", "60s"}, extra...), &out, &out)
	return code, out.String()
}

func accepted(t *testing.T, recs ...rec) {
	t.Helper()
	if code, out := runOn(t, writeHistory(t, recs)); code != exitAccepted {
		t.Fatalf("want accepted (exit 0), got exit %d:\n%s", code, out)
	}
}

// rejected asserts exit 1 and that the explanation holds every `want`.
func rejected(t *testing.T, want []string, recs ...rec) {
	t.Helper()
	code, out := runOn(t, writeHistory(t, recs))
	if code != exitRejected {
		t.Fatalf("want rejected (exit 1), got exit %d:\n%s", code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("the explanation lacks %q:\n%s", w, out)
		}
	}
}

// Plain holders one after another (released, or left to expire) are accepted.
func TestAcceptsSequentialPlainHolders(t *testing.T) {
	accepted(t,
		granted(1, "plain", "r", 0, 1_000, "t1", 1, 1_000_000),
		released(101, 1, 400_000),
		granted(2, "plain", "r", 300_000, 401_000, "t2", 2, 1_000_000),     // waited for t1's release
		granted(3, "plain", "r", 1_400_000, 1_402_000, "t3", 3, 1_000_000), // t2 expired at 1.3 s
		released(103, 3, 1_500_000),
	)
}

// An election's leaders exclude each other on the election's resource as
// plain holders do, and a lock of the same name is another resource.
func TestLeadersOneAtATime(t *testing.T) {
	accepted(t,
		granted(1, "leader", "election:jobs", 0, 1_000, "t1", 1, 1_000_000),
		granted(2, "plain", "jobs", 2_000, 3_000, "t2", 2, 1_000_000),
		released(101, 1, 400_000),
		granted(3, "leader", "election:jobs", 300_000, 401_000, "t3", 3, 1_000_000),
	)
	rejected(t, []string{"OVERLAP", "acquire 1", "acquire 2"},
		granted(1, "leader", "election:jobs", 0, 1_000, "t1", 1, 1_000_000),
		granted(2, "leader", "election:jobs", 2_000, 3_000, "t2", 2, 1_000_000),
	)
}

// Shared holders of one resource may hold at once; a writer after them is fine.
func TestAcceptsSharedHoldersTogether(t *testing.T) {
	accepted(t,
		granted(1, "shared", "r", 0, 1_000, "t1", 1, 1_000_000),
		granted(2, "shared", "r", 2_000, 3_000, "t2", 2, 1_000_000),
		released(101, 1, 500_000),
		released(102, 2, 600_000),
		granted(3, "plain", "r", 100_000, 600_500, "t3", 3, 1_000_000),
	)
}

// Two permits of a limit-2 semaphore may hold at once.
func TestAcceptsTwoPermitsOfLimitTwoTogether(t *testing.T) {
	accepted(t,
		permitGrant(1, "s", 2, 0, 0, 1_000, "t1", 1, 1_000_000),
		permitGrant(2, "s", 2, 1, 2_000, 3_000, "t2", 2, 1_000_000),
	)
}

// Three permits of limit 2 held at most two at a time keep the limit: it counts one moment.
func TestAcceptsPermitsOfLimitTwoChainedTwoAtATime(t *testing.T) {
	accepted(t,
		permitGrant(1, "s", 2, 0, 0, 1_000, "t1", 1, 1_000_000),
		released(101, 1, 300_000),
		permitGrant(2, "s", 2, 1, 100_000, 101_000, "t2", 2, 1_000_000),
		permitGrant(3, "s", 2, 0, 250_000, 301_000, "t3", 3, 1_000_000), // t1's index, after its release
	)
}

// A request-id retry answered the same token may overlap its original; another token may not.
func TestAcceptsRequestIDRetryOverlappingItsOriginal(t *testing.T) {
	original := granted(1, "plain", "r", 0, 1_000, "t1", 7, 1_000_000).with("request_id", "req-1")
	retry := granted(2, "plain", "r", 200_000, 201_000, "t1", 7, 1_000_000).with("request_id", "req-1")
	accepted(t, original, retry, released(102, 2, 900_000))
	rejected(t, []string{"OVERLAP", "acquire 1", "acquire 2"}, original, retry.with("token", "t2", "fence", 8))
}

// A request-id retry's grant may take effect from its request id's first send.
func TestRequestIDRetryTakesEffectFromTheFirstSend(t *testing.T) {
	// The first call's answer was lost, so its lock may date from then: a
	// lower fence than a grant answered in between is no violation. Without
	// the shared request id it is one.
	lost := attempt(1, "r", 0, "unknown").with("request_id", "req-1")
	between := granted(2, "plain", "r", 5_000, 8_000, "t2", 11, 1_000_000)
	retry := granted(3, "plain", "r", 20_000, 25_000, "t1", 10, 1_000_000).with("request_id", "req-1")
	accepted(t, lost, between, released(102, 2, 9_000), retry)
	rejected(t, []string{"FENCE ORDER"}, lost.without("request_id"), between, released(102, 2, 9_000), retry)
}

// A session's release ends only its own grant: a retry's session holding the same lock still holds it.
func TestRejectsGrantWhileARetriedSessionHoldsAfterTheFirstEnds(t *testing.T) {
	// S1 (request id X, token tX) holds; the client retries the Hold with X
	// on a new connection, S2, answered the same lock; S1's stream ends
	// (its release). C is granted inside S2's windows: two holders.
	// Were the lines of tX one lock, S1's release would end it and C fit.
	rejected(t, []string{
		"OVERLAP during [0.310000s, 0.850000s) with the conflicting holder",
		"plain (acquire 3, client 3) token tC fence 6",
		"plain (acquire 2, client 1) token tX fence 5, held [0.203000s, 0.850000s)",
	}, retriedSessions(t, granted(3, "plain", "r", 250_000, 310_000, "tC", 6, 1_000_000))...)
}

// A grant after the retry's session released, or after its windows ended, is accepted.
func TestAcceptsGrantAfterTheRetriedSessionEnds(t *testing.T) {
	c := granted(3, "plain", "r", 250_000, 800_500, "tC", 6, 1_000_000)
	accepted(t, append(retriedSessions(t, c), released(22, 2, 800_000))...)
	accepted(t, retriedSessions(t, c.with("complete_us", 850_000))...) // S2 held until 0.85 s
	rejected(t, []string{"OVERLAP during [0.849999s, 0.850000s)", "acquire 2", "acquire 3"},
		retriedSessions(t, c.with("complete_us", 849_999))...)
}

// retriedSessions are two Hold sessions of one request id, answered one
// lock (token tX, fence 5), and c: S1 (acquire 1) held [2 ms, 650 ms) by
// an extension, released at 300 ms (its stream ended); S2 (acquire 2, on a
// new connection) held [203 ms, 850 ms) by an extension.
func retriedSessions(t *testing.T, c rec) []rec {
	t.Helper()
	session := func(id int, invoke, complete int64) rec {
		return granted(id, "plain", "r", invoke, complete, "tX", 5, 500_000).with("client", 1, "via", "hold", "request_id", "req-X")
	}
	return []rec{
		session(1, 0, 2_000),
		extended(11, 1, 150_000, 151_000, 500_000),
		session(2, 200_000, 203_000),
		extended(12, 2, 350_000, 351_000, 500_000),
		released(21, 1, 300_000),
		c,
	}
}

// A unary Acquire answered unknown, retried with its request id and granted, released, then another client: accepted.
func TestAcceptsUnknownAcquireRetriedWithItsRequestID(t *testing.T) {
	lost := attempt(1, "r", 0, "unknown").with("code", "UNAVAILABLE", "request_id", "req-1")
	retry := granted(2, "plain", "r", 40_000, 42_000, "t1", 4, 1_000_000).with("client", 1, "request_id", "req-1")
	other := granted(3, "plain", "r", 90_000, 100_500, "t3", 5, 1_000_000)
	accepted(t, lost, retry, released(102, 2, 100_000), other)
	rejected(t, []string{"OVERLAP", "acquire 2", "acquire 3"}, lost, retry, other) // not released
}

// Lines of one token with different fences are no violation; other grants are fence-ordered against each.
func TestOneTokenWithTwoFences(t *testing.T) {
	// tX's lines report fences 5 and 7; C must come after the first and
	// before the second, but the second took effect before C was sent.
	lines := []rec{
		granted(1, "plain", "r", 0, 1_000, "tX", 5, 1_000_000).with("request_id", "req-X"),
		granted(2, "plain", "r", 50_000, 60_000, "tX", 7, 1_000_000).with("client", 1, "request_id", "req-X"),
		released(101, 1, 100_000),
		released(102, 2, 100_000),
	}
	accepted(t, append(lines, granted(3, "plain", "r", 90_000, 150_000, "tC", 8, 1_000_000))...)
	rejected(t, []string{"FENCE ORDER", "acquire 2", "acquire 3"},
		append(lines, granted(3, "plain", "r", 90_000, 150_000, "tC", 6, 1_000_000))...)
}

// The lines of one permit's token are one permit of the semaphore's limit.
func TestOnePermitAnsweredTwiceCountsOnce(t *testing.T) {
	// (The daemon refuses request ids for semaphores; the checker does not
	// rely on it.)
	permits := []rec{
		permitGrant(1, "s", 2, 0, 0, 1_000, "tA", 1, 1_000_000),
		permitGrant(2, "s", 2, 0, 100_000, 101_000, "tA", 1, 1_000_000).with("client", 1),
		permitGrant(3, "s", 2, 1, 200_000, 201_000, "tB", 2, 1_000_000),
	}
	accepted(t, permits...)
	rejected(t, []string{"SEMAPHORE", "3 permits of limit 2"},
		append(permits, permitGrant(4, "s", 2, 2, 300_000, 301_000, "tC", 3, 1_000_000))...)
}

// A released holder is not held after its release's send, though its validity runs on.
func TestAcceptsGrantAfterReleaseBeforeValidityEnds(t *testing.T) {
	first := granted(1, "plain", "r", 0, 1_000, "t1", 1, 1_000_000)
	next := granted(2, "plain", "r", 150_000, 220_000, "t2", 2, 1_000_000) // sent before the release, answered after
	accepted(t, first, released(101, 1, 200_000), next)
	rejected(t, []string{"OVERLAP"}, first, next)
}

// A release takes effect exactly at its send, whatever its answer: a late one hides nothing.
func TestReleaseTakesEffectAtItsSend(t *testing.T) {
	first := granted(1, "plain", "r", 0, 1_000, "t1", 1, 1_000_000)
	release := released(101, 1, 200_000).with("outcome", "failed", "complete_us", 900_000)
	accepted(t, first, release, granted(2, "plain", "r", 100_000, 200_000, "t2", 2, 1_000_000))
	rejected(t, []string{"OVERLAP", "[0.199999s, 0.200000s)"},
		first, release, granted(2, "plain", "r", 100_000, 199_999, "t2", 2, 1_000_000))
}

// A Hold session chained by extensions without a gap is held all along until its release.
func TestAcceptsSessionChainedByExtensions(t *testing.T) {
	session := []rec{granted(1, "plain", "r", 0, 2_000, "t1", 1, 500_000).with("via", "hold")}
	for i, at := range []int64{300_000, 600_000, 900_000, 1_200_000, 1_500_000, 1_800_000, 2_100_000, 2_400_000, 2_700_000} {
		session = append(session, extended(10+i, 1, at, at+1_000, 500_000))
	}
	session = append(session, released(100, 1, 3_000_000))
	accepted(t, append(session, granted(2, "plain", "r", 2_500_000, 3_000_100, "t2", 2, 1_000_000))...)
	rejected(t, []string{"OVERLAP", "held [0.002000s, 3.000000s)"},
		append(session, granted(2, "plain", "r", 2_500_000, 2_600_000, "t2", 2, 1_000_000))...)
}

// A session is not held through a gap in its extension chain, but is within its windows.
func TestSessionGapIsNotHeld(t *testing.T) {
	// The grant in the gap is accepted even where its window meets the
	// late extension's; one inside the first window overlaps.
	session := []rec{
		granted(1, "plain", "r", 0, 2_000, "t1", 1, 500_000).with("via", "hold"), // window [2 ms, 500 ms)
		extended(10, 1, 600_000, 610_000, 500_000),                               // window [610 ms, 1.1 s): after the gap
	}
	accepted(t, append(session, granted(2, "plain", "r", 510_000, 520_000, "t2", 2, 1_000_000))...)
	rejected(t, []string{"OVERLAP", "acquire 1", "acquire 2"},
		append(session, granted(2, "plain", "r", 300_000, 310_000, "t2", 2, 1_000_000))...)
}

// A multi grant is a plain grant of each of its resources, with that resource's fence.
func TestAcceptsMultiResourceGrants(t *testing.T) {
	multi := granted(1, "multi", "a", 0, 1_000, "t1", 3, 1_000_000).with("resources", []string{"a", "b"}, "fences", []uint64{3, 9})
	after := []rec{
		released(101, 1, 100_000),
		granted(2, "plain", "a", 150_000, 151_000, "t2", 4, 1_000_000),
		granted(3, "shared", "b", 150_000, 152_000, "t3", 10, 1_000_000),
	}
	accepted(t, append([]rec{multi}, after...)...)
	lower := multi.with("fences", []uint64{3, 11}) // b's fence 11 above the later shared grant's 10
	rejected(t, []string{`resource "b"`, "FENCE ORDER"}, append([]rec{lower}, after...)...)
	rejected(t, []string{`resource "a"`, "OVERLAP"}, append([]rec{multi}, after[1:]...)...) // unreleased
}

// An acquire with no answer is not assumed granted: a grant after it is fine.
func TestAcceptsUnknownAcquireThenAnotherGrant(t *testing.T) {
	accepted(t,
		attempt(1, "r", 0, "unknown"),
		attempt(2, "r", 1_000, "failed").with("complete_us", 2_000),
		granted(3, "plain", "r", 5_000, 6_000, "t3", 2, 1_000_000),
	)
}

// Grants whose calls overlap may take effect in fence order; one sent after the other's answer not.
func TestConcurrentGrantsMayTakeEffectInFenceOrder(t *testing.T) {
	first := granted(1, "plain", "r", 0, 10_000, "t1", 5, 1_000_000)
	accepted(t, first, released(101, 1, 50_000), granted(2, "plain", "r", 5_000, 60_000, "t2", 4, 1_000_000))
	rejected(t, []string{"FENCE ORDER"}, first, released(101, 1, 50_000), granted(2, "plain", "r", 11_000, 60_000, "t2", 4, 1_000_000))
}

// Two plain holders at once are rejected.
func TestRejectsTwoPlainHoldersAtOnce(t *testing.T) {
	rejected(t, []string{"OVERLAP", "during [0.101000s, 1.000000s)", "acquire 1", "acquire 2"},
		granted(1, "plain", "r", 0, 1_000, "t1", 1, 1_000_000),
		granted(2, "plain", "r", 100_000, 101_000, "t2", 2, 1_000_000),
	)
}

// A shared holder and a plain one at once are rejected.
func TestRejectsPlainGrantWhileShared(t *testing.T) {
	rejected(t, []string{"OVERLAP"},
		granted(1, "shared", "r", 0, 1_000, "t1", 1, 1_000_000),
		granted(2, "plain", "r", 100_000, 101_000, "t2", 2, 1_000_000),
	)
}

// A plain grant inside a live permit's window is rejected.
func TestRejectsPlainGrantInsideLivePermit(t *testing.T) {
	rejected(t, []string{"OVERLAP", "permit 0 of limit 2"},
		permitGrant(1, "s", 2, 0, 0, 1_000, "t1", 1, 1_000_000),
		granted(2, "plain", "s", 100_000, 101_000, "t2", 2, 1_000_000),
	)
}

// Three permits of limit 2 at once are rejected: by the limit, or as a reused index.
func TestRejectsThreePermitsOfLimitTwoAtOnce(t *testing.T) {
	two := []rec{
		permitGrant(1, "s", 2, 0, 0, 1_000, "t1", 1, 1_000_000),
		permitGrant(2, "s", 2, 1, 2_000, 3_000, "t2", 2, 1_000_000),
	}
	rejected(t, []string{"SEMAPHORE", "3 permits of limit 2", "during [0.101000s, 1.000000s)"},
		append(two, permitGrant(3, "s", 2, 2, 100_000, 101_000, "t3", 3, 1_000_000))...)
	rejected(t, []string{"OVERLAP", "permit 1 of limit 2"},
		append(two, permitGrant(3, "s", 2, 1, 100_000, 101_000, "t3", 3, 1_000_000))...)
}

// A permit of limit 3 beside one of limit 2 is rejected: different limits conflict.
func TestRejectsPermitOfLimitThreeBesideLimitTwo(t *testing.T) {
	rejected(t, []string{"OVERLAP", "permit 0 of limit 2", "permit 1 of limit 3"},
		permitGrant(1, "s", 2, 0, 0, 1_000, "t1", 1, 1_000_000),
		permitGrant(2, "s", 3, 1, 100_000, 101_000, "t2", 2, 1_000_000),
	)
}

// A permit granted after a plain holder with a lower or equal fence is rejected.
func TestRejectsLaterConflictingGrantWithLowerOrEqualFence(t *testing.T) {
	plain := granted(1, "plain", "s", 0, 1_000, "t1", 5, 1_000_000)
	rejected(t, []string{"FENCE ORDER", "acquire 1", "acquire 2", "sent at 0.060000s, after this one was answered"},
		plain, released(101, 1, 50_000), permitGrant(2, "s", 2, 0, 60_000, 61_000, "t2", 4, 1_000_000))
	rejected(t, []string{"FENCE ORDER: fence 5 is not above fence 5 of the earlier conflicting grant", "acquire 1", "acquire 2"},
		plain, released(101, 1, 50_000), permitGrant(2, "s", 2, 0, 60_000, 61_000, "t2", 5, 1_000_000))
	accepted(t, plain, released(101, 1, 50_000), permitGrant(2, "s", 2, 0, 60_000, 61_000, "t2", 6, 1_000_000))
}

// Non-conflicting grants (permits of distinct indices, shared ones) have no fence order.
func TestNonConflictingGrantsHaveNoFenceOrder(t *testing.T) {
	accepted(t,
		permitGrant(1, "s", 2, 0, 0, 1_000, "t1", 9, 100_000),
		permitGrant(2, "s", 2, 1, 200_000, 201_000, "t2", 3, 100_000),
		granted(3, "shared", "r", 0, 1_000, "t3", 9, 100_000),
		granted(4, "shared", "r", 200_000, 201_000, "t4", 3, 100_000),
	)
}

// Fences that no order of the calls explains are rejected, though each conflicting pair fits.
func TestRejectsFenceCycleThatNoPairShows(t *testing.T) {
	// C (permit 1) is answered before A (permit 0) is sent, so C comes
	// first; the plain B, concurrent with both, would need to follow A
	// (fence 10 < 20) and precede C (20 < 30). Only a search over orders
	// (Porcupine's) finds this.
	rejected(t, []string{"FENCE ORDER"},
		permitGrant(3, "s", 2, 1, 0, 10_000, "tC", 30, 1_000),
		permitGrant(1, "s", 2, 0, 20_000, 30_000, "tA", 10, 1_000),
		granted(2, "plain", "s", 5_000, 25_000, "tB", 20, 1_000),
	)
}

// A grant answered after its validity ran out is never held, but counts for fence order.
func TestEmptyWindowIsNeverHeld(t *testing.T) {
	holder := granted(1, "plain", "r", 0, 1_000, "t1", 2, 1_000_000)
	accepted(t, holder, granted(2, "plain", "r", 0, 600_000, "t2", 3, 500_000))
	rejected(t, []string{"FENCE ORDER"}, holder, granted(2, "plain", "r", 1_500, 600_000, "t2", 1, 500_000))
}

// The CI fixtures: clean.jsonl is accepted; overlap.jsonl (one grant moved) and retried-session.jsonl rejected.
func TestFixtures(t *testing.T) {
	if code, out := runOn(t, "testdata/clean.jsonl"); code != exitAccepted {
		t.Fatalf("testdata/clean.jsonl: want exit 0, got %d:\n%s", code, out)
	}
	code, out := runOn(t, "testdata/overlap.jsonl")
	if code != exitRejected || !strings.Contains(out, `resource "hot/0"`) || !strings.Contains(out, "OVERLAP") {
		t.Fatalf("testdata/overlap.jsonl: want exit 1 with an overlap on hot/0, got %d:\n%s", code, out)
	}
	// The history of TestRejectsGrantWhileARetriedSessionHoldsAfterTheFirstEnds.
	code, out = runOn(t, "testdata/retried-session.jsonl")
	if code != exitRejected || !strings.Contains(out, "OVERLAP during [0.310000s, 0.850000s) with the conflicting holder\n      plain (acquire 2, client 1) token tX") {
		t.Fatalf("testdata/retried-session.jsonl: want exit 1 with acquire 3 overlapping acquire 2, got %d:\n%s", code, out)
	}
}

// --visualize writes Porcupine's HTML page with the rejected resource's grants.
func TestVisualizationIsWritten(t *testing.T) {
	page := filepath.Join(t.TempDir(), "out.html")
	if code, out := runOn(t, "testdata/overlap.jsonl", "--visualize", page); code != exitRejected {
		t.Fatalf("want exit 1, got %d:\n%s", code, out)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<html", "token t-a4 fence 3", "two holders at once"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Fatalf("the visualization lacks %q", want)
		}
	}
}
