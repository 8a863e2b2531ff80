//! redlockd's gRPC contract as Rust code: what the daemon and every Rust
//! client (redlockctl, the test kit, the bench) share.
//!
//! - [`pb`]: messages and the client and server stubs generated from
//!   `proto/redlock/v1/lock.proto` (by `protox` in `build.rs`: no system
//!   `protoc` needed);
//! - [`codec`]: the small-buffer codec the generated code uses;
//! - [`code_name`]: the canonical spelling of a status code, so that the
//!   daemon's metrics and the CLI's messages name codes alike;
//! - [`FILE_DESCRIPTOR_SET`]: the encoded descriptors, for server reflection.

pub mod codec;

/// Code generated from `proto/redlock/v1/lock.proto` at build time.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("redlock.v1");
}

/// The encoded descriptors of `proto/`, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/redlock_v1_descriptor.bin"));

use tonic::Code;

/// The canonical name of a status code (`OK`, `INVALID_ARGUMENT`, ...), as
/// clients in every language spell it: the `outcome` label of the request
/// metrics.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
