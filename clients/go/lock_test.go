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

// dial connects to d with opts and closes the client when the test ends.
func dial(t *testing.T, addr string, opts ...redlockd.DialOption) *redlockd.Client {
	t.Helper()
	c, err := redlockd.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// resource is a name no other test uses.
func resource(t *testing.T) string {
	return "go/" + strings.ReplaceAll(t.Name(), "/", "-")
}

// wantKind fails unless err is an *Error of kind and answers status.Code with code.
func wantKind(t *testing.T, err, kind error, code codes.Code) *redlockd.Error {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("want %v, got %v", kind, err)
	}
	if got := status.Code(err); got != code {
		t.Fatalf("status.Code = %v, want %v (%v)", got, code, err)
	}
	var e *redlockd.Error
	if !errors.As(err, &e) {
		t.Fatalf("not a *redlockd.Error: %T %v", err, err)
	}
	return e
}

func TestAcquireGrantsWithAFenceThatGrows(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	before := time.Now()
	first, err := c.Acquire(ctx, resource(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if first.Fence == 0 || first.Token == "" || first.Resource != resource(t) {
		t.Fatalf("grant: %v (token empty: %v)", first, first.Token == "")
	}
	if first.Validity <= 0 || first.Validity > 5*time.Second {
		t.Fatalf("validity %s outside (0, 5s]", first.Validity)
	}
	if first.ValidUntil.After(before.Add(5 * time.Second)) {
		t.Fatal("validity counted from later than the request's send time")
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v %s", first, first, first, first), first.Token) {
		t.Fatal("printing a Lock shows its token")
	}
	if held, err := c.Release(ctx, first); err != nil || !held {
		t.Fatalf("release: %v %v", held, err)
	}
	second, err := c.Acquire(ctx, resource(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Release(ctx, second) }()
	if second.Fence <= first.Fence {
		t.Fatalf("fence %d after %d", second.Fence, first.Fence)
	}
}

func TestRetryWithTheSameRequestIDGetsTheSameLock(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	id := redlockd.NewRequestID()
	first, err := c.Acquire(ctx, resource(t), 10*time.Second, redlockd.WithRequestID(id))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Release(ctx, first) }()
	again, err := c.Acquire(ctx, resource(t), 10*time.Second, redlockd.WithRequestID(id))
	if err != nil {
		t.Fatal(err)
	}
	if again.Token != first.Token || again.Fence != first.Fence {
		t.Fatalf("retry got another lock: fence %d, first %d", again.Fence, first.Fence)
	}
	_, err = c.Acquire(ctx, resource(t), 10*time.Second)
	wantKind(t, err, redlockd.ErrHeld, codes.Aborted)
}

func TestContentionIsHeldElsewhere(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	lock, err := c.Acquire(ctx, resource(t), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Release(ctx, lock) }()
	_, err = c.Acquire(ctx, resource(t), 10*time.Second)
	e := wantKind(t, err, redlockd.ErrHeld, codes.Aborted)
	if e.Retryable() {
		t.Fatal("held elsewhere is not retryable as is")
	}
	_, err = c.Acquire(ctx, resource(t), 10*time.Second, redlockd.WithWait(200*time.Millisecond))
	wantKind(t, err, redlockd.ErrHeld, codes.Aborted)
}

func TestWaitIsWokenByTheHoldersRelease(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	// A ttl far longer than the wait: only the release can hand it over.
	lock, err := c.Acquire(ctx, resource(t), 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lock redlockd.Lock
		err  error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, resource(t), 5*time.Second, redlockd.WithWait(30*time.Second))
		got <- result{l, err}
	}()
	// The waiter must not get the lock while it is held.
	select {
	case r := <-got:
		t.Fatalf("the waiter finished while the lock was held: %v %v", r.lock, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if held, err := c.Release(ctx, lock); err != nil || !held {
		t.Fatalf("release: %v %v", held, err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer func() { _, _ = c.Release(ctx, r.lock) }()
	if r.lock.Fence <= lock.Fence {
		t.Fatalf("fence %d after %d", r.lock.Fence, lock.Fence)
	}
}

func TestExtendAfterExpiryIsNotHeld(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	lock, err := c.Acquire(ctx, resource(t), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	extended, err := c.Extend(ctx, lock, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if extended.Fence != lock.Fence || extended.Token != lock.Token {
		t.Fatal("Extend changed the fence or the token")
	}
	// Poll until the daemon no longer counts it held (bounded).
	limit := time.Now().Add(10 * time.Second)
	for {
		v, err := c.Validate(ctx, lock)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Held {
			break
		}
		if time.Now().After(limit) {
			t.Fatal("still held 10 s after a 300 ms ttl")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Validate says not held once no validity is left (the drift allowance
	// and its own round counted), a few ms before the keys expire on the
	// masters; an Extend in that gap still finds them on a majority and
	// rightly succeeds. A new holder proves the keys are gone; once it has
	// released, Extend finds nothing.
	next, err := c.Acquire(ctx, lock.Resource, 10*time.Second, redlockd.WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if held, err := c.Release(ctx, next); err != nil || !held {
		t.Fatalf("release of the new holder: %v %v", held, err)
	}
	_, err = c.Extend(ctx, lock, time.Second)
	wantKind(t, err, redlockd.ErrNotHeld, codes.FailedPrecondition)
}

func TestReleaseTwiceSaysNotHeldTheSecondTime(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	lock, err := c.Acquire(ctx, resource(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		held, err := c.Release(ctx, lock)
		if err != nil || held != want {
			t.Fatalf("release %d: was_held %v (want %v), %v", i+1, held, want, err)
		}
	}
}

func TestValidate(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	lock, err := c.Acquire(ctx, resource(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Validate(ctx, lock)
	if err != nil || !v.Held || v.Validity <= 0 || v.Validity > 5*time.Second {
		t.Fatalf("validate the holder: %+v %v", v, err)
	}
	forged := redlockd.Lock{Resource: lock.Resource, Token: "0123456789abcdef0123456789abcdef"}
	if v, err := c.Validate(ctx, forged); err != nil || v.Held {
		t.Fatalf("validate another token: %+v %v", v, err)
	}
	if _, err := c.Release(ctx, lock); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Validate(ctx, lock); err != nil || v.Held {
		t.Fatalf("validate after release: %+v %v", v, err)
	}
}

func TestBadInputNamesTheField(t *testing.T) {
	c := dial(t, shared.addr)
	ctx := context.Background()
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		// Refused by the client before sending.
		{"empty resource", func() error { _, err := c.Acquire(ctx, "", time.Second); return err }, "resource"},
		{"zero ttl", func() error { _, err := c.Acquire(ctx, resource(t), 0); return err }, "ttl"},
		{"negative wait", func() error {
			_, err := c.Acquire(ctx, resource(t), time.Second, redlockd.WithWait(-time.Second))
			return err
		}, "wait"},
		{"empty token", func() error { _, err := c.Release(ctx, redlockd.Lock{Resource: "x"}); return err }, "token"},
		{"hold without resource", func() error { _, err := c.Hold(ctx, "", time.Second); return err }, "resource"},
		// Refused by the daemon (ttl above its max_ttl, a resource past max_resource_len 512).
		{"ttl above max_ttl", func() error { _, err := c.Acquire(ctx, resource(t), 1000*time.Hour); return err }, "ttl"},
		{"resource too long", func() error { _, err := c.Acquire(ctx, strings.Repeat("r", 600), time.Second); return err }, "resource"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := wantKind(t, tc.call(), redlockd.ErrInvalidArgument, codes.InvalidArgument)
			if e.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", e.Field, tc.field, e)
			}
		})
	}
}

func TestAContextDeadlineShorterThanTheWait(t *testing.T) {
	c := dial(t, shared.addr)
	lock, err := c.Acquire(context.Background(), resource(t), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Release(context.Background(), lock) }()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(ctx, resource(t), time.Second, redlockd.WithWait(20*time.Second))
	wantKind(t, err, redlockd.ErrDeadlineExceeded, codes.DeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("not errors.Is context.DeadlineExceeded")
	}
	// Nothing was left locked by that call: the holder still holds it.
	if v, err := c.Validate(context.Background(), lock); err != nil || !v.Held {
		t.Fatalf("the holder lost the lock: %+v %v", v, err)
	}
}
