package redlockd

import (
	"context"
	"time"
)

// A Lease or a Leadership ends when its last known validity runs out
// unrenewed, less StopMargin. A watchdog timer closes Done then; but a
// process paused past that moment (a SIGSTOP, a long GC or VM pause) may
// run its own code before that timer's goroutine once it resumes, and find
// Done still open. (A machine suspended to RAM is not caught: the
// monotonic clock stops while it sleeps.) So Err, and the Err of Context, read
// the clock themselves: a lapsed validity ends the lease or leadership on
// the spot, whatever the timer has done. A lapse is final: an extension
// read after it does not bring the lease back (Python and Java clients
// alike).

// lapsed reports whether a validity ending at until, for a lock of ttl,
// has run out for acting on (less StopMargin), on the monotonic clock.
func lapsed(until time.Time, ttl time.Duration) bool {
	return !time.Now().Before(until.Add(-StopMargin(ttl)))
}

// checkedContext is a work context whose Err first asks check (a Lease's
// or Leadership's Err), so that `ctx.Err() != nil` before an action is as
// safe as calling that Err: it ends a lapsed validity at once.
type checkedContext struct {
	context.Context
	check func() error
}

// Err is the underlying context's, after check had its say. Contexts
// derived from this one do not read the clock: call Err on this one (or
// the lease's) before an action.
func (c *checkedContext) Err() error {
	_ = c.check()
	return c.Context.Err()
}
