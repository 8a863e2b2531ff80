package redlockd

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The kinds of outcome, one per gRPC status code the contract documents
// (and ErrLost for a Hold session's end). Test with errors.Is; the *Error
// that carries one also answers status.Code.
var (
	// ErrHeld (ABORTED): the resource stayed held by someone else for the whole wait.
	ErrHeld = errors.New("held elsewhere")
	// ErrNotHeld (FAILED_PRECONDITION): the token no longer holds the lock
	// (it expired, was taken over, or was never held). From
	// Leadership.Proclaim: that term no longer leads (a leadership is a
	// lock the daemon keeps), and the value was not changed.
	ErrNotHeld = errors.New("not held")
	// ErrUnavailable (UNAVAILABLE): too few masters answered, or the daemon
	// is unreachable; nothing is left locked by the call: safe to retry.
	ErrUnavailable = errors.New("unavailable")
	// ErrDeadlineExceeded (DEADLINE_EXCEEDED): the call's deadline ran out
	// first; nothing is left locked by it (whether the daemon answered so, or
	// the context expired first: Acquire then releases what its request id
	// may have got). Also errors.Is context.DeadlineExceeded. The daemon's
	// CANCELLED "Timeout expired" (its server enforcing this client's
	// deadline first) is this kind too.
	ErrDeadlineExceeded = errors.New("deadline exceeded")
	// ErrCanceled (CANCELLED): the caller cancelled the call's context; an
	// Acquire leaves nothing locked, as for ErrDeadlineExceeded. Also
	// errors.Is context.Canceled.
	ErrCanceled = errors.New("canceled")
	// ErrInvalidArgument (INVALID_ARGUMENT): a malformed request; Error.Field names the field.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrResourceExhausted (RESOURCE_EXHAUSTED): a configured limit (waiters,
	// sessions, rate) was hit; retry later.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrUnauthenticated (UNAUTHENTICATED): no bearer token or client
	// certificate, or one no client has.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied (PERMISSION_DENIED): the resource is outside the caller's namespaces.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrLost: a Hold session's lock, or a Campaign session's leadership,
	// is gone or no longer guaranteed (the daemon sent `lost` or an
	// unrequested `released`/`resigned`, the stream ended or broke, no
	// extension came in time, or it was released or resigned on purpose).
	// Error.Reason says which.
	ErrLost = errors.New("lock lost")
	// ErrOther: any other status (INTERNAL, UNKNOWN, ...); see Error.Code.
	ErrOther = errors.New("error")
)

// kinds maps each status code to its kind; a code not listed is ErrOther.
var kinds = map[codes.Code]error{
	codes.Aborted:            ErrHeld,
	codes.FailedPrecondition: ErrNotHeld,
	codes.Unavailable:        ErrUnavailable,
	codes.DeadlineExceeded:   ErrDeadlineExceeded,
	codes.Canceled:           ErrCanceled,
	codes.InvalidArgument:    ErrInvalidArgument,
	codes.ResourceExhausted:  ErrResourceExhausted,
	codes.Unauthenticated:    ErrUnauthenticated,
	codes.PermissionDenied:   ErrPermissionDenied,
}

// Error is what every call of this package returns on failure: the kind of
// outcome (for errors.Is), the gRPC code (for status.Code) and the daemon's
// message. It never contains a lock token.
type Error struct {
	// Op is the call that failed: "Acquire", "Extend", "Release",
	// "Validate", "Hold", "Dial" or "Lease"; for elections "Campaign",
	// "Leader", "Observe", "Resign", "Proclaim" or "Leadership".
	Op string
	// Kind is one of the Err* values above.
	Kind error
	// Code is the gRPC status code (FAILED_PRECONDITION for a lost lock,
	// or the stream's status when it broke).
	Code codes.Code
	// Message is the daemon's status message, or this client's own.
	Message string
	// Field names the offending field of an ErrInvalidArgument, when the
	// message says it ("<field>: <reason>", as the daemon and this client write).
	Field string
	// Reason says how a Hold session's lock, or a Campaign session's
	// leadership, went away (ErrLost only).
	Reason string
	// cause is the underlying error (a gRPC status error), if any.
	cause error
}

// Error says the call, the code and the message.
func (e *Error) Error() string {
	return fmt.Sprintf("redlockd: %s: %s: %s", e.Op, codeName(e.Code), e.Message)
}

// Is makes errors.Is answer for the kind, and for the context errors that
// DEADLINE_EXCEEDED and CANCELLED stand for.
func (e *Error) Is(target error) bool {
	switch target {
	case e.Kind:
		return true
	case context.DeadlineExceeded:
		return e.Kind == ErrDeadlineExceeded
	case context.Canceled:
		return e.Kind == ErrCanceled
	}
	return false
}

// Unwrap returns the underlying gRPC error, if any.
func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus lets status.Code and status.FromError read the code and message.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// Retryable says whether the same call may succeed later unchanged:
// UNAVAILABLE and RESOURCE_EXHAUSTED.
func (e *Error) Retryable() bool {
	return e.Kind == ErrUnavailable || e.Kind == ErrResourceExhausted
}

// fieldPrefix finds the field at the start of "<field>: <reason>".
var fieldPrefix = regexp.MustCompile(`^([A-Za-z_][\w.]*): `)

// newError builds the *Error of a status code; kind and field follow from it.
func newError(op string, code codes.Code, message string, cause error) *Error {
	kind, ok := kinds[code]
	if !ok {
		kind = ErrOther
	}
	e := &Error{Op: op, Kind: kind, Code: code, Message: message, cause: cause}
	if kind == ErrInvalidArgument {
		if m := fieldPrefix.FindStringSubmatch(message); m != nil {
			e.Field = m[1]
		}
	}
	return e
}

// fromRPC turns an error from a gRPC call into an *Error (nil stays nil).
func fromRPC(op string, err error) error {
	if err == nil {
		return nil
	}
	var own *Error
	if errors.As(err, &own) {
		return err
	}
	s, _ := status.FromError(err)
	if serverTimedOut(s) {
		return newError(op, codes.DeadlineExceeded, s.Message(), err)
	}
	return newError(op, s.Code(), s.Message(), err)
}

// serverTimedOut says whether s is the daemon's gRPC server (tonic)
// enforcing the deadline this client sent (grpc-timeout): it answers
// CANCELLED "Timeout expired" when that deadline runs out there before the
// client's own timer fires. It is the caller's deadline all the same (as
// the Rust client reads it), and the daemon dropped the call rather than
// answering it.
func serverTimedOut(s *status.Status) bool {
	return s.Code() == codes.Canceled && s.Message() == "Timeout expired"
}

// invalidArgument is a request this client refuses before sending it.
func invalidArgument(op, field, reason string) *Error {
	return newError(op, codes.InvalidArgument, field+": "+reason, nil)
}

// lostError says that a session's lock is gone, and why.
func lostError(resource, reason string, code codes.Code) *Error {
	return &Error{
		Op:      "Lease",
		Kind:    ErrLost,
		Code:    code,
		Message: fmt.Sprintf("the lock on %s is no longer held: %s", resource, reason),
		Reason:  reason,
	}
}

// codeName spells a code as gRPC's documentation does (FAILED_PRECONDITION).
func codeName(c codes.Code) string {
	if name, ok := codeNames[c]; ok {
		return name
	}
	return fmt.Sprintf("CODE_%d", uint32(c))
}

var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}
