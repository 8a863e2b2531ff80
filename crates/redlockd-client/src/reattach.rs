//! Reattaching: a lease that keeps its lock when its Hold session breaks
//! or goes silent, by calling Extend with the lock's token on a connection
//! of its own, until the session is back, the daemon refuses, or the
//! validity (less the stop margin) runs out. The option is
//! `Acquire<Lease>::reattach` (`session.rs`), what the event reader does
//! with it is in `watch.rs`; this file holds the calls.

use crate::auth::Stub;
use crate::client::{missing, Client};
use crate::error::Error;
use crate::lock::Lock;
use crate::wire::{proto_duration, std_duration};
use redlockd_proto::pb;
use std::time::Duration;

/// How long after the session broke the first Extend waits. A daemon that
/// is alive releases a broken session's lock at once, and that release
/// must land before the Extend: an Extend that reached the masters first
/// would succeed just before the release and leave the lease believing in
/// a lock that is gone. A daemon that died releases nothing, and the
/// Extend (through it once it is back, or through any replica behind the
/// same address) re-attaches.
pub(crate) const SETTLE: Duration = Duration::from_millis(200);

/// The pause between failed attempts (each on a new connection).
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The shortest time one attempt may take: a connection that hangs must
/// leave time for another, but a TLS handshake and a quorum's answer need
/// a few round trips.
const ATTEMPT_MIN: Duration = Duration::from_millis(250);

/// What a reattaching lease needs to reach the daemon without its
/// session: the client (for new connections), the lock as granted (its
/// resource and token), and the ttl each Extend asks for.
pub(crate) struct Keeper {
    client: Client,
    lock: Lock,
    ttl: Duration,
}

impl Keeper {
    /// The keeper of `lock`, granted for `ttl`.
    pub(crate) fn new(client: Client, lock: Lock, ttl: Duration) -> Keeper {
        Keeper { client, lock, ttl }
    }

    /// How long one attempt may take when `left` remains before the stop
    /// time: a fifth of the ttl (at least [`ATTEMPT_MIN`]), never past it.
    pub(crate) fn budget(&self, left: Duration) -> Duration {
        left.min((self.ttl / 5).max(ATTEMPT_MIN))
    }

    /// One Extend on `connection` (made anew when there is none), bounded
    /// by `limit` as its gRPC deadline and here; the validity answered.
    pub(crate) async fn extend(
        &self,
        connection: &mut Option<Stub>,
        limit: Duration,
    ) -> Result<Duration, Error> {
        let attempt = async {
            let mut stub = match connection {
                Some(stub) => stub.clone(),
                None => connection.insert(self.client.connect_anew().await?).clone(),
            };
            let mut request = tonic::Request::new(pb::ExtendRequest {
                resource: self.lock.resource().to_owned(),
                token: self.lock.token().to_owned(),
                ttl: Some(proto_duration(self.ttl)),
            });
            request.set_timeout(limit);
            stub.extend(request)
                .await
                .map_err(|status| Error::from_call("Extend", limit, status))
        };
        match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(answer)) => answer
                .into_inner()
                .lock
                .map(|lock| std_duration(lock.validity))
                .ok_or_else(|| missing("Extend", "lock")),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(Error::local_deadline("Extend", limit)),
        }
    }

    /// Releases the lock by its token on a new connection, bounded by
    /// `limit`: `was_held`.
    pub(crate) async fn release(&self, limit: Duration) -> Result<bool, Error> {
        let attempt = async {
            let mut stub = self.client.connect_anew().await?;
            let mut request = tonic::Request::new(pb::ReleaseRequest {
                resource: self.lock.resource().to_owned(),
                token: self.lock.token().to_owned(),
            });
            request.set_timeout(limit);
            stub.release(request)
                .await
                .map_err(|status| Error::from_call("Release", limit, status))
        };
        match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(answer)) => Ok(answer.into_inner().was_held),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(Error::local_deadline("Release", limit)),
        }
    }
}
