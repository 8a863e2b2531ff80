package redlockd

import (
	"fmt"
	"time"

	pb "github.com/redlockd/redlockd/clients/go/redlockv1"
)

// Lock is a granted lock as the daemon describes it, with its validity
// placed on this process's monotonic clock. Token is a secret: String and
// GoString leave it out, so printing a Lock never logs it.
type Lock struct {
	// Resource is the name locked.
	Resource string
	// Token is the opaque proof of ownership, needed to extend, release or
	// validate. Never log it.
	Token string
	// Fence is strictly greater than every earlier holder's fence of the
	// same resource: pass it to the resource you protect.
	Fence uint64
	// Validity is the guaranteed validity the daemon reported.
	Validity time.Duration
	// ValidUntil is when that validity ends, counted from the moment the
	// request was sent (time.Now carries a monotonic reading), so the time
	// spent in transit is never counted twice in the caller's favour.
	ValidUntil time.Time
}

// Remaining is the guaranteed validity left now (0 once it ran out).
func (l Lock) Remaining() time.Duration {
	return max(0, time.Until(l.ValidUntil))
}

// String shows the lock without its token.
func (l Lock) String() string {
	return fmt.Sprintf("Lock{Resource: %q, Fence: %d, Validity: %s}", l.Resource, l.Fence, l.Validity)
}

// GoString shows the lock without its token (%#v).
func (l Lock) GoString() string { return "redlockd." + l.String() }

// lockFromWire converts the contract's Lock, its validity counted from sent.
func lockFromWire(w *pb.Lock, sent time.Time) Lock {
	validity := w.GetValidity().AsDuration()
	return Lock{
		Resource:   w.GetResource(),
		Token:      w.GetToken(),
		Fence:      w.GetFence(),
		Validity:   validity,
		ValidUntil: sent.Add(validity),
	}
}

// Validation is Validate's answer.
type Validation struct {
	// Held says whether the token is still the current holder on a majority.
	Held bool
	// Validity is the remaining guaranteed validity when held.
	Validity time.Duration
	// ValidUntil is when that validity ends, counted from the request's send time.
	ValidUntil time.Time
}
