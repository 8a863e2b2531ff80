//! The one place where an outcome becomes a gRPC status code, following the
//! contract in `proto/redlock/v1/lock.proto`: engine outcomes
//! ([`LockError`]), callers turned away ([`Denied`]), bad fields
//! ([`InvalidRequest`]), `Hold` sessions refused or ended
//! ([`SessionError`]), work refused while the daemon drains ([`Draining`]),
//! and bytes that are not protobuf ([`Malformed`]).
//! Everywhere else an outcome is one of these typed errors, turned into a
//! `Status` by the conversions below.

use super::denied::Denied;
use super::drain::Draining;
use super::hold::SessionError;
use super::inbound::Malformed;
use super::request::InvalidRequest;
use crate::redlock::LockError;
use tonic::{Code, Status};

/// The status code for an engine outcome.
pub(crate) fn code(error: &LockError) -> Code {
    match error {
        LockError::Contended(_) | LockError::StillHeld => Code::Aborted,
        LockError::Limit(_) | LockError::Overloaded { .. } | LockError::Backlogged(_) => {
            Code::ResourceExhausted
        }
        LockError::NotHeld(_)
        | LockError::Superseded(_)
        | LockError::FenceUnknown
        | LockError::LimitConflict => Code::FailedPrecondition,
        LockError::NoQuorum(_) | LockError::Expired(_) => Code::Unavailable,
        LockError::DeadlineExceeded => Code::DeadlineExceeded,
        LockError::Cancelled => Code::Cancelled,
        LockError::Token(_) | LockError::Internal(_) => Code::Internal,
    }
}

pub(crate) use redlockd_proto::code_name;

impl From<LockError> for Status {
    fn from(error: LockError) -> Status {
        Status::new(code(&error), error.to_string())
    }
}

/// The status code for a caller turned away before its request is served.
pub(crate) fn denied_code(denied: &Denied) -> Code {
    match denied {
        Denied::NoCredentials | Denied::BadCredentials => Code::Unauthenticated,
        Denied::OutsideNamespaces { .. } | Denied::NotAdmin { .. } => Code::PermissionDenied,
        Denied::RateLimited { .. }
        | Denied::TooManyCalls { .. }
        | Denied::UnauthenticatedCalls { .. }
        | Denied::IdentityQuota { .. } => Code::ResourceExhausted,
    }
}

impl Denied {
    /// As a gRPC status (see [`denied_code`]).
    pub(crate) fn into_status(self) -> Status {
        Status::from(self)
    }
}

impl From<Denied> for Status {
    fn from(denied: Denied) -> Status {
        Status::new(denied_code(&denied), denied.to_string())
    }
}

impl From<InvalidRequest> for Status {
    fn from(error: InvalidRequest) -> Status {
        Status::new(Code::InvalidArgument, error.to_string())
    }
}

/// The status code for a `Hold` session refused or ended with an error.
pub(crate) fn session_code(error: &SessionError) -> Code {
    match error {
        SessionError::TooMany { .. } => Code::ResourceExhausted,
        SessionError::FirstNotAcquire
        | SessionError::FirstNotCampaign
        | SessionError::OnlyRelease
        | SessionError::OnlyResign
        | SessionError::NoFirstMessage { .. }
        | SessionError::TtlTooShort { .. } => Code::InvalidArgument,
    }
}

impl From<SessionError> for Status {
    fn from(error: SessionError) -> Status {
        Status::new(session_code(&error), error.to_string())
    }
}

/// The daemon is draining: UNAVAILABLE, so that the client calls another
/// replica.
impl From<Draining> for Status {
    fn from(error: Draining) -> Status {
        Status::new(Code::Unavailable, error.to_string())
    }
}

/// Bytes that are not protobuf: INTERNAL, as tonic's codec answers them.
impl From<Malformed> for Status {
    fn from(error: Malformed) -> Status {
        Status::new(Code::Internal, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redlock::{Quorum, Tally};

    /// The contract's table, pinned.
    #[test]
    fn contract_codes() {
        let tally = Tally::new(Quorum::majority(5).expect("5 > 0"));
        assert_eq!(code(&LockError::Contended(tally)), Code::Aborted);
        assert_eq!(code(&LockError::NotHeld(tally)), Code::FailedPrecondition);
        assert_eq!(code(&LockError::LimitConflict), Code::FailedPrecondition);
        assert_eq!(code(&LockError::NoQuorum(tally)), Code::Unavailable);
        assert_eq!(code(&LockError::Backlogged(tally)), Code::ResourceExhausted);
        assert_eq!(code(&LockError::Expired(tally)), Code::Unavailable);
        assert_eq!(code(&LockError::DeadlineExceeded), Code::DeadlineExceeded);
        let invalid = InvalidRequest {
            field: "ttl",
            reason: "is required".into(),
        };
        assert_eq!(Status::from(invalid).code(), Code::InvalidArgument);
        assert_eq!(
            Status::from(Denied::BadCredentials).code(),
            Code::Unauthenticated
        );
        let outside = Denied::OutsideNamespaces { client: "a".into() };
        assert_eq!(Status::from(outside).code(), Code::PermissionDenied);
        let limited = Denied::TooManyCalls { max: 1 };
        assert_eq!(Status::from(limited).code(), Code::ResourceExhausted);
        let flooded = Status::from(Denied::UnauthenticatedCalls { max: 1 });
        assert_eq!(flooded.code(), Code::ResourceExhausted);
        assert_eq!(
            flooded.message(),
            "limits.max_unauthenticated_calls reached: too many health or reflection calls open"
        );
        let sessions = Status::from(SessionError::TooMany { max: 7 });
        assert_eq!(sessions.code(), Code::ResourceExhausted);
        assert!(sessions.message().contains("limits.max_sessions = 7"));
        let first = Status::from(SessionError::FirstNotAcquire);
        assert_eq!(first.code(), Code::InvalidArgument);
        assert!(first.message().starts_with("request: "));
        let second = Status::from(SessionError::OnlyRelease);
        assert_eq!(second.code(), Code::InvalidArgument);
        assert!(second.message().starts_with("request: "));
        let silent = Status::from(SessionError::NoFirstMessage {
            after: std::time::Duration::from_secs(10),
        });
        assert_eq!(silent.code(), Code::InvalidArgument);
        assert_eq!(
            silent.message(),
            "request: no `acquire` within session.first_message_timeout = 10s"
        );
        let draining = Status::from(Draining);
        assert_eq!(draining.code(), Code::Unavailable);
        assert!(draining.message().starts_with("draining: "));
        let garbage = <crate::pb::AcquireRequest as prost::Message>::decode(&[0xff][..])
            .expect_err("not protobuf");
        let message = garbage.to_string();
        let malformed = Status::from(Malformed(garbage));
        assert_eq!(malformed.code(), Code::Internal);
        assert_eq!(malformed.message(), message);
    }
}
