//! Acquires that end without the daemon's answer.
//!
//! An Acquire whose answer never arrived (this client's deadline ran out,
//! its future was dropped, or the connection broke) may still have been
//! granted: the daemon answered an instant too late, or the answer was lost
//! on the way, and no daemon can know. The lock's token is derived from the
//! request id (lock.proto, `AcquireRequest.request_id`), so the client
//! knows it without the answer and releases it in the background, bounded
//! by [`RELEASE_TIMEOUT`]. When the daemon did answer, with any error,
//! DEADLINE_EXCEEDED included, nothing is held by the call and nothing is
//! sent. A semaphore's permit and a lock on several resources carry no
//! request id: for those the daemon releases a grant it knows was not
//! received (a cancelled call, a dropped connection), and nothing more can
//! be done from here.

use crate::auth::Stub;
use crate::error::Error;
use redlockd_proto::pb;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tonic::{Code, Status};

/// Bounds the background Release of a lock an unanswered Acquire may have
/// got (as in the Go, Python, Node and Java clients).
pub(crate) const RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

/// What starts a shared (read) grant's token, derived ones included.
const SHARED_PREFIX: &str = "s";

/// A fresh request id: 128 bits from the operating system's random source,
/// as 32 lowercase hex characters (the contract takes 22 to 64 characters
/// of `A-Z a-z 0-9 - _` holding at least 128 random bits).
///
/// Every acquire of one resource without a limit sends one (drawn for it
/// unless given with [`Acquire::request_id`](crate::Acquire::request_id)):
/// draw one yourself to retry one logical acquisition through another
/// client or process. Keep it secret, like a token.
///
/// ```
/// let id = redlockd_client::new_request_id()?;
/// assert_eq!(id.len(), 32);
/// # Ok::<(), redlockd_client::Error>(())
/// ```
pub fn new_request_id() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        Error::Other(Status::internal(format!(
            "the operating system's random source failed: {e}"
        )))
    })?;
    Ok(hex::encode(bytes))
}

/// The token the daemon gives the lock of `request_id` on `resource`: the
/// first 128 bits, in lowercase hex, of SHA-256("redlockd/v1/token" 0x00
/// resource 0x00 request_id); a shared (read) grant's starts with `s`.
pub(crate) fn derived_token(resource: &str, request_id: &str, shared: bool) -> String {
    let mut hash = Sha256::new();
    hash.update(b"redlockd/v1/token\0");
    hash.update(resource.as_bytes());
    hash.update([0u8]);
    hash.update(request_id.as_bytes());
    let digest = hex::encode(&hash.finalize()[..16]);
    if shared {
        format!("{SHARED_PREFIX}{digest}")
    } else {
        digest
    }
}

/// The token `request` will have, known before any answer: derived from
/// its request id. None without one (a semaphore's permit, a lock on
/// several resources).
pub(crate) fn token_of(request: &pb::AcquireRequest) -> Option<String> {
    if request.request_id.is_empty() || request.resource.is_empty() || !request.resources.is_empty()
    {
        return None;
    }
    let shared = request.mode == pb::LockMode::Shared as i32;
    Some(derived_token(
        &request.resource,
        &request.request_id,
        shared,
    ))
}

/// Whether a failed call's status is the daemon's own answer rather than
/// one tonic made itself (a broken connection, a local cancellation). The
/// daemon's status arrives in the response's headers or trailers, which
/// carry more than the status (at least the content type); a status tonic
/// makes carries no metadata. A CANCELLED is never taken for an answer.
/// When unsure, false: the caller then releases a token that may hold
/// nothing, which is harmless.
pub(crate) fn answered_by_daemon(status: &Status) -> bool {
    !status.metadata().is_empty() && status.code() != Code::Cancelled
}

/// The background releases under way, by token; each entry says when its
/// release is over.
#[derive(Debug)]
pub(crate) struct Releases {
    pending: Mutex<HashMap<String, watch::Receiver<bool>>>,
    /// Where the releases run: the runtime the client was made on, so that
    /// a future dropped outside any runtime context can still start one.
    runtime: Handle,
}

impl Releases {
    /// Releases run on `runtime`.
    pub(crate) fn new(runtime: Handle) -> Releases {
        Releases {
            pending: Mutex::new(HashMap::new()),
            runtime,
        }
    }

