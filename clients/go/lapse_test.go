package redlockd

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A lease and a leadership whose validity has lapsed, as a process sees
// them on resuming from a pause: the watchdog has not run (there is
// none), Done is still open.
func lapsedLease() *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lease{
		resource:     "r",
		ttl:          time.Second,
		cancelStream: func() {},
		ctx:          ctx,
		cancelWork:   cancel,
		done:         make(chan struct{}),
		lock:         Lock{Resource: "r", ValidUntil: time.Now().Add(-time.Millisecond)},
	}
}

func lapsedLeadership() *Leadership {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Leadership{
		name:         "e",
		ttl:          time.Second,
		cancelStream: func() {},
		ctx:          ctx,
		cancelWork:   cancel,
		done:         make(chan struct{}),
		validUntil:   time.Now().Add(-time.Millisecond),
	}
}

func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Err (and the work context's Err) end a lapsed lease on the spot, before
// any timer runs; Done closes with it.
func TestALapsedLeaseEndsWhenAsked(t *testing.T) {
	for name, check := range map[string]func(*Lease) error{
		"Err":           (*Lease).Err,
		"Context().Err": func(l *Lease) error { return l.Context().Err() },
	} {
		l := lapsedLease()
		if closed(l.Done()) {
			t.Fatal("Done closed before anyone asked")
		}
		err := check(l)
		if err == nil {
			t.Fatalf("%s: nil after the validity lapsed", name)
		}
		if !closed(l.Done()) {
			t.Fatalf("%s: Done still open after the lapse was seen", name)
		}
		if lost := l.Err(); !errors.Is(lost, ErrLost) {
			t.Fatalf("%s: Err is %v, want ErrLost", name, lost)
		}
	}
}

// An extension read after the lapse does not bring the lease back.
func TestALateExtensionDoesNotReviveALease(t *testing.T) {
	l := lapsedLease()
	l.extended(Lock{Resource: "r", ValidUntil: time.Now().Add(time.Minute)})
	if !closed(l.Done()) || !errors.Is(l.Err(), ErrLost) {
		t.Fatalf("revived by a late extension: %v", l.Err())
	}
	if l.Extensions() != 0 {
		t.Fatal("the late extension was counted")
	}
}

// The same for a leadership.
func TestALapsedLeadershipEndsWhenAsked(t *testing.T) {
	for name, check := range map[string]func(*Leadership) error{
		"Err":           (*Leadership).Err,
		"Context().Err": func(l *Leadership) error { return l.Context().Err() },
	} {
		l := lapsedLeadership()
		err := check(l)
		if err == nil || !closed(l.Done()) || !errors.Is(l.Err(), ErrLost) {
			t.Fatalf("%s: still leading after the validity lapsed (err %v)", name, err)
		}
	}
}

// A valid lease is left alone by the check.
func TestAValidLeaseIsNotEnded(t *testing.T) {
	l := lapsedLease()
	l.lock.ValidUntil = time.Now().Add(time.Minute)
	if err := l.Err(); err != nil || closed(l.Done()) {
		t.Fatalf("ended while valid: %v", err)
	}
	if err := l.Context().Err(); err != nil {
		t.Fatalf("context ended while valid: %v", err)
	}
}
