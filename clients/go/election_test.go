package redlockd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

// bound is how long a test waits for anything the daemon does at once.
const bound = 30 * time.Second

// campaigned is a Campaign's outcome.
type campaigned struct {
	leadership *redlockd.Leadership
	err        error
}

// campaign runs Campaign in the background; its outcome arrives on the channel.
func campaign(ctx context.Context, c *redlockd.Client, name, value string, opts ...redlockd.CampaignOption) <-chan campaigned {
	out := make(chan campaigned, 1)
	go func() {
		l, err := c.Campaign(ctx, name, value, opts...)
		out <- campaigned{l, err}
	}()
	return out
}

// elected waits (bounded) for a background Campaign to be elected.
func elected(t *testing.T, outcome <-chan campaigned) *redlockd.Leadership {
	t.Helper()
	select {
	case got := <-outcome:
		if got.err != nil {
			t.Fatalf("campaign: %v", got.err)
		}
		return got.leadership
	case <-time.After(bound):
		t.Fatalf("not elected within %s", bound)
		return nil
	}
}

// endedWithin waits (bounded) for the leadership to end, checks that Err
// is an ErrLost *Error that is also Context's cause, and returns its reason.
func endedWithin(t *testing.T, l *redlockd.Leadership, limit time.Duration) string {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(limit):
		t.Fatalf("the leadership did not end within %s", limit)
	}
	err := l.Err()
	var e *redlockd.Error
	if !errors.As(err, &e) || !errors.Is(err, redlockd.ErrLost) || status.Code(err) == codes.OK {
		t.Fatalf("Err() = %v, want an ErrLost *Error with a status code", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, redlockd.ErrLost) {
		t.Fatalf("Context's cause is %v", cause)
	}
	return e.Reason
}

// leaderIs checks that Leader names the leadership l (nil: no leader).
func leaderIs(t *testing.T, c *redlockd.Client, name string, l *redlockd.Leadership) {
	t.Helper()
	got, err := c.Leader(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case l == nil && got != nil:
		t.Fatalf("Leader = %v, want none", got)
	case l == nil:
	case got == nil:
		t.Fatalf("no leader, want term %d", l.Term())
	case got.Term != l.Term() || got.Value != l.Value() || got.Name != name || got.Remaining <= 0:
		t.Fatalf("Leader = %v, want %v", got, l)
	}
}