    /// Releases (`resource`, `token`) in the background, bounded by
    /// [`RELEASE_TIMEOUT`], its outcome ignored (and nothing logged: the
    /// token is a secret). Registered before this returns, so a retry with
    /// the same request id right after waits for it.
    pub(crate) fn start(self: &Arc<Self>, stub: Stub, resource: String, token: String) {
        let (done, finished) = watch::channel(false);
        self.lock().insert(token.clone(), finished.clone());
        let releases = Arc::clone(self);
        // On a runtime that is shutting down the task is dropped unrun:
        // the daemon then releases what it knows was not received, and the
        // rest expires with its ttl.
        drop(self.runtime.spawn(async move {
            let mut stub = stub;
            let mut request = tonic::Request::new(pb::ReleaseRequest {
                resource,
                token: token.clone(),
            });
            request.set_timeout(RELEASE_TIMEOUT);
            let _ = tokio::time::timeout(RELEASE_TIMEOUT, stub.release(request)).await;
            let mut pending = releases.lock();
            if pending
                .get(&token)
                .is_some_and(|entry| entry.same_channel(&finished))
            {
                pending.remove(&token);
            }
            drop(pending);
            let _ = done.send(true);
        }));
    }

    /// Waits until no background release of `token` is under way, so that a
    /// retry with the same request id is not released by it (the retry gets
    /// the same token).
    pub(crate) async fn settled(&self, token: &str) {
        let entry = self.lock().get(token).cloned();
        if let Some(mut finished) = entry {
            // An error means the task is gone: over too.
            let _ = finished.wait_for(|done| *done).await;
        }
    }

    /// Waits for every release under way now (each is bounded).
    pub(crate) async fn settle_all(&self) {
        let entries: Vec<_> = self.lock().values().cloned().collect();
        for mut finished in entries {
            let _ = finished.wait_for(|done| *done).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Receiver<bool>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An acquire in flight whose answer has not arrived: dropped while armed
/// (the call's future dropped, its deadline run out, the connection
/// broken), it releases the derived token in the background.
pub(crate) struct Unanswered {
    armed: Option<(Arc<Releases>, Stub, String, String)>,
}

impl Unanswered {
    /// Armed for (`resource`, `token`) when the request has a derived token.
    pub(crate) fn new(
        releases: &Arc<Releases>,
        stub: &Stub,
        resource: &str,
        token: Option<String>,
    ) -> Unanswered {
        Unanswered {
            armed: token.map(|token| {
                (
                    Arc::clone(releases),
                    stub.clone(),
                    resource.to_owned(),
                    token,
                )
            }),
        }
    }

    /// The daemon answered: nothing to release.
    pub(crate) fn answered(mut self) {
        self.armed = None;
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some((releases, stub, resource, token)) = self.armed.take() {
            releases.start(stub, resource, token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lock.proto's recipe, with the daemon's own test vector; a shared
    /// grant's token has the prefix.
    #[test]
    fn derived_token_is_the_daemons() {
        assert_eq!(
            derived_token("orders/42", "AAAAAAAAAAAAAAAAAAAAAA", false),
            "df346cfde84a8078cf125d1c05366bf4"
        );
        assert_eq!(
            derived_token("orders/42", "AAAAAAAAAAAAAAAAAAAAAA", true),
            "sdf346cfde84a8078cf125d1c05366bf4"
        );
    }

    /// Request ids are 32 hex characters, and differ.
    #[test]
    fn request_ids() {
        let a = new_request_id().expect("random");
        let b = new_request_id().expect("random");
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    /// Only a request with a request id on one resource has a derived token.
    #[test]
    fn token_of_request() {
        let plain = pb::AcquireRequest {
            resource: "r".into(),
            request_id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
            ..Default::default()
        };
        assert_eq!(
            token_of(&plain),
            Some(derived_token("r", "AAAAAAAAAAAAAAAAAAAAAA", false))
        );
        let shared = pb::AcquireRequest {
            mode: pb::LockMode::Shared as i32,
            ..plain.clone()
        };
        assert!(token_of(&shared).is_some_and(|t| t.starts_with('s')));
        let without = pb::AcquireRequest {
            request_id: String::new(),
            ..plain.clone()
        };
        assert_eq!(token_of(&without), None);
        let multi = pb::AcquireRequest {
            resource: String::new(),
            resources: vec!["a".into(), "b".into()],
            ..plain
        };
        assert_eq!(token_of(&multi), None);
    }

    /// A status with metadata is the daemon's; one without, or CANCELLED,
    /// is not.
    #[test]
    fn answered_or_not() {
        assert!(!answered_by_daemon(&Status::unavailable("broken pipe")));
        let mut metadata = tonic::metadata::MetadataMap::new();
        metadata.insert("content-type", "application/grpc".parse().expect("ascii"));
        let daemon = Status::with_metadata(Code::DeadlineExceeded, "cut-off", metadata.clone());
        assert!(answered_by_daemon(&daemon));
        let cancelled = Status::with_metadata(Code::Cancelled, "cancelled", metadata);
        assert!(!answered_by_daemon(&cancelled));
    }
}
