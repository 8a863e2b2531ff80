package redlockd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/redlockd/redlockd/clients/go/redlockv1"
)

// Lease is a lock held by an open Hold session, shaped like etcd's
// concurrency.Session. The daemon extends the lock while the session is
// open. Every way the lock can go away closes Done and cancels Context at
// once, with Err saying why:
//   - the daemon sends `lost` (an extension failed);
//   - the daemon sends `released` that nobody asked for (it is stopping);
//   - the stream ends or breaks (daemon gone, connection cut, Hold's
//     context cancelled, Client.Close);
//   - no extension arrived before the last known validity ran out, less a
//     margin (the daemon or the network went quiet);
//   - Release was called.
type Lease struct {
	resource     string
	ttl          time.Duration
	callTimeout  time.Duration
	stream       grpc.BidiStreamingClient[pb.HoldRequest, pb.HoldEvent]
	cancelStream context.CancelFunc
	ctx          context.Context
	cancelWork   context.CancelCauseFunc
	done         chan struct{}

	// mu guards what follows.
	mu         sync.Mutex
	lock       Lock
	extensions int
	err        *Error
	watchdog   *time.Timer
	// releasing is set once Release sent `release`; released closes when
	// its outcome (wasHeld, releaseErr) is known.
	releasing  bool
	released   chan struct{}
	wasHeld    bool
	releaseErr error
	// draining is set when the daemon said it is stopping (the lock is
	// still held and extended until the drain's end).
	draining bool
}

// Draining reports whether the daemon said it is stopping: the lock is
// still held and extended until the drain ends; then it is no longer
// extended and expires with its ttl (lost: Done closes). Finish the work and Release, or be ready to lose the lock.
func (l *Lease) Draining() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draining
}

// noExtension is the Reason of a lease or leadership whose validity ran
// out unrenewed.
const noExtension = "no extension arrived before the validity ran out"

// StopMargin is how long before the last known validity ends a Lease gives
// up when no extension arrived: a tenth of the ttl, from 50 ms to 2 s (as
// redlockctl and the other clients do). It covers an event's time in transit.
func StopMargin(ttl time.Duration) time.Duration {
	return min(2*time.Second, max(50*time.Millisecond, ttl/10))
}

// Hold opens a Hold session and waits for the lock (up to WithWait's wait
// plus the call timeout). The returned Lease holds it until Release, or
// until the lock goes away (see Lease).
//
// ctx bounds the whole session, as a stream's context does: cancelling it
// (or its deadline passing) ends the session, the daemon releases the
// lock, and Done closes. Pass a context that lives as long as the work.
func (c *Client) Hold(ctx context.Context, resource string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	req, cfg, err := acquireRequest("Hold", resource, ttl, opts)
	if err != nil {
		return nil, err
	}
	streamCtx, cancelStream := context.WithCancel(ctx)
	limit := cfg.wait + c.callTimeout
	var timedOut atomic.Bool
	timer := time.AfterFunc(limit, func() {
		timedOut.Store(true)
		cancelStream()
	})
	fail := func(err error) (*Lease, error) {
		timer.Stop()
		cancelStream()
		if timedOut.Load() {
			return nil, newError("Hold", codes.DeadlineExceeded, fmt.Sprintf("no lock within %s", limit), err)
		}
		return nil, err
	}
	stream, err := c.stub.Hold(streamCtx)
	if err != nil {
		return fail(fromRPC("Hold", err))
	}
	// On io.EOF the stream already ended; Recv below says why.
	if err := stream.Send(&pb.HoldRequest{Request: &pb.HoldRequest_Acquire{Acquire: req}}); err != nil && !errors.Is(err, io.EOF) {
		return fail(fromRPC("Hold", err))
	}
	event, err := stream.Recv()
	switch {
	case errors.Is(err, io.EOF):
		return fail(newError("Hold", codes.Unavailable, "the session ended before the lock was acquired", nil))
	case err != nil:
		return fail(fromRPC("Hold", err))
	}
	// The validity counts from the grant's arrival, as an extension's does
	// (StopMargin covers its time in transit): counted from the request's
	// send, a wait ate into it, and a lease that waited more than about half
	// its ttl was declared lost (and released) before its first extension.
	arrived := time.Now()
	acquired := event.GetAcquired()
	if acquired == nil {
		return fail(newError("Hold", codes.Internal, fmt.Sprintf("%T before `acquired`", event.GetEvent()), nil))
	}
	if !timer.Stop() {
		// The limit passed as the grant arrived: the stream is being
		// cancelled, which releases the lock; report the deadline.
		timedOut.Store(true)
		return fail(nil)
	}
	// Not a child of ctx: its cause must always be the lease's Err, which
	// gone sets when ctx's cancellation breaks the stream.
	workCtx, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &Lease{
		resource:     req.GetResource(),
		ttl:          ttl,
		callTimeout:  c.callTimeout,
		stream:       stream,
		cancelStream: cancelStream,
		ctx:          workCtx,
		cancelWork:   cancelWork,
		done:         make(chan struct{}),
		lock:         lockFromWire(acquired, arrived),
	}
	l.mu.Lock()
	l.arm()
	l.mu.Unlock()
	go l.watch()
	return l, nil
}

// Fence is the lock's fencing token: pass it with every write made under the lock.
func (l *Lease) Fence() uint64 { return l.Lock().Fence }

// Token is the lock's secret token (for Validate by a resource server). Never log it.
func (l *Lease) Token() string { return l.Lock().Token }

// Resource is the name locked.
func (l *Lease) Resource() string { return l.resource }

// Lock is the lock as last granted or extended.
func (l *Lease) Lock() Lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lock
}

// Extensions is how many extensions the daemon has made.
func (l *Lease) Extensions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extensions
}

