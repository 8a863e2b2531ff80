//! How a lease ended ([`End`], set once by whichever side saw it first),
//! and that end in words: the [`Error::Lost`] a holder gets.

use crate::error::Error;
use tonic::{Code, Status};

/// How a session ended (set once, by whichever side saw it first).
#[derive(Debug, Clone)]
pub(crate) enum End {
    /// The daemon answered `released`.
    Released {
        /// Whether the lock was still held on a majority.
        was_held: bool,
        /// Whether this side asked for it (release or drop).
        requested: bool,
    },
    /// Gone without a release answered.
    Gone {
        /// Why, in words.
        reason: String,
        /// The broken stream's status, if it broke.
        status: Option<Status>,
        /// Whether the daemon said so (`lost`, a refused Extend): then
        /// nothing is left to release.
        gone: bool,
    },
}

impl End {
    /// Ended without the daemon's word: the lock may still be held.
    pub(crate) fn unconfirmed(reason: impl Into<String>) -> End {
        End::Gone {
            reason: reason.into(),
            status: None,
            gone: false,
        }
    }

    /// The daemon said the lock is no longer this lease's.
    pub(crate) fn confirmed(reason: impl Into<String>) -> End {
        End::Gone {
            reason: reason.into(),
            status: None,
            gone: true,
        }
    }

    /// The stream broke with `status`.
    pub(crate) fn broke(reason: impl Into<String>, status: Status) -> End {
        End::Gone {
            reason: reason.into(),
            status: Some(status),
            gone: false,
        }
    }

    /// Whether the daemon said the lock is no longer this lease's.
    pub(crate) fn gone(&self) -> bool {
        match self {
            End::Released { .. } => true,
            End::Gone { gone, .. } => *gone,
        }
    }
}

/// The error that says how the lease on `resource` ended (`None`: the
/// session is over and nobody said how).
pub(crate) fn lost_error(resource: &str, end: Option<End>) -> Error {
    let code = match &end {
        Some(End::Gone {
            status: Some(status),
            ..
        }) => status.code(),
        _ => Code::FailedPrecondition,
    };
    Error::lost(resource, &reason_of(end.as_ref()), code)
}

/// How the lease ended, in words.
pub(crate) fn reason_of(end: Option<&End>) -> String {
    match end {
        Some(End::Released {
            requested: true, ..
        }) => "released at the client's request".to_owned(),
        Some(End::Released {
            requested: false, ..
        }) => "released by the daemon, unrequested (it is stopping)".to_owned(),
        Some(End::Gone { reason, .. }) => reason.clone(),
        None => "the session ended".to_owned(),
    }
}
