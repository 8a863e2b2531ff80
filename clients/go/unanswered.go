package redlockd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/redlockd/redlockd/clients/go/redlockv1"
)

// An Acquire whose answer never arrived (the context's deadline or
// cancellation fired first, or the connection broke) may still have been
// granted: the daemon answered an instant too late, or the answer was lost
// on the way, and no daemon can know. The lock's token is derived from the
// request id (lock.proto, AcquireRequest.request_id), so the client knows
// it without the answer and releases it in the background.

// unansweredReleaseTimeout bounds the background Release of a lock that an
// unanswered Acquire may have got.
const unansweredReleaseTimeout = time.Second

// derivedToken is the token the daemon gives an exclusive acquisition of
// resource with requestID: the first 128 bits, in lowercase hex, of
// SHA-256("redlockd/v1/token" 0x00 resource 0x00 request_id).
func derivedToken(resource, requestID string) string {
	h := sha256.New()
	h.Write([]byte("redlockd/v1/token\x00"))
	h.Write([]byte(resource))
	h.Write([]byte{0})
	h.Write([]byte(requestID))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// answeredByDaemon says whether an Acquire's err is the daemon's own
// answer, which leaves nothing locked (the daemon releases a grant it
// knows was not received, and every error it answers means nothing is
// held by the call). The daemon's status arrives in trailers, and grpc-go
// fills the grpc.Trailer option only with trailers received (a trailers-
// only answer carries at least its content-type), while the statuses it
// makes itself (the context's deadline or cancellation, a broken
// connection) come with none. A DEADLINE_EXCEEDED or CANCELLED once the
// context is done may be the context's even when trailers came as well
// (the two race inside grpc-go): not the daemon's answer then.
func answeredByDaemon(ctx context.Context, err error, trailer metadata.MD) bool {
	if len(trailer) == 0 {
		return false
	}
	if s, _ := status.FromError(err); serverTimedOut(s) {
		// The daemon's server dropped the call at the deadline: whether
		// it was granted just before is unknown, as for the client's own.
		return false
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		return ctx.Err() == nil
	}
	return true
}

// releases tracks a client's background releases, by token.
type releases struct {
	mu      sync.Mutex
	pending map[string]chan struct{}
	closed  bool
	started int64 // how many were started (for tests)
}

// start releases (resource, token) in the background, bounded by
// unansweredReleaseTimeout, its outcome ignored (and nothing logged: the
// token is a secret).
func (r *releases) start(stub pb.LockServiceClient, resource, token string) {
	done := make(chan struct{})
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if r.pending == nil {
		r.pending = make(map[string]chan struct{})
	}
	r.pending[token] = done
	r.started++
	r.mu.Unlock()
	go func() {
		defer func() {
			r.mu.Lock()
			if r.pending[token] == done {
				delete(r.pending, token)
			}
			r.mu.Unlock()
			close(done)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), unansweredReleaseTimeout)
		defer cancel()
		_, _ = stub.Release(ctx, &pb.ReleaseRequest{Resource: resource, Token: token})
	}()
}

// wait waits for a background release of token still under way, so that a
// retry with the same request id is not released by it (the retry would
// get the same token), or until ctx is done.
func (r *releases) wait(ctx context.Context, token string) error {
	r.mu.Lock()
	done := r.pending[token]
	r.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close lets the releases under way finish (each is bounded) and starts no
// more.
func (r *releases) close() {
	r.mu.Lock()
	r.closed = true
	waiting := make([]chan struct{}, 0, len(r.pending))
	for _, done := range r.pending {
		waiting = append(waiting, done)
	}
	r.mu.Unlock()
	for _, done := range waiting {
		<-done
	}
}

// count is how many background releases were started.
func (r *releases) count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}