// Done is closed as soon as the lock is no longer held (see Lease).
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err is nil while the lock is held; then an *Error of kind ErrLost whose
// Reason says how the lock went away. It reads the clock: past the last
// known validity (less StopMargin) the lease ends now, even where the
// timer that closes Done has not run yet (a process resumed after a
// pause). Check it right before each action that must not overlap
// another holder's.
func (l *Lease) Err() error {
	l.mu.Lock()
	if l.err == nil && lapsed(l.lock.ValidUntil, l.ttl) {
		l.mu.Unlock()
		l.gone(noExtension, codes.FailedPrecondition)
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	if l.err == nil {
		return nil
	}
	return l.err
}

// Context is cancelled at the moment Done closes, with Err as its cause
// (context.Cause): hand it to the work done under the lock. Its Err reads
// the clock as Lease.Err does.
func (l *Lease) Context() context.Context { return &checkedContext{l.ctx, l.Err} }

// String shows the lease without its token.
func (l *Lease) String() string {
	return fmt.Sprintf("Lease{%s}", l.Lock())
}

// Release gives the lock up: sends `release` and waits for the daemon's
// `released`. wasHeld false means the lock had expired or was already gone
// (the work may have overlapped another holder's); a lease already ended
// answers false at once. When ctx (or, without a deadline, the call
// timeout) runs out first, the session is cancelled, which makes the
// daemon release too, and the error is ErrDeadlineExceeded. Calling it
// again returns the first outcome.
func (l *Lease) Release(ctx context.Context) (wasHeld bool, err error) {
	l.mu.Lock()
	if l.released != nil {
		released := l.released
		l.mu.Unlock()
		select {
		case <-released:
		case <-ctx.Done():
			return false, fromRPC("Release", status.FromContextError(ctx.Err()).Err())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.wasHeld, l.releaseErr
	}
	l.released = make(chan struct{})
	if l.err != nil {
		close(l.released)
		l.mu.Unlock()
		return false, nil
	}
	l.releasing = true
	released := l.released
	l.mu.Unlock()

	// On an error the stream is ending: the watcher reports how.
	_ = l.stream.Send(&pb.HoldRequest{Request: &pb.HoldRequest_Release_{Release: &pb.HoldRequest_Release{}}})
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.callTimeout)
		defer cancel()
	}
	select {
	case <-released:
	case <-ctx.Done():
		l.mu.Lock()
		l.finishRelease(false, fromRPC("Release", status.FromContextError(ctx.Err()).Err()))
		l.mu.Unlock()
		l.gone("released at the client's request (no answer)", codes.FailedPrecondition)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wasHeld, l.releaseErr
}

// watch reads the session's events until the stream ends.
func (l *Lease) watch() {
	for {
		event, err := l.stream.Recv()
		if errors.Is(err, io.EOF) {
			l.gone("the session ended", codes.FailedPrecondition)
			return
		}
		if err != nil {
			s := status.Convert(err)
			l.gone(fmt.Sprintf("the session broke: %s: %s", codeName(s.Code()), s.Message()), s.Code())
			return
		}
		switch e := event.GetEvent().(type) {
		case *pb.HoldEvent_Extended:
			l.extended(lockFromWire(e.Extended, time.Now()))
		case *pb.HoldEvent_Draining_:
			// Not an end: the daemon keeps the lock until the drain ends.
			l.mu.Lock()
			l.draining = true
			l.mu.Unlock()
		case *pb.HoldEvent_Lost_:
			l.gone("lost: "+e.Lost.GetReason(), codes.FailedPrecondition)
		case *pb.HoldEvent_Released_:
			l.mu.Lock()
			requested := l.releasing
			if requested {
				l.finishRelease(e.Released.GetWasHeld(), nil)
			}
			l.mu.Unlock()
			if requested {
				l.gone("released at the client's request", codes.FailedPrecondition)
			} else {
				l.gone("released by the daemon, unrequested", codes.FailedPrecondition)
			}
		default:
			l.gone(fmt.Sprintf("unexpected event %T mid-session", e), codes.Internal)
			return
		}
	}
}

// extended records an extension and restarts the watchdog; one read
// after the last validity lapsed ends the lease instead (a lapse is final).
func (l *Lease) extended(lock Lock) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	if lapsed(l.lock.ValidUntil, l.ttl) {
		l.mu.Unlock()
		l.gone(noExtension, codes.FailedPrecondition)
		return
	}
	defer l.mu.Unlock()
	l.lock = lock
	l.extensions++
	l.arm()
}

// arm (re)starts the watchdog that ends the lease when the validity runs
// out unrenewed, less StopMargin. Call with mu held.
func (l *Lease) arm() {
	if l.watchdog != nil {
		l.watchdog.Stop()
	}
	delay := time.Until(l.lock.ValidUntil) - StopMargin(l.ttl)
	l.watchdog = time.AfterFunc(max(0, delay), func() {
		l.gone(noExtension, codes.FailedPrecondition)
	})
}

// finishRelease records Release's outcome once. Call with mu held.
func (l *Lease) finishRelease(wasHeld bool, err error) {
	select {
	case <-l.released:
		return
	default:
	}
	l.wasHeld, l.releaseErr = wasHeld, err
	close(l.released)
}

// gone ends the lease once, with the first reason: Err is set, Done closes,
// Context is cancelled, and the stream is cancelled (a daemon that still
// hears it releases the lock).
func (l *Lease) gone(reason string, code codes.Code) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	e := lostError(l.resource, reason, code)
	l.err = e
	if l.watchdog != nil {
		l.watchdog.Stop()
	}
	if l.releasing {
		l.finishRelease(false, e)
	}
	l.mu.Unlock()
	l.cancelWork(e)
	close(l.done)
	l.cancelStream()
}