func TestOneLeaderAndAStandby(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := t.Context()
	name := resource(t)
	leaderIs(t, c, name, nil)

	first, err := c.Campaign(ctx, name, "first", redlockd.WithLeadershipTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if first.Term() == 0 || first.Token() == "" || first.Name() != name || first.Value() != "first" || first.Err() != nil {
		t.Fatalf("a fresh leadership: %v, err %v", first, first.Err())
	}
	if first.Remaining() <= 0 || first.Remaining() > 1500*time.Millisecond {
		t.Fatalf("remaining %s", first.Remaining())
	}
	for _, shown := range []string{fmt.Sprint(first), fmt.Sprintf("%#v", first), fmt.Sprintf("%+v", first)} {
		if strings.Contains(shown, first.Token()) {
			t.Fatalf("printing a Leadership shows its token: %s", shown)
		}
	}
	leaderIs(t, c, name, first)

	standby := campaign(ctx, c, name, "standby")
	// The standby waits while the first leads, across extensions: the
	// daemon keeps the first's leadership (polled, bounded).
	limit := time.Now().Add(bound)
	for first.Extensions() < 2 {
		select {
		case got := <-standby:
			t.Fatalf("the standby got %v, %v while the first leads", got.leadership, got.err)
		default:
		}
		if time.Now().After(limit) || first.Err() != nil {
			t.Fatalf("%d extensions, err %v", first.Extensions(), first.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case got := <-standby:
		t.Fatalf("the standby got %v, %v while the first leads", got.leadership, got.err)
	default:
	}
	leaderIs(t, c, name, first)

	wasLeader, err := first.Resign(ctx)
	if err != nil || !wasLeader {
		t.Fatalf("resign: %v %v", wasLeader, err)
	}
	if reason := endedWithin(t, first, 5*time.Second); reason != "resigned at the client's request" {
		t.Fatalf("reason %q", reason)
	}
	if again, err := first.Resign(ctx); err != nil || !again {
		t.Fatalf("a second Resign answers the first outcome: %v %v", again, err)
	}

	second := elected(t, standby)
	if second.Term() <= first.Term() || second.Value() != "standby" {
		t.Fatalf("the standby: %v after term %d", second, first.Term())
	}
	leaderIs(t, c, name, second)
	if wasLeader, err := second.Resign(ctx); err != nil || !wasLeader {
		t.Fatalf("resign: %v %v", wasLeader, err)
	}
	leaderIs(t, c, name, nil)
}

// observed is one step of an Observe.
type observed struct {
	leader *redlockd.Leader
	err    error
}

func TestLeaderAndObserveSeeChangesInTermOrder(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := t.Context()
	name := resource(t)
	watchCtx, stopWatching := context.WithCancel(ctx)
	steps := make(chan observed)
	go func() {
		defer close(steps)
		for leader, err := range c.Observe(watchCtx, name) {
			select {
			case steps <- observed{leader, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	next := func() (observed, bool) {
		t.Helper()
		select {
		case step, open := <-steps:
			return step, open
		case <-time.After(bound):
			t.Fatalf("no change observed within %s", bound)
			return observed{}, false
		}
	}
	var lastTerm uint64
	// until reads changes, each a higher term or no leader, up to term.
	until := func(term uint64) *redlockd.Leader {
		t.Helper()
		for {
			step, open := next()
			switch {
			case !open:
				t.Fatal("Observe ended")
			case step.err != nil:
				t.Fatalf("Observe: %v", step.err)
			case step.leader == nil:
				continue
			case step.leader.Term <= lastTerm:
				t.Fatalf("term %d observed after %d", step.leader.Term, lastTerm)
			case step.leader.Name != name:
				t.Fatalf("observed %v", step.leader)
			}
			lastTerm = step.leader.Term
			if lastTerm >= term {
				return step.leader
			}
		}
	}

	// The current state first: no leader.
	if step, open := next(); !open || step.err != nil || step.leader != nil {
		t.Fatalf("first observed %v %v (open %v), want no leader", step.leader, step.err, open)
	}
	first := elected(t, campaign(ctx, c, name, "first"))
	if got := until(first.Term()); got.Term != first.Term() || got.Value != "first" {
		t.Fatalf("observed %v, want %v", got, first)
	}
	standby := campaign(ctx, c, name, "standby")
	if _, err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second := elected(t, standby)
	if got := until(second.Term()); got.Term != second.Term() || got.Value != "standby" {
		t.Fatalf("observed %v, want %v", got, second)
	}
	leaderIs(t, c, name, second)
	if _, err := second.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	// No leader now: observed as such, or nothing more.
	if step, open := next(); !open || step.err != nil || step.leader != nil {
		t.Fatalf("observed %v %v (open %v), want no leader", step.leader, step.err, open)
	}
	// Ending the context ends the range, without an error.
	stopWatching()
	for {
		step, open := next()
		if !open {
			break
		}
		if step.err != nil {
			t.Fatalf("Observe ended with %v", step.err)
		}
	}
}

func TestProclaimChangesTheValueUnderTheSameTerm(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := t.Context()
	name := resource(t)
	steps := make(chan observed, 16)
	go func() {
		for leader, err := range c.Observe(ctx, name) {
			select {
			case steps <- observed{leader, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var last *redlockd.Leader
	// next reads the next leader observed, passing over moments with none;
	// each comes after the one before: a higher term, or the same term
	// with a higher ValueVersion.
	next := func() *redlockd.Leader {
		t.Helper()
		for {
			var step observed
			select {
			case step = <-steps:
			case <-time.After(bound):
				t.Fatalf("no change observed within %s", bound)
			}
			switch {
			case step.err != nil:
				t.Fatalf("Observe: %v", step.err)
			case step.leader == nil:
				continue
			case last != nil && (step.leader.Term < last.Term ||
				step.leader.Term == last.Term && step.leader.ValueVersion <= last.ValueVersion):
				t.Fatalf("observed %v after %v", step.leader, last)
			}
			last = step.leader
			return last
		}
	}

	first, err := c.Campaign(ctx, name, "first")
	if err != nil {
		t.Fatal(err)
	}
	if got := next(); got.Term != first.Term() || got.Value != "first" || got.ValueVersion != 0 {
		t.Fatalf("observed %v, want %v at version 0", got, first)
	}
	for _, value := range []string{"moved", "moved again"} {
		before := last.ValueVersion
		if err := first.Proclaim(ctx, value); err != nil {
			t.Fatalf("proclaim %q: %v", value, err)
		}
		if first.Value() != value || first.Err() != nil {
			t.Fatalf("after proclaiming %q: %v, err %v", value, first, first.Err())
		}
		leaderIs(t, c, name, first)
		got, err := c.Leader(ctx, name)
		if err != nil || got.ValueVersion <= before {
			t.Fatalf("Leader = %v, %v: want a version above %d", got, err, before)
		}
		// Told at once, as a new leader is; the same term, a higher version.
		if seen := next(); seen.Term != first.Term() || seen.Value != value || seen.ValueVersion != got.ValueVersion {
			t.Fatalf("observed %v, want %v", seen, got)
		}
	}

	// Resigned by token elsewhere: the daemon refuses the old term's
	// Proclaim (this side may not know yet), and the next leader's value
	// stays.
	standby := campaign(ctx, c, name, "standby")
	if wasLeader, err := c.Resign(ctx, name, first.Token()); err != nil || !wasLeader {
		t.Fatalf("resign by token: %v %v", wasLeader, err)
	}
	second := elected(t, standby)
	e := wantKind(t, first.Proclaim(ctx, "too late"), redlockd.ErrNotHeld, codes.FailedPrecondition)
	if e.Op != "Proclaim" || errors.Is(e, redlockd.ErrLost) {
		t.Fatalf("a refused Proclaim: %#v", e)
	}
	leaderIs(t, c, name, second)
	if seen := next(); seen.Term != second.Term() || seen.Value != "standby" || seen.ValueVersion != 0 {
		t.Fatalf("observed %v, want %v at version 0", seen, second)
	}

	// Resigned here: refused at once, with the same kind.
	if _, err := second.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	e = wantKind(t, second.Proclaim(ctx, "too late"), redlockd.ErrNotHeld, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "resigned at the client's request") {
		t.Fatalf("message %q", e.Message)
	}
	if second.Value() != "standby" {
		t.Fatalf("a refused Proclaim changed Value to %q", second.Value())
	}
	leaderIs(t, c, name, nil)
}

func TestCampaignsContextWithdrawsOrEnds(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := t.Context()
	name := resource(t)
	leaderCtx, endLeadership := context.WithCancel(ctx)
	first, err := c.Campaign(leaderCtx, name, "first")
	if err != nil {
		t.Fatal(err)
	}
	// A candidate whose context ends while it waits withdraws.
	waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.Campaign(waitCtx, name, "impatient")
	wantKind(t, err, redlockd.ErrDeadlineExceeded, codes.DeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v is not context.DeadlineExceeded", err)
	}
	leaderIs(t, c, name, first)

	// Cancelling the leader's context ends its leadership: the daemon
	// resigns it and the next candidate is elected (not the withdrawn one).
	standby := campaign(ctx, c, name, "standby")
	endLeadership()
	if reason := endedWithin(t, first, 5*time.Second); !strings.Contains(reason, "CANCELLED") {
		t.Fatalf("reason %q", reason)
	}
	second := elected(t, standby)
	if second.Term() <= first.Term() || second.Value() != "standby" {
		t.Fatalf("after the leader's cancellation: %v", second)
	}
	if wasLeader, err := first.Resign(ctx); err != nil || wasLeader {
		t.Fatalf("resigning an ended leadership: %v %v", wasLeader, err)
	}
	if _, err := second.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestResignByTokenEndsTheLeadership(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := t.Context()
	name := resource(t)
	first, err := c.Campaign(ctx, name, "first", redlockd.WithLeadershipTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	standby := campaign(ctx, c, name, "standby", redlockd.WithLeadershipTTL(time.Second))
	wasLeader, err := c.Resign(ctx, name, first.Token())
	if err != nil || !wasLeader {
		t.Fatalf("resign by token: %v %v", wasLeader, err)
	}
	// The session learns it at its next extension.
	if reason := endedWithin(t, first, 10*time.Second); !strings.HasPrefix(reason, "lost: ") && !strings.Contains(reason, "no extension arrived") {
		t.Fatalf("reason %q", reason)
	}
	second := elected(t, standby)
	if second.Term() <= first.Term() {
		t.Fatalf("term %d after %d", second.Term(), first.Term())
	}
	if again, err := c.Resign(ctx, name, first.Token()); err != nil || again {
		t.Fatalf("resigning an ended leadership by token: %v %v", again, err)
	}
	if _, err := second.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestElectionArgumentsAreChecked(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := t.Context()
	_, err := c.Campaign(ctx, "", "v")
	if e := wantKind(t, err, redlockd.ErrInvalidArgument, codes.InvalidArgument); e.Field != "name" {
		t.Fatalf("field %q", e.Field)
	}
	// Below the daemon's session.min_ttl: refused by the daemon.
	_, err = c.Campaign(ctx, resource(t), "v", redlockd.WithLeadershipTTL(10*time.Millisecond))
	if e := wantKind(t, err, redlockd.ErrInvalidArgument, codes.InvalidArgument); e.Field != "ttl" {
		t.Fatalf("field %q (%v)", e.Field, err)
	}
	_, err = c.Leader(ctx, "")
	wantKind(t, err, redlockd.ErrInvalidArgument, codes.InvalidArgument)
	_, err = c.Resign(ctx, resource(t), "")
	wantKind(t, err, redlockd.ErrInvalidArgument, codes.InvalidArgument)
	for leader, err := range c.Observe(ctx, "") {
		if leader != nil {
			t.Fatalf("observed %v", leader)
		}
		wantKind(t, err, redlockd.ErrInvalidArgument, codes.InvalidArgument)
	}
	_, err = c.Leader(ctx, "bad\x01name")
	if e := wantKind(t, err, redlockd.ErrInvalidArgument, codes.InvalidArgument); e.Field != "name" {
		t.Fatalf("field %q (%v)", e.Field, err)
	}
}

func TestLeadershipEndsWhenTheDaemonStops(t *testing.T) {
	d := newDaemon(t, daemonSpec{})
	c := dial(t, d.addr)
	l, err := c.Campaign(t.Context(), resource(t), "leader", redlockd.WithLeadershipTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.signal("TERM"); err != nil {
		t.Fatal(err)
	}
	if reason := endedWithin(t, l, bound); !strings.Contains(reason, "shutdown grace") {
		t.Fatalf("reason %q", reason)
	}
	if wasLeader, err := l.Resign(context.Background()); err != nil || wasLeader {
		t.Fatalf("resign after the daemon stopped: %v %v", wasLeader, err)
	}
}
