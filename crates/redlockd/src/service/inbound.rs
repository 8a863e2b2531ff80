//! The request-to-command path without a network: raw protobuf bytes, as a
//! client could send them, decoded, checked by [`RequestBounds`], checked against
//! an [`Identity`]'s namespaces, and turned into the keys the masters would
//! be asked about. It is what the fuzz target (`fuzz/`) and the property
//! tests drive: whatever the bytes, the answer is a command, or a status
//! naming the reason, never a panic.

use super::auth::Identity;
use super::hold::SessionError;
use super::request::RequestBounds;
use crate::pb;
use crate::redlock::LockKeys;
use prost::Message;
use tonic::Status;

/// Which request type the bytes are decoded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    /// `AcquireRequest` (also the first message of a Hold).
    Acquire,
    /// `ExtendRequest`.
    Extend,
    /// `ReleaseRequest`.
    Release,
    /// `ValidateRequest`.
    Validate,
    /// `HoldRequest`.
    Hold,
}

impl Rpc {
    /// Every request type, for picking one from a fuzzer's byte.
    pub const ALL: [Rpc; 5] = [
        Rpc::Acquire,
        Rpc::Extend,
        Rpc::Release,
        Rpc::Validate,
        Rpc::Hold,
    ];
}

/// Bytes that are not the request's protobuf message. INTERNAL (see
/// `status.rs`), with the decoder's message: tonic's codec answers a message
/// it cannot decode so (per the gRPC status code guide), and this path
/// answers as the server would.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct Malformed(#[from] pub(crate) prost::DecodeError);

/// What a valid request would make the engine do: the keys it touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The request type.
    pub rpc: Rpc,
    /// The resource's keys on every master.
    pub keys: LockKeys,
}

/// Decodes `bytes` as `rpc`'s message and checks it as the daemon does:
/// a message that is not protobuf is INTERNAL (`Malformed`), a bad field
/// INVALID_ARGUMENT naming it, a resource outside the namespaces
/// PERMISSION_DENIED.
pub fn to_command(
    rpc: Rpc,
    bytes: &[u8],
    limits: &RequestBounds,
    identity: &Identity,
    key_prefix: &str,
) -> Result<Command, Status> {
    let malformed = |e: prost::DecodeError| Status::from(Malformed(e));
    let resource = match rpc {
        Rpc::Acquire => {
            limits
                .acquire(pb::AcquireRequest::decode(bytes).map_err(malformed)?)?
                .resource
        }
        Rpc::Extend => {
            limits
                .extend(pb::ExtendRequest::decode(bytes).map_err(malformed)?)?
                .resource
        }
        Rpc::Release => {
            let r = pb::ReleaseRequest::decode(bytes).map_err(malformed)?;
            limits.lock_ref(r.resource, &r.token)?.resource
        }
        Rpc::Validate => {
            let r = pb::ValidateRequest::decode(bytes).map_err(malformed)?;
            limits.lock_ref(r.resource, &r.token)?.resource
        }
        Rpc::Hold => match pb::HoldRequest::decode(bytes).map_err(malformed)?.request {
            Some(pb::hold_request::Request::Acquire(a)) => limits.acquire(a)?.resource,
            _ => return Err(SessionError::FirstNotAcquire.into()),
        },
    };
    identity.permit(&resource)?;
    Ok(Command {
        rpc,
        keys: LockKeys::new(key_prefix, &resource),
    })
}
