//! One error type for every call: the kind of outcome the contract names
//! (`proto/redlock/v1/lock.proto`, its status codes), with the gRPC status
//! inside.

use redlockd_proto::code_name;
use tonic::{Code, Status};

/// What went wrong, one variant per outcome the contract documents (the
/// same kinds as the Go, Python, Node and Java clients), each carrying the
/// [`Status`]: the daemon's own, or one this client made (a request it
/// refused before sending, its own deadline, a broken connection, a lost
/// lease). No variant ever contains a lock token.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: redlockd_client::Client) {
/// use std::time::Duration;
/// use redlockd_client::Error;
///
/// match client.acquire("orders/42", Duration::from_secs(10)).await {
///     Ok(lock) => println!("fence {}", lock.fence()),
///     Err(Error::Held(_)) => println!("someone else has it"),
///     Err(e) if e.is_retryable() => println!("try again later: {e}"),
///     Err(e) => eprintln!("{e}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// ABORTED: the resource stayed held by someone else for the whole
    /// `wait`.
    #[error("held elsewhere: {}", .0.message())]
    Held(#[source] Status),
    /// FAILED_PRECONDITION: the token no longer holds the lock (it expired,
    /// was taken over, or was never held); from an acquire with a limit:
    /// the resource is held under another limit.
    #[error("not held: {}", .0.message())]
    NotHeld(#[source] Status),
    /// INVALID_ARGUMENT: a malformed request; [`Error::field`] names the
    /// field. Checked by this client first where it can, then by the daemon.
    #[error("invalid argument: {}", .0.message())]
    InvalidArgument(#[source] Status),
    /// UNAVAILABLE: too few masters answered, the daemon is stopping, or it
    /// cannot be reached; nothing is left locked by the call: safe to retry.
    #[error("unavailable: {}", .0.message())]
    Unavailable(#[source] Status),
    /// DEADLINE_EXCEEDED: the call's deadline ran out first; nothing is left
    /// locked by it (the daemon said so, or the deadline ran out here and
    /// the acquire released what its request id may have got).
    #[error("deadline exceeded: {}", .0.message())]
    DeadlineExceeded(#[source] Status),
    /// CANCELLED, as the daemon answered it; an acquire leaves nothing
    /// locked, as for [`Error::DeadlineExceeded`]. (A call is cancelled
    /// here by dropping its future, which returns nothing; a connection
    /// that ends before the answer is [`Error::Unavailable`].)
    #[error("cancelled: {}", .0.message())]
    Cancelled(#[source] Status),
    /// RESOURCE_EXHAUSTED: a configured limit (waiters, sessions, rate) was
    /// hit, or the daemon is overloaded; back off, or call another replica.
    #[error("resource exhausted: {}", .0.message())]
    ResourceExhausted(#[source] Status),
    /// UNAUTHENTICATED: no bearer token (or client certificate), or one
    /// the daemon does not know.
    #[error("unauthenticated: {}", .0.message())]
    Unauthenticated(#[source] Status),
    /// PERMISSION_DENIED: the resource is outside the caller's namespaces.
    #[error("permission denied: {}", .0.message())]
    PermissionDenied(#[source] Status),
    /// A [`Lease`](crate::Lease)'s lock is gone or no longer guaranteed:
    /// the daemon said `lost` or ended the session unasked, the stream
    /// ended or broke, or no extension came before the validity ran out.
    /// The status's message says which; its code is FAILED_PRECONDITION, or
    /// the stream's own when it broke.
    #[error("lock lost: {}", .0.message())]
    Lost(#[source] Status),
    /// Any other status (INTERNAL, UNKNOWN, UNIMPLEMENTED, ...).
    #[error("{}: {}", code_name(.0.code()), .0.message())]
    Other(#[source] Status),
}

impl Error {
    /// The gRPC status: code, message, metadata.
    ///
    /// ```
    /// use redlockd_client::Error;
    /// let e = Error::from(tonic::Status::aborted("held"));
    /// assert_eq!(e.status().message(), "held");
    /// ```
    pub fn status(&self) -> &Status {
        match self {
            Error::Held(s)
            | Error::NotHeld(s)
            | Error::InvalidArgument(s)
            | Error::Unavailable(s)
            | Error::DeadlineExceeded(s)
            | Error::Cancelled(s)
            | Error::ResourceExhausted(s)
            | Error::Unauthenticated(s)
            | Error::PermissionDenied(s)
            | Error::Lost(s)
            | Error::Other(s) => s,
        }
    }

    /// The status, by value.
    ///
    /// ```
    /// use redlockd_client::Error;
    /// let status = Error::from(tonic::Status::unavailable("no quorum")).into_status();
    /// assert_eq!(status.code(), tonic::Code::Unavailable);
    /// ```
    pub fn into_status(self) -> Status {
        match self {
            Error::Held(s)
            | Error::NotHeld(s)
            | Error::InvalidArgument(s)
            | Error::Unavailable(s)
            | Error::DeadlineExceeded(s)
            | Error::Cancelled(s)
            | Error::ResourceExhausted(s)
            | Error::Unauthenticated(s)
            | Error::PermissionDenied(s)
            | Error::Lost(s)
            | Error::Other(s) => s,
        }
    }

    /// The gRPC status code.
    ///
    /// ```
    /// use redlockd_client::Error;
    /// let e = Error::from(tonic::Status::aborted("held"));
    /// assert_eq!(e.code(), tonic::Code::Aborted);
    /// ```
    pub fn code(&self) -> Code {
        self.status().code()
    }

    /// The offending field of an [`Error::InvalidArgument`] (`resource`,
    /// `ttl`, `request_id`, ...), read from its message, which the daemon
    /// and this client both start with `<field>: `.
    ///
    /// ```
    /// use redlockd_client::Error;
    /// let e = Error::from(tonic::Status::invalid_argument("ttl: must be positive"));
    /// assert_eq!(e.field(), Some("ttl"));
    /// ```
    pub fn field(&self) -> Option<&str> {
        let Error::InvalidArgument(status) = self else {
            return None;
        };
        let (field, _) = status.message().split_once(": ")?;
        let is_name = !field.is_empty()
            && field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        is_name.then_some(field)
    }

    /// Whether the same call may succeed later unchanged (UNAVAILABLE and
    /// RESOURCE_EXHAUSTED, as in the Go client); nothing was left locked.
    ///
    /// ```
    /// use redlockd_client::Error;
    /// assert!(Error::from(tonic::Status::unavailable("no quorum")).is_retryable());
    /// assert!(!Error::from(tonic::Status::aborted("held")).is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable(_) | Error::ResourceExhausted(_))
    }

    /// A request this client refuses before sending it.
    pub(crate) fn invalid(field: &str, reason: impl std::fmt::Display) -> Error {
        Error::InvalidArgument(Status::invalid_argument(format!("{field}: {reason}")))
    }

    /// This client's own deadline ran out before any answer.
    pub(crate) fn local_deadline(what: &str, limit: std::time::Duration) -> Error {
        Error::DeadlineExceeded(Status::deadline_exceeded(format!(
            "{what}: no answer within {limit:?}"
        )))
    }

    /// A failed call's error, as every client names it. tonic enforces the
    /// `grpc-timeout` it sends and reports its own expiry as CANCELLED
    /// ("Timeout expired"): that is this client's deadline,
    /// [`Error::DeadlineExceeded`]. Any other CANCELLED or UNKNOWN that
    /// tonic made itself (no metadata: the daemon did not send it) is the
    /// connection failing before an answer (a refused TLS handshake, a
    /// reset), which gRPC calls UNAVAILABLE; nobody cancels a call here but
    /// by dropping its future.
    pub(crate) fn from_call(what: &str, limit: std::time::Duration, status: Status) -> Error {
        let mut source = std::error::Error::source(&status);
        while let Some(cause) = source {
            if cause.is::<tonic::TimeoutExpired>() {
                return Error::local_deadline(what, limit);
            }
            source = cause.source();
        }
        // The daemon's gRPC server enforces the deadline this client sends
        // (`grpc-timeout`) and, when it runs out there first, answers
        // CANCELLED "Timeout expired": the client's own deadline all the same.
        if status.code() == Code::Cancelled && status.message() == "Timeout expired" {
            return Error::local_deadline(what, limit);
        }
        let transport = matches!(status.code(), Code::Cancelled | Code::Unknown);
        if transport && status.metadata().is_empty() {
            let mut unavailable = Status::unavailable(format!(
                "{what}: the connection ended before an answer: {}",
                status.message()
            ));
            unavailable.set_source(std::sync::Arc::new(status));
            return Error::Unavailable(unavailable);
        }
        Error::from(status)
    }

    /// A Hold session's lock is gone: `code` is FAILED_PRECONDITION, or
    /// the broken stream's own.
    pub(crate) fn lost(resource: &str, reason: &str, code: Code) -> Error {
        Error::Lost(Status::new(
            code,
            format!("the lock on {resource} is no longer held: {reason}"),
        ))
    }
}

impl From<Status> for Error {
    /// The kind of a status, by its code.
    fn from(status: Status) -> Error {
        match status.code() {
            Code::Aborted => Error::Held(status),
            Code::FailedPrecondition => Error::NotHeld(status),
            Code::InvalidArgument => Error::InvalidArgument(status),
            Code::Unavailable => Error::Unavailable(status),
            Code::DeadlineExceeded => Error::DeadlineExceeded(status),
            Code::Cancelled => Error::Cancelled(status),
            Code::ResourceExhausted => Error::ResourceExhausted(status),
            Code::Unauthenticated => Error::Unauthenticated(status),
            Code::PermissionDenied => Error::PermissionDenied(status),
            _ => Error::Other(status),
        }
    }
}

impl From<Error> for Status {
    fn from(error: Error) -> Status {
        error.into_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code the contract names has its own kind; the rest are Other.
    #[test]
    fn kinds_by_code() {
        let kind = |code| std::mem::discriminant(&Error::from(Status::new(code, "m")));
        let expect = |e: Error| std::mem::discriminant(&e);
        let s = || Status::ok("");
        assert_eq!(kind(Code::Aborted), expect(Error::Held(s())));
        assert_eq!(kind(Code::FailedPrecondition), expect(Error::NotHeld(s())));
        assert_eq!(
            kind(Code::InvalidArgument),
            expect(Error::InvalidArgument(s()))
        );
        assert_eq!(kind(Code::Unavailable), expect(Error::Unavailable(s())));
        assert_eq!(
            kind(Code::DeadlineExceeded),
            expect(Error::DeadlineExceeded(s()))
        );
        assert_eq!(kind(Code::Cancelled), expect(Error::Cancelled(s())));
        assert_eq!(
            kind(Code::ResourceExhausted),
            expect(Error::ResourceExhausted(s()))
        );
        assert_eq!(
            kind(Code::Unauthenticated),
            expect(Error::Unauthenticated(s()))
        );
        assert_eq!(
            kind(Code::PermissionDenied),
            expect(Error::PermissionDenied(s()))
        );
        assert_eq!(kind(Code::Internal), expect(Error::Other(s())));
    }

    /// The field is read from "<field>: <reason>", and only for
    /// INVALID_ARGUMENT.
    #[test]
    fn field_from_message() {
        let invalid = |m: &str| Error::from(Status::invalid_argument(m));
        assert_eq!(invalid("request_id: too short").field(), Some("request_id"));
        assert_eq!(
            invalid("resources: [1]: named twice").field(),
            Some("resources")
        );
        assert_eq!(invalid("no field here").field(), None);
        assert_eq!(invalid("two words: x").field(), None);
        assert_eq!(Error::from(Status::aborted("ttl: x")).field(), None);
    }

    /// tonic's own expiry of the deadline it sends is this client's
    /// deadline; a CANCELLED tonic made is the connection's end
    /// (UNAVAILABLE); the daemon's CANCELLED stays CANCELLED.
    #[test]
    fn tonic_timeout_is_a_deadline() {
        let limit = std::time::Duration::from_millis(100);
        let expired = Status::from_error(Box::new(tonic::TimeoutExpired(())));
        assert_eq!(expired.code(), Code::Cancelled);
        let e = Error::from_call("Acquire", limit, expired);
        assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
        let e = Error::from_call("Acquire", limit, Status::cancelled("connection closed"));
        assert!(matches!(e, Error::Unavailable(_)), "{e}");
        let e = Error::from_call("Acquire", limit, Status::unknown("transport error"));
        assert!(matches!(e, Error::Unavailable(_)), "{e}");
        let mut metadata = tonic::metadata::MetadataMap::new();
        metadata.insert("content-type", "application/grpc".parse().expect("ascii"));
        let daemon = Status::with_metadata(Code::Cancelled, "cancelled", metadata);
        let e = Error::from_call("Acquire", limit, daemon);
        assert!(matches!(e, Error::Cancelled(_)), "{e}");
    }

    /// Display names the kind and the message; Other spells the code as
    /// every client does.
    #[test]
    fn display() {
        let e = Error::from(Status::aborted("resource orders/42 is held"));
        assert_eq!(e.to_string(), "held elsewhere: resource orders/42 is held");
        let e = Error::from(Status::internal("boom"));
        assert_eq!(e.to_string(), "INTERNAL: boom");
    }
}
