//! The floor's answers: a grant shaped like the daemon's for every
//! `Acquire`, `was_held: true` for every `Release`, UNIMPLEMENTED for the
//! rest. Nothing is checked or remembered beyond a fence counter: the cost
//! left is tonic's, h2's, the codec's and tokio's.

use redlockd_proto::pb::lock_service_server::LockService;
use redlockd_proto::pb::{
    AcquireRequest, AcquireResponse, ExtendRequest, ExtendResponse, HoldEvent, HoldRequest, Lock,
    ReleaseRequest, ReleaseResponse, ValidateRequest, ValidateResponse,
};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

/// A token of a plain grant's length (the daemon's: 128 random bits as 32
/// lowercase hex characters), so that answers weigh what the daemon's do.
const TOKEN: &str = "00112233445566778899aabbccddeeff";

/// The lease when a request names none (W1 always names 10 s).
const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// The canned lock service; its only state is the next fence.
#[derive(Debug, Default)]
pub(crate) struct Floor {
    fences: AtomicU64,
}

/// The validity a daemon would answer for `ttl`: less the default drift
/// allowance (`ttl * 0.01 + 2 ms`), so that the Duration carries nanos as
/// a real grant's does.
fn validity(ttl: Duration) -> prost_types::Duration {
    let left = ttl.saturating_sub(ttl / 100 + Duration::from_millis(2));
    prost_types::Duration {
        seconds: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(left.subsec_nanos()).unwrap_or(0),
    }
}

/// The requested ttl, or [`DEFAULT_TTL`] when absent or negative.
fn ttl(request: &AcquireRequest) -> Duration {
    request
        .ttl
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or(DEFAULT_TTL)
}

/// Why a method answers UNIMPLEMENTED.
fn unimplemented(method: &str) -> Status {
    Status::unimplemented(format!(
        "the gRPC floor answers Acquire and Release only, not {method}"
    ))
}

#[tonic::async_trait]
impl LockService for Floor {
    async fn acquire(
        &self,
        request: Request<AcquireRequest>,
    ) -> Result<Response<AcquireResponse>, Status> {
        let request = request.into_inner();
        let validity = validity(ttl(&request));
        let lock = Lock {
            resource: request.resource,
            token: TOKEN.to_owned(),
            fence: self.fences.fetch_add(1, Ordering::Relaxed) + 1,
            validity: Some(validity),
            ..Lock::default()
        };
        Ok(Response::new(AcquireResponse { lock: Some(lock) }))
    }

    async fn extend(
        &self,
        _request: Request<ExtendRequest>,
    ) -> Result<Response<ExtendResponse>, Status> {
        Err(unimplemented("Extend"))
    }

    async fn release(
        &self,
        _request: Request<ReleaseRequest>,
    ) -> Result<Response<ReleaseResponse>, Status> {
        Ok(Response::new(ReleaseResponse { was_held: true }))
    }

    async fn validate(
        &self,
        _request: Request<ValidateRequest>,
    ) -> Result<Response<ValidateResponse>, Status> {
        Err(unimplemented("Validate"))
    }

    type HoldStream = Pin<Box<dyn Stream<Item = Result<HoldEvent, Status>> + Send>>;

    async fn hold(
        &self,
        _request: Request<Streaming<HoldRequest>>,
    ) -> Result<Response<Self::HoldStream>, Status> {
        Err(unimplemented("Hold"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 10 s lease answers 9.898 s, nanos and all, as the daemon's would
    /// (less its time at the masters).
    #[test]
    fn validity_is_less_the_drift_allowance() {
        let v = validity(Duration::from_secs(10));
        assert_eq!((v.seconds, v.nanos), (9, 898_000_000));
    }

    /// The token has the daemon's plain-token shape.
    #[test]
    fn token_is_a_plain_tokens_length() {
        assert_eq!(TOKEN.len(), 32);
        assert!(TOKEN
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }
}
