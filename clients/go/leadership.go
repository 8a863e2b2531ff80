package redlockd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/redlockd/redlockd/clients/go/redlockv1"
)

// Leadership is an election won by a Campaign session: the daemon keeps it
// alive while the session is open, as a Lease is for a lock. Every way it
// can end closes Done and cancels Context at once, with Err saying why:
//   - the daemon sends `lost` (an extension failed, an operator
//     force-released it, Client.Resign was called with its token, or the
//     daemon's shutdown grace ran out);
//   - the daemon sends `resigned` that nobody asked for;
//   - the stream ends or breaks (daemon gone, connection cut, Campaign's
//     context cancelled, Client.Close);
//   - no extension arrived before the last known validity ran out, less
//     StopMargin (the daemon or the network went quiet);
//   - Resign was called.
//
// Act as leader only while Done is open, and pass Term with every write a
// leader makes: it is the leadership's fence, strictly greater than every
// earlier leader's.
type Leadership struct {
	name         string
	term         uint64
	token        string
	ttl          time.Duration
	callTimeout  time.Duration
	election     pb.ElectionServiceClient
	stream       grpc.BidiStreamingClient[pb.CampaignRequest, pb.CampaignResponse]
	cancelStream context.CancelFunc
	ctx          context.Context
	cancelWork   context.CancelCauseFunc
	done         chan struct{}

	// mu guards what follows.
	mu         sync.Mutex
	validity   time.Duration
	validUntil time.Time
	extensions int
	err        *Error
	watchdog   *time.Timer
	// resigning is set once Resign sent `resign`; resigned closes when
	// its outcome (wasLeader, resignErr) is known.
	resigning bool
	resigned  chan struct{}
	wasLeader bool
	resignErr error
	// draining is set when the daemon said it is stopping.
	draining bool
	// value is the value published last, and valueVersion its
	// Leader.ValueVersion (0: the campaign's), so that of two Proclaims
	// answered out of order the later one stays.
	value        string
	valueVersion uint64
}

// Campaign stands as a candidate in the election name, publishing value
// (an address, a pod name: what Leader and Observe show of this
// candidate), and blocks until elected: candidates are served first come,
// first served, for as long as it takes. The returned Leadership lasts
// until Resign, or until it goes away (see Leadership).
//
// ctx bounds the whole session, as Hold's does: cancelling it (or its
// deadline passing) while waiting withdraws the candidacy (ErrCanceled or
// ErrDeadlineExceeded), and once elected it ends the leadership (the
// daemon releases it and Done closes). Pass a context that lives as long
// as the leader's work; to give up waiting without ending a leadership,
// cancel it only while Campaign has not returned.
func (c *Client) Campaign(ctx context.Context, name, value string, opts ...CampaignOption) (*Leadership, error) {
	cfg := campaignConfig{ttl: DefaultLeadershipTTL}
	for _, opt := range opts {
		opt(&cfg)
	}
	if name == "" {
		return nil, invalidArgument("Campaign", "name", "must not be empty")
	}
	if cfg.ttl <= 0 {
		return nil, invalidArgument("Campaign", "ttl", "must be positive, got "+cfg.ttl.String())
	}
	streamCtx, cancelStream := context.WithCancel(ctx)
	fail := func(err error) (*Leadership, error) {
		cancelStream()
		return nil, err
	}
	stream, err := c.election.Campaign(streamCtx)
	if err != nil {
		return fail(fromRPC("Campaign", err))
	}
	start := &pb.CampaignRequest_Start{Name: name, Value: value, Ttl: durationpb.New(cfg.ttl)}
	// On io.EOF the stream already ended; Recv below says why.
	if err := stream.Send(&pb.CampaignRequest{Request: &pb.CampaignRequest_Campaign{Campaign: start}}); err != nil && !errors.Is(err, io.EOF) {
		return fail(fromRPC("Campaign", err))
	}
	event, err := stream.Recv()
	switch {
	case errors.Is(err, io.EOF):
		return fail(newError("Campaign", codes.Unavailable, "the session ended before the election", nil))
	case err != nil:
		return fail(fromRPC("Campaign", err))
	}
	elected := event.GetElected()
	if elected == nil {
		return fail(newError("Campaign", codes.Internal, fmt.Sprintf("%T before `elected`", event.GetEvent()), nil))
	}
	if err := ctx.Err(); err != nil {
		// Elected as ctx ended: the cancelled stream resigns.
		return fail(fromRPC("Campaign", status.FromContextError(err).Err()))
	}
	// Not a child of ctx: its cause must always be the leadership's Err,
	// which gone sets when ctx's cancellation breaks the stream.
	workCtx, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &Leadership{
		name:         elected.GetName(),
		value:        elected.GetValue(),
		term:         elected.GetTerm(),
		token:        elected.GetToken(),
		ttl:          cfg.ttl,
		callTimeout:  c.callTimeout,
		election:     c.election,
		stream:       stream,
		cancelStream: cancelStream,
		ctx:          workCtx,
		cancelWork:   cancelWork,
		done:         make(chan struct{}),
	}
	if l.name == "" {
		l.name = name
	}
	l.mu.Lock()
	// The wait may have been long: the validity counts from its arrival,
	// as an extension's does (StopMargin covers its time in transit).
	l.keep(elected.GetValidity().AsDuration(), time.Now())
	l.mu.Unlock()
	go l.watch()
	return l, nil
}

