//! The client handle and its unary calls on a lock already held: Extend,
//! Release, Validate.

use crate::auth::{AuthChannel, BearerAuth, Stub};
use crate::error::Error;
use crate::lock::{Lock, Validation};
use crate::unanswered::Releases;
use crate::wire::{proto_duration, std_duration};
use redlockd_proto::pb;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::Endpoint;
use tonic::{Response, Status};

/// How long a call may take beyond the wait it asks for, unless
/// [`ClientBuilder::call_timeout`](crate::ClientBuilder::call_timeout) says
/// otherwise (as in the Go, Python and Node clients).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to one redlockd daemon (any replica of a deployment).
///
/// Cheap to clone: clones share the connection (HTTP/2 multiplexes every
/// call and session on it) and the background releases. Make one with
/// [`Client::connect`] or [`Client::builder`].
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), redlockd_client::Error> {
/// use std::time::Duration;
/// use redlockd_client::Client;
///
/// let client = Client::connect("127.0.0.1:50051").await?;
/// let lock = client
///     .acquire("orders/42", Duration::from_secs(10))
///     .wait(Duration::from_secs(5))
///     .await?;
/// println!("fence {}", lock.fence());
/// client.release(&lock).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

/// What the clones of a [`Client`] share.
pub(crate) struct Inner {
    /// The generated client, carrying the bearer token if any.
    pub(crate) stub: Stub,
    /// The connection it is on, for [`Client::channel`].
    pub(crate) channel: AuthChannel,
    /// Where the connection goes, with its TLS settings: for connections
    /// of a lease's own (`Client::connect_anew`).
    pub(crate) endpoint: Endpoint,
    /// The bearer token's interceptor, for those connections.
    pub(crate) auth: BearerAuth,
    /// How long a call may take beyond its wait.
    pub(crate) call_timeout: Duration,
    /// The background releases of unanswered acquires.
    pub(crate) releases: Arc<Releases>,
    /// The address as given, for Debug.
    pub(crate) addr: String,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.inner.addr)
            .field("call_timeout", &self.inner.call_timeout)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Extends the lock: resets its time to live to `ttl` if its token still
    /// holds it on a majority of masters. Returns the lock with its new
    /// validity (same token and fence), counted from when the request was
    /// sent. [`Error::NotHeld`] if it no longer holds it (or its fence can
    /// no longer be vouched for): stop relying on it, acquire anew.
    ///
    /// ```no_run
    /// # use redlockd_client::{Client, Error, Lock};
    /// # async fn demo(client: Client, lock: Lock) -> Result<(), Error> {
    /// use std::time::Duration;
    /// let lock = client.extend(&lock, Duration::from_secs(10)).await?;
    /// println!("valid for {:?} more", lock.remaining());
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lock: &Lock, ttl: Duration) -> Result<Lock, Error> {
        check_identity(lock)?;
        if ttl.is_zero() {
            return Err(Error::invalid("ttl", "must be positive"));
        }
        let message = pb::ExtendRequest {
            resource: lock.resource().to_owned(),
            token: lock.token().to_owned(),
            ttl: Some(proto_duration(ttl)),
        };
        let sent = Instant::now();
        let answer = self
            .unary("Extend", message, |mut stub, request| async move {
                stub.extend(request).await
            })
            .await?;
        let wire = answer.lock.ok_or_else(|| missing("Extend", "lock"))?;
        Ok(Lock::from_wire(wire, sent))
    }

    /// Releases the lock on every master where its token holds it. Returns
    /// `was_held`: `false` means it had already expired or been taken over,
    /// so the work done under it may have overlapped another holder's.
    /// Releasing twice is not an error (the second says `false`).
    ///
    /// ```no_run
    /// # use redlockd_client::{Client, Error, Lock};
    /// # async fn demo(client: Client, lock: Lock) -> Result<(), Error> {
    /// if !client.release(&lock).await? {
    ///     eprintln!("the lock had expired: the work may have overlapped another holder's");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, lock: &Lock) -> Result<bool, Error> {
        check_identity(lock)?;
        let message = pb::ReleaseRequest {
            resource: lock.resource().to_owned(),
            token: lock.token().to_owned(),
        };
        let answer = self
            .unary("Release", message, |mut stub, request| async move {
                stub.release(request).await
            })
            .await?;
        Ok(answer.was_held)
    }

    /// Asks whether the lock (its resource and token) is still the current
    /// holder on a majority, and for how long at least: what a resource
    /// server checks of a client's claim (see [`Lock::from_parts`]).
    ///
    /// ```no_run
    /// # use redlockd_client::{Client, Error, Lock};
    /// # async fn demo(client: Client, lock: Lock) -> Result<(), Error> {
    /// let v = client.validate(&lock).await?;
    /// println!("held: {}, for {:?}", v.held, v.validity);
    /// # Ok(()) }
    /// ```
    pub async fn validate(&self, lock: &Lock) -> Result<Validation, Error> {
        check_identity(lock)?;
        let message = pb::ValidateRequest {
            resource: lock.resource().to_owned(),
            token: lock.token().to_owned(),
        };
        let sent = Instant::now();
        let answer = self
            .unary("Validate", message, |mut stub, request| async move {
                stub.validate(request).await
            })
            .await?;
        let validity = if answer.held {
            std_duration(answer.validity)
        } else {
            Duration::ZERO
        };
        Ok(Validation {
            held: answer.held,
            validity,
            valid_until: sent + validity,
        })
    }

    /// Waits for the background releases of unanswered acquires still
    /// under way (each takes a second at most), then drops
    /// this handle. The connection closes when the last clone, lease and
    /// background release is gone; nothing else needs closing.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) {
    /// client.close().await;
    /// # }
    /// ```
    pub async fn close(self) {
        self.inner.releases.settle_all().await;
    }

    /// The connection to the daemon, carrying the bearer token (if any) on
    /// every call: for the daemon's other services through their generated
    /// clients, such as its `LockAdminService` (inspect, list and
    /// force-release; the admin role) or the standard `grpc.health.v1`
    /// health service. Calls made on it get no deadline unless their
    /// request sets one: set [`tonic::Request::set_timeout`].
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), tonic::Status> {
    /// use redlockd_proto::pb;
    /// use redlockd_proto::pb::lock_admin_service_client::LockAdminServiceClient;
    ///
    /// let mut admin = LockAdminServiceClient::new(client.channel());
    /// let mut request = tonic::Request::new(pb::InspectRequest { resource: "orders/42".into(), ..Default::default() });
    /// request.set_timeout(std::time::Duration::from_secs(5));
    /// let held = admin.inspect(request).await?.into_inner().held;
    /// println!("orders/42 held: {held}");
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> AuthChannel {
        self.inner.channel.clone()
    }

    /// How long a call may take beyond the wait it asks for.
    pub(crate) fn call_timeout(&self) -> Duration {
        self.inner.call_timeout
    }

    /// Sends `message` with a gRPC deadline of the call timeout, and gives
    /// up locally at the same moment should the answer not come.
    async fn unary<M, T, F, Fut>(&self, what: &str, message: M, call: F) -> Result<T, Error>
    where
        F: FnOnce(Stub, tonic::Request<M>) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let limit = self.inner.call_timeout;
        let mut request = tonic::Request::new(message);
        request.set_timeout(limit);
        match tokio::time::timeout(limit, call(self.inner.stub.clone(), request)).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(Error::from_call(what, limit, status)),
            Err(_) => Err(Error::local_deadline(what, limit)),
        }
    }
}

/// Refuses a lock without resource or token before sending.
fn check_identity(lock: &Lock) -> Result<(), Error> {
    if lock.resource().is_empty() {
        return Err(Error::invalid("resource", "must not be empty"));
    }
    if lock.token().is_empty() {
        return Err(Error::invalid("token", "must not be empty"));
    }
    Ok(())
}

/// An answer without a field the contract promises.
pub(crate) fn missing(call: &str, field: &str) -> Error {
    Error::Other(Status::internal(format!(
        "{call}: the daemon's answer has no {field}"
    )))
}
