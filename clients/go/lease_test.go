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

// doneWithin waits (bounded) for the lease to end and returns when it did.
func doneWithin(t *testing.T, lease *redlockd.Lease, limit time.Duration) time.Time {
	t.Helper()
	select {
	case <-lease.Done():
		return time.Now()
	case <-time.After(limit):
		t.Fatalf("the lease did not end within %s", limit)
		return time.Time{}
	}
}

// lostReason checks that the lease's Err is an ErrLost (FAILED_PRECONDITION,
// or the stream's status when it broke), that Context was cancelled with it
// as the cause, and returns its reason.
func lostReason(t *testing.T, lease *redlockd.Lease) string {
	t.Helper()
	err := lease.Err()
	var e *redlockd.Error
	if !errors.As(err, &e) || !errors.Is(err, redlockd.ErrLost) || status.Code(err) == codes.OK {
		t.Fatalf("Err() = %v, want an ErrLost *Error with a status code", err)
	}
	if lease.Context().Err() == nil {
		t.Fatal("Done closed but Context is not cancelled")
	}
	if cause := context.Cause(lease.Context()); !errors.Is(cause, redlockd.ErrLost) {
		t.Fatalf("Context's cause is %v", cause)
	}
	return e.Reason
}

func TestHoldIsExtendedAndReleased(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	lease, err := c.Hold(ctx, resource(t), 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Fence() == 0 || lease.Token() == "" || lease.Err() != nil {
		t.Fatalf("a fresh lease: %v, err %v", lease, lease.Err())
	}
	if strings.Contains(fmt.Sprint(lease), lease.Token()) {
		t.Fatal("printing a Lease shows its token")
	}
	// Held past several ttls: the daemon extends it (polled, bounded).
	limit := time.Now().Add(20 * time.Second)
	for lease.Extensions() < 2 {
		if time.Now().After(limit) || lease.Err() != nil {
			t.Fatalf("%d extensions, err %v", lease.Extensions(), lease.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Contention for a held lease is "held elsewhere".
	_, err = c.Acquire(ctx, resource(t), time.Second)
	wantKind(t, err, redlockd.ErrHeld, codes.Aborted)
	v, err := c.Validate(ctx, lease.Lock())
	if err != nil || !v.Held {
		t.Fatalf("validate the lease's lock: %+v %v", v, err)
	}
	held, err := lease.Release(ctx)
	if err != nil || !held {
		t.Fatalf("release: %v %v", held, err)
	}
	doneWithin(t, lease, 5*time.Second)
	if reason := lostReason(t, lease); reason != "released at the client's request" {
		t.Fatalf("reason %q", reason)
	}
	again, err := lease.Release(ctx)
	if err != nil || !again {
		t.Fatalf("a second Release answers the first outcome: %v %v", again, err)
	}
	next, err := c.Acquire(ctx, resource(t), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next.Fence <= lease.Fence() {
		t.Fatalf("fence %d after %d", next.Fence, lease.Fence())
	}
	_, _ = c.Release(ctx, next)
}

func TestHoldWaitsForTheHoldersRelease(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	first, err := c.Hold(ctx, resource(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Hold(ctx, resource(t), 5*time.Second)
	wantKind(t, err, redlockd.ErrHeld, codes.Aborted)
	got := make(chan *redlockd.Lease, 1)
	go func() {
		second, err := c.Hold(ctx, resource(t), 5*time.Second, redlockd.WithWait(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- second
	}()
	if _, err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		return
	}
	if second.Fence() <= first.Fence() {
		t.Fatalf("fence %d after %d", second.Fence(), first.Fence())
	}
	if _, err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A lease that waited longer than its ttl is not lost at birth: its
// validity counts from the grant's arrival (counted from the request's
// send, the wait ate it, and Err said lost before the first extension).
func TestAHoldThatWaitedLongIsNotLostAtOnce(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	const ttl = time.Second
	first, err := c.Hold(ctx, resource(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *redlockd.Lease, 1)
	go func() {
		second, err := c.Hold(ctx, resource(t), ttl, redlockd.WithWait(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- second
	}()
	// The second waits 1.5 ttl before the first lets go.
	time.Sleep(ttl * 3 / 2)
	if _, err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		return
	}
	if err := second.Err(); err != nil {
		t.Fatalf("lost at once after a long wait: %v (remaining %s)", err, time.Until(second.Lock().ValidUntil))
	}
	if second.Fence() <= first.Fence() {
		t.Fatalf("fence %d after %d", second.Fence(), first.Fence())
	}
	if _, err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCancellingHoldsContextEndsTheSessionAndReleases(t *testing.T) {
	c := dial(t, shared.addr)
	ctx, cancel := context.WithCancel(context.Background())
	lease, err := c.Hold(ctx, resource(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	doneWithin(t, lease, 5*time.Second)
	if reason := lostReason(t, lease); !strings.Contains(reason, "CANCELLED") {
		t.Fatalf("reason %q", reason)
	}
	// The daemon released it: another caller gets it (bounded wait).
	lock, err := c.Acquire(context.Background(), resource(t), time.Second, redlockd.WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Release(context.Background(), lock)
}

func TestHoldIsLostWhenThreeMastersStop(t *testing.T) {
	d := newDaemon(t, daemonSpec{})
	c := dial(t, d.addr)
	lease, err := c.Hold(context.Background(), resource(t), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first := lease.Lock()
	for _, m := range d.masters[2:] {
		m.kill()
	}
	at := doneWithin(t, lease, 30*time.Second)
	reason := lostReason(t, lease)
	// The daemon retries the extension until its validity is nearly out;
	// the client's margin is wider, so its own watchdog may fire first.
	if !strings.HasPrefix(reason, "lost: ") && !strings.Contains(reason, "no extension arrived") {
		t.Fatalf("reason %q", reason)
	}
	if !at.Before(lease.Lock().ValidUntil) || !at.Before(first.ValidUntil.Add(lease.Lock().Validity)) {
		t.Fatalf("told at %v, after the validity ended (%v)", at, lease.Lock().ValidUntil)
	}
	if held, err := lease.Release(context.Background()); err != nil || held {
		t.Fatalf("release after lost: %v %v", held, err)
	}
}

func TestHoldIsLostAtOnceWhenTheLockVanishes(t *testing.T) {
	d := newDaemon(t, daemonSpec{})
	c := dial(t, d.addr)
	lease, err := c.Hold(context.Background(), resource(t), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d.masters[2:] {
		if reply, err := m.command("FLUSHALL"); err != nil || reply != "+OK" {
			t.Fatalf("FLUSHALL: %q %v", reply, err)
		}
	}
	doneWithin(t, lease, 30*time.Second)
	if reason := lostReason(t, lease); !strings.HasPrefix(reason, "lost: ") {
		t.Fatalf("reason %q", reason)
	}
}

func TestHoldEndsWhenTheDaemonStopsUnasked(t *testing.T) {
	d := newDaemon(t, daemonSpec{})
	c := dial(t, d.addr)
	lease, err := c.Hold(context.Background(), resource(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.signal("TERM"); err != nil {
		t.Fatal(err)
	}
	doneWithin(t, lease, 30*time.Second)
	if reason := lostReason(t, lease); !strings.Contains(reason, "shutdown grace") {
		t.Fatalf("reason %q", reason)
	}
	if held, err := lease.Release(context.Background()); err != nil || held {
		t.Fatalf("release after the daemon released: %v %v", held, err)
	}
}

func TestHoldEndsBeforeTheValidityWhenTheDaemonFreezes(t *testing.T) {
	d := newDaemon(t, daemonSpec{})
	c := dial(t, d.addr)
	lease, err := c.Hold(context.Background(), resource(t), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.signal("STOP"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.signal("CONT") }()
	at := doneWithin(t, lease, 30*time.Second)
	if reason := lostReason(t, lease); !strings.Contains(reason, "no extension arrived") {
		t.Fatalf("reason %q", reason)
	}
	// Safe: the work was told to stop while the lock was still valid.
	if !at.Before(lease.Lock().ValidUntil) {
		t.Fatalf("told at %v, validity until %v", at, lease.Lock().ValidUntil)
	}
}