// Name is the election's name.
func (l *Leadership) Name() string { return l.name }

// Value is what this leader publishes (what Leader and Observe show): the
// value it campaigned with, or the last one Proclaim set.
func (l *Leadership) Value() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

// Term is the leadership's fencing token: strictly greater than every
// earlier leader's term of the same election. Pass it with every write.
func (l *Leadership) Term() uint64 { return l.term }

// Token is the leadership's secret (for Client.Resign from elsewhere).
// Never log it.
func (l *Leadership) Token() string { return l.token }

// Validity is the guaranteed validity the daemon last reported.
func (l *Leadership) Validity() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validity
}

// ValidUntil is when the last reported validity ends, counted from when
// the report arrived.
func (l *Leadership) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Remaining is the guaranteed validity left now (0 once it ran out).
func (l *Leadership) Remaining() time.Duration {
	return max(0, time.Until(l.ValidUntil()))
}

// Extensions is how many extensions (`kept`) the daemon has made.
func (l *Leadership) Extensions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extensions
}

// Draining reports whether the daemon said it is stopping: the leadership
// is still kept until the drain ends, then lost. Resign before then and
// campaign again on another replica.
func (l *Leadership) Draining() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draining
}

// Done is closed as soon as this is no longer the leader (see Leadership).
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Err is nil while leading; then an *Error of kind ErrLost whose Reason
// says how the leadership ended. It reads the clock: past the last known
// validity (less StopMargin) the leadership ends now, even where the timer
// that closes Done has not run yet (a process resumed after a pause).
// Check it right before each action only the leader may take.
func (l *Leadership) Err() error {
	l.mu.Lock()
	if l.err == nil && lapsed(l.validUntil, l.ttl) {
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
// (context.Cause): hand it to the leader's work. Its Err reads the clock
// as Leadership.Err does.
func (l *Leadership) Context() context.Context { return &checkedContext{l.ctx, l.Err} }

// String shows the leadership without its token.
func (l *Leadership) String() string {
	return fmt.Sprintf("Leadership{Name: %q, Value: %q, Term: %d, Validity: %s}", l.name, l.Value(), l.term, l.Validity())
}

// GoString shows the leadership without its token (%#v).
func (l *Leadership) GoString() string { return "redlockd." + l.String() }

// Resign ends the leadership: sends `resign` and waits for the daemon's
// `resigned`; the next candidate may be elected at once. wasLeader false
// means the leadership had already expired or been taken (the work may
// have overlapped the next leader's); a leadership already ended answers
// false at once. When ctx (or, without a deadline, the call timeout) runs
// out first, the session is cancelled, which makes the daemon resign too,
// and the error is ErrDeadlineExceeded. Calling it again returns the first
// outcome.
func (l *Leadership) Resign(ctx context.Context) (wasLeader bool, err error) {
	l.mu.Lock()
	if l.resigned != nil {
		resigned := l.resigned
		l.mu.Unlock()
		select {
		case <-resigned:
		case <-ctx.Done():
			return false, fromRPC("Resign", status.FromContextError(ctx.Err()).Err())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.wasLeader, l.resignErr
	}
	l.resigned = make(chan struct{})
	if l.err != nil {
		close(l.resigned)
		l.mu.Unlock()
		return false, nil
	}
	l.resigning = true
	resigned := l.resigned
	l.mu.Unlock()

	// On an error the stream is ending: the watcher reports how.
	_ = l.stream.Send(&pb.CampaignRequest{Request: &pb.CampaignRequest_Resign_{Resign: &pb.CampaignRequest_Resign{}}})
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.callTimeout)
		defer cancel()
	}
	select {
	case <-resigned:
	case <-ctx.Done():
		l.mu.Lock()
		l.finishResign(false, fromRPC("Resign", status.FromContextError(ctx.Err()).Err()))
		l.mu.Unlock()
		l.gone("resigned at the client's request (no answer)", codes.FailedPrecondition)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wasLeader, l.resignErr
}

// Proclaim changes the value this leader publishes (an address it moved
// to, what it serves) without giving up the leadership: the term stays,
// and Leader and Observe show the new value with a higher ValueVersion,
// so standbys and followers learn it without an election. It sends the
// leadership's name, token and term on a majority of masters; on success
// Value is the new value.
//
// A term that no longer leads is refused with ErrNotHeld
// (FAILED_PRECONDITION), the value unchanged where another term leads: the
// leadership was lost or resigned, maybe before this side knew it. A
// Leadership already over (Err not nil) is refused so at once, without a
// call: a leader that has been told it no longer leads must not publish
// as one. ErrUnavailable when too few masters answered: the new value may
// then be seen by some reads and not others until a Proclaim succeeds, and
// proclaiming again is safe. A context without a deadline gets the call
// timeout.
func (l *Leadership) Proclaim(ctx context.Context, value string) error {
	if err := l.Err(); err != nil {
		reason := err.Error()
		var e *Error
		if errors.As(err, &e) {
			reason = e.Reason
		}
		return newError("Proclaim", codes.FailedPrecondition,
			fmt.Sprintf("the leadership of %s is over: %s", l.name, reason), nil)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.callTimeout)
		defer cancel()
	}
	resp, err := l.election.Proclaim(ctx, &pb.ProclaimRequest{Name: l.name, Token: l.token, Term: l.term, Value: value})
	if err != nil {
		return fromRPC("Proclaim", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := resp.GetValueVersion(); v >= l.valueVersion {
		l.value, l.valueVersion = value, v
	}
	return nil
}

// watch reads the session's events until the stream ends.
func (l *Leadership) watch() {
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
		case *pb.CampaignResponse_Kept:
			l.mu.Lock()
			if l.err == nil && lapsed(l.validUntil, l.ttl) {
				// Read after the last validity lapsed: a lapse is final.
				l.mu.Unlock()
				l.gone(noExtension, codes.FailedPrecondition)
				continue
			}
			if l.err == nil {
				l.extensions++
				l.keep(e.Kept.GetValidity().AsDuration(), time.Now())
			}
			l.mu.Unlock()
		case *pb.CampaignResponse_Draining_:
			// Not an end: the daemon keeps the leadership until the drain ends.
			l.mu.Lock()
			l.draining = true
			l.mu.Unlock()
		case *pb.CampaignResponse_Lost_:
			l.gone("lost: "+e.Lost.GetReason(), codes.FailedPrecondition)
		case *pb.CampaignResponse_Resigned_:
			l.mu.Lock()
			requested := l.resigning
			if requested {
				l.finishResign(e.Resigned.GetWasLeader(), nil)
			}
			l.mu.Unlock()
			if requested {
				l.gone("resigned at the client's request", codes.FailedPrecondition)
			} else {
				l.gone("resigned by the daemon, unrequested", codes.FailedPrecondition)
			}
		default:
			l.gone(fmt.Sprintf("unexpected event %T mid-session", e), codes.Internal)
			return
		}
	}
}

// keep records a validity that counts from at, and (re)starts the
// watchdog that ends the leadership when it runs out unrenewed, less
// StopMargin. Call with mu held.
func (l *Leadership) keep(validity time.Duration, at time.Time) {
	l.validity, l.validUntil = validity, at.Add(validity)
	if l.watchdog != nil {
		l.watchdog.Stop()
	}
	delay := time.Until(l.validUntil) - StopMargin(l.ttl)
	l.watchdog = time.AfterFunc(max(0, delay), func() {
		l.gone(noExtension, codes.FailedPrecondition)
	})
}

// finishResign records Resign's outcome once. Call with mu held.
func (l *Leadership) finishResign(wasLeader bool, err error) {
	select {
	case <-l.resigned:
		return
	default:
	}
	l.wasLeader, l.resignErr = wasLeader, err
	close(l.resigned)
}

// gone ends the leadership once, with the first reason: Err is set, Done
// closes, Context is cancelled, and the stream is cancelled (a daemon that
// still hears it resigns).
func (l *Leadership) gone(reason string, code codes.Code) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	e := &Error{
		Op:      "Leadership",
		Kind:    ErrLost,
		Code:    code,
		Message: fmt.Sprintf("the leadership of %s is over: %s", l.name, reason),
		Reason:  reason,
	}
	l.err = e
	if l.watchdog != nil {
		l.watchdog.Stop()
	}
	if l.resigning {
		l.finishResign(false, e)
	}
	l.mu.Unlock()
	l.cancelWork(e)
	close(l.done)
	l.cancelStream()
}
