// Package redlockd is the Go client of redlockd, a lock service that runs
// the Redlock algorithm over independent Valkey/Redis masters behind a gRPC
// API (proto/redlock/v1/lock.proto and election.proto; the generated stubs
// are in the redlockv1 package).
//
// Dial a daemon, then either call Acquire, Extend, Release and Validate
// yourself, or open a Hold session: the daemon extends the lock while the
// session lasts, and the returned *Lease tells the work done under the lock
// when to stop. Its Done channel closes, and its Context is cancelled, as
// soon as the lock is lost, ended by the daemon, or the session's stream
// ends, or when no extension arrived before the last known validity ran
// out (less a margin). Pass Lease.Fence with every write made under the
// lock and let the protected resource reject smaller fences.
//
// Elections: Campaign stands for an election and blocks until elected; the
// returned *Leadership ends as a Lease does (Done, Context, Err), and its
// Term fences the leader's writes; its Proclaim publishes a new value
// under the same term. Leader reads the current leader and Observe ranges
// over its changes, in (term, value version) order.
//
// Every outcome the daemon reports as a gRPC status code is an *Error that
// works with errors.Is (ErrHeld, ErrNotHeld, ErrUnavailable, ErrLost, ...)
// while status.Code(err) still answers with the code.
//
// After a deadline or cancellation, nothing is left locked: every Acquire
// carries a request id, the lock's token is derived from it, and when the
// call ends without the daemon's answer the client releases what its
// request id may have got, in the background (within a second).
//
// A lock's or leadership's token is a secret: Lock, Lease and Leadership
// never print it.
package redlockd
