package redlockd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

func TestDerivedTokenIsTheDaemons(t *testing.T) {
	// lock.proto's recipe, and the daemon's own test vector.
	if got := redlockd.DerivedToken("orders/42", "AAAAAAAAAAAAAAAAAAAAAA"); got != "df346cfde84a8078cf125d1c05366bf4" {
		t.Fatalf("derived token %s", got)
	}
	c := dial(t, shared.addr)
	id := redlockd.NewRequestID()
	lock, err := c.Acquire(context.Background(), resource(t), 5*time.Second, redlockd.WithRequestID(id))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Release(context.Background(), lock) }()
	if lock.Token != redlockd.DerivedToken(resource(t), id) {
		t.Fatal("the daemon's token is not the one derived from the request id")
	}
}

// acquireWithin acquires resource at once (no wait), trying again until
// limit: a lock left behind for its 30 s ttl fails it.
func acquireWithin(t *testing.T, c *redlockd.Client, resource string, limit time.Duration) {
	t.Helper()
	until := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		lock, err := c.Acquire(ctx, resource, 5*time.Second)
		cancel()
		if err == nil {
			_, _ = c.Release(context.Background(), lock)
			return
		}
		if !errors.Is(err, redlockd.ErrHeld) || time.Now().After(until) {
			t.Fatalf("%s still not acquirable after %s: %v", resource, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The reviewer's case: a 1 ms deadline, granted by the daemon but answered
// after the client gave up. Nothing may stay locked for the ttl (30 s).
func TestATinyDeadlineLeavesNothingLocked(t *testing.T) {
	c := dial(t, shared.addr)
	const calls = 50
	granted, deadlines := 0, 0
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		lock, err := c.Acquire(ctx, fmt.Sprintf("%s/%d", resource(t), i), 30*time.Second)
		cancel()
		switch {
		case err == nil:
			granted++
			_, _ = c.Release(context.Background(), lock)
		case errors.Is(err, redlockd.ErrDeadlineExceeded):
			deadlines++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	t.Logf("%d granted, %d deadline exceeded, %d released in the background", granted, deadlines, redlockd.BackgroundReleases(c))
	other := dial(t, shared.addr)
	for i := range calls {
		acquireWithin(t, other, fmt.Sprintf("%s/%d", resource(t), i), 2*time.Second)
	}
}

// The same, made certain: every answer arrives 300 ms after the daemon sent
// it, so each grant (made well within the daemon's cut-off of a 100 ms
// deadline) reaches the client after its deadline. Without the background
// release every one of these resources would stay locked for 30 s.
func TestAGrantAnsweredAfterTheDeadlineLeavesNothingLocked(t *testing.T) {
	c := dial(t, shared.slowAnswers(t, 300*time.Millisecond))
	// Connect first (the handshake's answers are slow too).
	if _, err := c.Validate(context.Background(), redlockd.Lock{Resource: resource(t), Token: "0123456789abcdef0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	const calls = 50
	granted, deadlines := 0, 0
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		lock, err := c.Acquire(ctx, fmt.Sprintf("%s/%d", resource(t), i), 30*time.Second)
		cancel()
		switch {
		case err == nil:
			granted++
			_, _ = c.Release(context.Background(), lock)
		case errors.Is(err, redlockd.ErrDeadlineExceeded):
			deadlines++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	t.Logf("%d granted, %d deadline exceeded, %d released in the background", granted, deadlines, redlockd.BackgroundReleases(c))
	other := dial(t, shared.addr)
	for i := range calls {
		acquireWithin(t, other, fmt.Sprintf("%s/%d", resource(t), i), 2*time.Second)
	}
}

// When the daemon answers, DEADLINE_EXCEEDED included, it has cleaned up:
// the client releases nothing.
func TestTheDaemonsAnswerStartsNoRelease(t *testing.T) {
	c := dial(t, shared.addr)
	lock, err := c.Acquire(context.Background(), resource(t), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Release(context.Background(), lock) }()
	before := redlockd.BackgroundReleases(c)
	_, err = c.Acquire(context.Background(), resource(t), time.Second)
	wantKind(t, err, redlockd.ErrHeld, codes.Aborted)
	if got := redlockd.BackgroundReleases(c); got != before {
		t.Fatalf("%d background releases after the daemon's ABORTED", got-before)
	}
	// DEADLINE_EXCEEDED answered at the daemon's cut-off, 20 ms before the
	// context's deadline. On a loaded machine the answer may come after the
	// deadline, and then cannot be told from a local expiry: a few tries.
	answered := false
	for range 3 {
		before = redlockd.BackgroundReleases(c)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err = c.Acquire(ctx, resource(t), time.Second, redlockd.WithWait(20*time.Second))
		cancel()
		wantKind(t, err, redlockd.ErrDeadlineExceeded, codes.DeadlineExceeded)
		if redlockd.BackgroundReleases(c) == before {
			answered = true
			break
		}
	}
	if !answered {
		t.Fatal("every DEADLINE_EXCEEDED the daemon answered started a release")
	}
	// A local expiry (the context expired before the call) does release.
	before = redlockd.BackgroundReleases(c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	_, err = c.Acquire(ctx, resource(t), time.Second)
	wantKind(t, err, redlockd.ErrDeadlineExceeded, codes.DeadlineExceeded)
	if got := redlockd.BackgroundReleases(c); got != before+1 {
		t.Fatalf("%d background releases after a local expiry, want 1", got-before)
	}
}

// A retry with the same request id after an unanswered call keeps the lock
// it gets: the client waits for its background release of that id first.
func TestARetryWithTheSameRequestIDIsNotReleasedBehindItsBack(t *testing.T) {
	c := dial(t, shared.addr)
	for i := range 10 {
		name := fmt.Sprintf("%s/%d", resource(t), i)
		id := redlockd.NewRequestID()
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		first, err := c.Acquire(ctx, name, 30*time.Second, redlockd.WithRequestID(id))
		cancel()
		if err == nil {
			_, _ = c.Release(context.Background(), first)
			continue
		}
		lock, err := c.Acquire(context.Background(), name, 30*time.Second, redlockd.WithRequestID(id), redlockd.WithWait(5*time.Second))
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
		if v, err := c.Validate(context.Background(), lock); err != nil || !v.Held {
			t.Fatalf("the retry's lock was released behind its back: %+v %v", v, err)
		}
		_, _ = c.Release(context.Background(), lock)
	}
}
