//! What can go wrong in redlockctl, each worded for a shell user; `exit.rs`
//! turns each into an exit status.

use nix::sys::signal::Signal;
use tonic::transport::Error as TransportError;
use tonic::{Code, Status};

/// An outcome that ends redlockctl with a message on stderr.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// Bad flags or arguments.
    #[error("{0}")]
    Usage(String),
    /// A file named by a flag (`--cacert`, `--token-file`, ...) cannot be
    /// read or does not hold what it should.
    #[error("{flag} {}: {reason}", path.display())]
    File {
        /// The flag (or variable) that named it.
        flag: String,
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The daemon could not be reached.
    #[error("cannot connect to the daemon at {addr}: {reason}")]
    Connect {
        /// Where it was tried.
        addr: String,
        /// The transport's error, with its causes.
        reason: String,
    },
    /// The connection ended before the call got any answer: the daemon
    /// refused it (as under mutual TLS without an acceptable client
    /// certificate, which TLS 1.3 reports only after the handshake) or went
    /// away.
    #[error(
        "{what}: the daemon closed the connection without answering ({reason}); \
         a daemon that asks for client certificates does so when none, or one it \
         does not trust, is given (--cert, --key)"
    )]
    Closed {
        /// The call.
        what: String,
        /// The transport's error, with its causes.
        reason: String,
    },
    /// The daemon (or the transport) answered a call with a status.
    #[error("{what}: {}", describe(status))]
    Status {
        /// The call, e.g. `acquire "orders/42"`.
        what: String,
        /// The answer.
        status: Status,
    },
    /// The call got no answer within its deadline.
    #[error("{what}: DEADLINE_EXCEEDED: no answer within {limit:?}")]
    TimedOut {
        /// The call.
        what: String,
        /// The deadline it had.
        limit: std::time::Duration,
    },
    /// `run` could not start its command.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The command's name.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A signal arrived while waiting for the lock (before `run`'s command
    /// started).
    #[error("interrupted by {0} while waiting for the lock; nothing is left locked")]
    Interrupted(Signal),
    /// redlockctl itself failed (runtime, signal handlers).
    #[error("{0}")]
    Local(String),
}

impl CtlError {
    /// A call through the client crate that failed. The crate reads a
    /// status tonic made itself when the connection ended before any
    /// answer as UNAVAILABLE, keeping that status (and the transport's
    /// error beneath it) as the source: that is [`CtlError::Closed`], as
    /// for a call of redlockctl's own ([`CtlError::status`]).
    pub fn call(what: impl Into<String>, error: redlockd_client::Error) -> CtlError {
        let what = what.into();
        let ended = std::error::Error::source(error.status())
            .and_then(|source| source.downcast_ref::<Status>())
            .filter(|original| matches!(original.code(), Code::Unknown | Code::Cancelled))
            .and_then(std::error::Error::source)
            .and_then(|source| source.downcast_ref::<TransportError>());
        match ended {
            Some(transport) => CtlError::Closed {
                what,
                reason: chain(transport),
            },
            None => CtlError::Status {
                what,
                status: error.into_status(),
            },
        }
    }

    /// A status answered to `what`.
    pub fn status(what: impl Into<String>, status: Status) -> CtlError {
        let what = what.into();
        if matches!(status.code(), Code::Unknown | Code::Cancelled) {
            let source = std::error::Error::source(&status);
            if let Some(transport) = source.and_then(|s| s.downcast_ref::<TransportError>()) {
                return CtlError::Closed {
                    what,
                    reason: chain(transport),
                };
            }
        }
        CtlError::Status { what, status }
    }
}

/// The name of a status code as the contract spells it (the daemon's own
/// table, so both sides name codes alike).
pub(crate) use redlockd_proto::code_name;

/// `CODE: what it means (the daemon's message)`.
pub(crate) fn describe(status: &Status) -> String {
    let meaning = match status.code() {
        Code::Aborted => "the resource stayed held by someone else for the whole wait",
        Code::FailedPrecondition => "the token no longer holds the lock",
        Code::Unavailable => "too few masters answered in time, or the connection broke",
        Code::DeadlineExceeded => "the call's deadline ran out",
        Code::ResourceExhausted => "a daemon limit was hit",
        Code::InvalidArgument => "the daemon rejected the request",
        Code::Unauthenticated => {
            "the daemon wants a valid bearer token (--token-file or REDLOCK_AUTH_TOKEN) or client certificate"
        }
        Code::PermissionDenied => "this client may not lock that resource",
        _ => "",
    };
    let message = status.message();
    match (meaning.is_empty(), message.is_empty()) {
        (true, true) => code_name(status.code()).to_owned(),
        (true, false) => format!("{}: {message}", code_name(status.code())),
        (false, true) => format!("{}: {meaning}", code_name(status.code())),
        (false, false) => format!("{}: {meaning} ({message})", code_name(status.code())),
    }
}

/// An error and its causes, `a: b: c` (tonic's own text is terse).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
