//! Acquiring: the builder both [`Client::acquire`] and
//! [`Client::hold`](crate::Client::hold) return, and the request it makes.
//! Awaited, an `Acquire<Lock>` sends a unary Acquire (`unary.rs`), an
//! `Acquire<Lease>` opens a Hold session (`session.rs`).

use crate::client::Client;
use crate::error::Error;
use crate::lock::Lock;
use crate::unanswered::new_request_id;
use crate::wire::{optional_duration, proto_duration};
use redlockd_proto::pb;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

/// The future an [`Acquire`] turns into when awaited: boxed, `Send` and
/// `'static`, so it can be spawned or stored.
///
/// ```no_run
/// # async fn demo(client: redlockd_client::Client) {
/// use std::future::IntoFuture;
/// use std::time::Duration;
/// let pending: redlockd_client::BoxFuture<redlockd_client::Lock> =
///     client.acquire("orders/42", Duration::from_secs(10)).into_future();
/// let lock = tokio::spawn(pending).await;
/// # }
/// ```
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'static>>;

/// An acquisition being set up: [`Client::acquire`] returns an
/// `Acquire<Lock>` (a unary Acquire), [`Client::hold`](crate::Client::hold)
/// an `Acquire<Lease>` (a Hold session). Set what you need, then `.await`
/// it (it implements [`IntoFuture`](std::future::IntoFuture)).
///
/// By default it tries once (no wait), as an exclusive lock on one
/// resource, with a fresh request id, and gives up after the call timeout.
///
/// **Dropping the future leaves nothing locked.** A unary acquire carries a
/// request id, and the lock's token is derived from it: when the call ends
/// without the daemon's answer (the future dropped mid-wait, its
/// [`timeout`](Acquire::timeout) run out, the connection broken) the
/// daemon may have granted it an instant before, so the client releases
/// that token in the background, bounded by a second; a retry with the
/// same request id through the same [`Client`] waits for that release
/// first. When the daemon answered, it has released any late grant itself.
/// A Hold's future dropped before its grant is read is released the same
/// way (the daemon also releases what a cancelled session got).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
/// use std::time::Duration;
///
/// let lock = client
///     .acquire("orders/42", Duration::from_secs(10))
///     .wait(Duration::from_secs(5))
///     .owner("billing-worker")
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "an acquisition does nothing until awaited"]
pub struct Acquire<T> {
    pub(crate) client: Client,
    resource: String,
    ttl: Duration,
    more: Vec<String>,
    wait: Duration,
    owner: String,
    request_id: Option<String>,
    limit: u32,
    shared: bool,
    lock_delay: Duration,
    hold_at_least: Duration,
    timeout: Option<Duration>,
    /// A Hold's lease keeps its lock through a broken session (`reattach.rs`).
    reattach: bool,
    output: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Acquire<T> {
    /// Everything but the request id (a secret, like a token).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("resource", &self.resource)
            .field("ttl", &self.ttl)
            .field("resources", &self.more)
            .field("wait", &self.wait)
            .field("owner", &self.owner)
            .field(
                "request_id",
                &self.request_id.as_ref().map(|_| "<redacted>"),
            )
            .field("limit", &self.limit)
            .field("shared", &self.shared)
            .field("lock_delay", &self.lock_delay)
            .field("hold_at_least", &self.hold_at_least)
            .field("timeout", &self.timeout)
            .field("reattach", &self.reattach)
            .finish()
    }
}

impl Client {
    /// Acquires the lock on `resource` for `ttl`: set options on the
    /// returned [`Acquire`], then `.await` it for the [`Lock`].
    /// [`Error::Held`] when the resource stayed held by someone else for
    /// the whole [`wait`](Acquire::wait) (none by default: one try).
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let lock = client.acquire("orders/42", Duration::from_secs(10)).await?;
    /// println!("fence {}", lock.fence());
    /// client.release(&lock).await?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, resource: impl Into<String>, ttl: Duration) -> Acquire<Lock> {
        Acquire::new(self.clone(), resource.into(), ttl)
    }
}

impl<T> Acquire<T> {
    /// An acquisition of `resource` for `ttl` with the defaults.
    pub(crate) fn new(client: Client, resource: String, ttl: Duration) -> Acquire<T> {
        Acquire {
            client,
            resource,
            ttl,
            more: Vec::new(),
            wait: Duration::ZERO,
            owner: String::new(),
            request_id: None,
            limit: 0,
            shared: false,
            lock_delay: Duration::ZERO,
            hold_at_least: Duration::ZERO,
            timeout: None,
            reattach: false,
            output: PhantomData,
        }
    }

    /// This acquisition, reattaching (set by `Acquire<Lease>::reattach`).
    pub(crate) fn with_reattach(mut self) -> Acquire<T> {
        self.reattach = true;
        self
    }

    /// Whether the lease reattaches.
    pub(crate) fn reattaches(&self) -> bool {
        self.reattach
    }

    /// Keeps trying for up to `wait` while someone else holds the resource,
    /// woken as soon as the holder releases (not by polling). Zero (the
    /// default) tries once.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let lock = client
    ///     .acquire("orders/42", Duration::from_secs(10))
    ///     .wait(Duration::from_secs(30))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn wait(mut self, wait: Duration) -> Acquire<T> {
        self.wait = wait;
        self
    }

    /// Names the caller in the daemon's logs and metrics (low cardinality:
    /// a service, not a request); never part of the lock's identity.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let lock = client
    ///     .acquire("orders/42", Duration::from_secs(10))
    ///     .owner("billing-worker")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn owner(mut self, owner: impl Into<String>) -> Acquire<T> {
        self.owner = owner.into();
        self
    }

    /// Makes the acquisition idempotent under your own key: 22 to 64
    /// characters of `A-Z a-z 0-9 - _` holding at least 128 random bits
    /// ([`new_request_id`] draws one). Retried with
    /// the same id, through any daemon, it answers the lock that id already
    /// holds (same token and fence) instead of [`Error::Held`]. Without it a
    /// fresh one is drawn for each acquisition. Not with a
    /// [`limit`](Acquire::limit) above 1 or several
    /// [`resources`](Acquire::resources), which the daemon does not make
    /// idempotent. Keep it secret, like a token.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let id = redlockd_client::new_request_id()?;
    /// let first = client.acquire("orders/42", Duration::from_secs(10)).request_id(&id).await;
    /// // The answer was lost? The same id gets the same lock back.
    /// let lock = client.acquire("orders/42", Duration::from_secs(10)).request_id(&id).await?;
    /// # Ok(()) }
    /// ```
    pub fn request_id(mut self, request_id: impl Into<String>) -> Acquire<T> {
        self.request_id = Some(request_id.into());
        self
    }

    /// A semaphore's permit: at most `limit` holders of the resource at
    /// once, each with its own token and fence ([`Lock::permit`] says
    /// which). 0 or 1: a plain lock. The limit is part of the resource's
    /// identity: while it is held under another limit the call fails at
    /// once with [`Error::NotHeld`].
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let permit = client
    ///     .acquire("exports/slots", Duration::from_secs(60))
    ///     .limit(3)
    ///     .wait(Duration::from_secs(10))
    ///     .await?;
    /// println!("slot {}", permit.permit());
    /// # Ok(()) }
    /// ```
    pub fn limit(mut self, limit: u32) -> Acquire<T> {
        self.limit = limit;
        self
    }

    /// A shared (read) lock: it coexists with other shared holders of the
    /// resource, never with an exclusive one. A waiting exclusive caller
    /// stops new shared grants, so writers are not starved.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let read = client.acquire("catalog", Duration::from_secs(10)).shared().await?;
    /// # Ok(()) }
    /// ```
    pub fn shared(mut self) -> Acquire<T> {
        self.shared = true;
        self
    }

    /// Also locks these resources, all or none, in one grant with one
    /// token: the lock covers the resource given to `acquire` (or `hold`)
    /// followed by each of `more`, in that order, each with its own fence
    /// ([`Lock::resources`]). Deadlock-free whatever the order. Extend,
    /// Release and Validate act on all of them. No name may appear twice.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let transfer = client
    ///     .acquire("accounts/1", Duration::from_secs(10))
    ///     .resources(["accounts/2"])
    ///     .wait(Duration::from_secs(5))
    ///     .await?;
    /// assert_eq!(transfer.resources().len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn resources<I, S>(mut self, more: I) -> Acquire<T>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.more.extend(more.into_iter().map(Into::into));
        self
    }

    /// Lock-delay: if the lock ends by expiry (its holder vanished) rather
    /// than by a release, nobody can acquire the resource until `delay`
    /// after the expiry. At most the daemon's `redlock.max_lock_delay`.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let lock = client
    ///     .acquire("billing/close-month", Duration::from_secs(30))
    ///     .lock_delay(Duration::from_secs(15))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_delay(mut self, delay: Duration) -> Acquire<T> {
        self.lock_delay = delay;
        self
    }

    /// Hold at least: a release before acquisition + `minimum` shortens the
    /// lock to end then instead of deleting it, so a job that finished
    /// early is not run again by a node whose clock is a little off. At most
    /// the daemon's `redlock.max_hold_at_least`.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let lock = client
    ///     .acquire("jobs/nightly", Duration::from_secs(600))
    ///     .hold_at_least(Duration::from_secs(300))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn hold_at_least(mut self, minimum: Duration) -> Acquire<T> {
        self.hold_at_least = minimum;
        self
    }

    /// The longest the call may take until the lock is granted. Unset: the
    /// wait plus the client's call timeout. Shorter than the wait, it ends
    /// the call first with [`Error::DeadlineExceeded`], and nothing is left
    /// locked. A unary acquire also sends it to the daemon as the gRPC
    /// deadline (the daemon then answers DEADLINE_EXCEEDED itself, a moment
    /// before); a Hold does not (it would bound the whole session).
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let lock = client
    ///     .acquire("orders/42", Duration::from_secs(10))
    ///     .wait(Duration::from_secs(30))
    ///     .timeout(Duration::from_secs(2))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Acquire<T> {
        self.timeout = Some(timeout);
        self
    }

    /// The time to live asked for.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The longest the call may take until granted.
    pub(crate) fn limit_of_call(&self) -> Duration {
        self.timeout
            .unwrap_or_else(|| self.wait.saturating_add(self.client.call_timeout()))
    }

    /// The request, checked as far as the client can; a request id drawn
    /// for an acquisition of one resource without a limit.
    pub(crate) fn request(&self) -> Result<pb::AcquireRequest, Error> {
        if self.resource.is_empty() {
            return Err(Error::invalid("resource", "must not be empty"));
        }
        if self.ttl.is_zero() {
            return Err(Error::invalid("ttl", "must be positive"));
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::invalid("timeout", "must be positive"));
        }
        let several = !self.more.is_empty();
        let request_id = match (&self.request_id, self.limit > 1, several) {
            (Some(_), true, _) => {
                return Err(Error::invalid(
                    "request_id",
                    "not supported with a limit above 1 (a semaphore's permit)",
                ))
            }
            (Some(_), _, true) => {
                return Err(Error::invalid(
                    "request_id",
                    "not supported with resources (a lock on several resources)",
                ))
            }
            (Some(id), false, false) => id.clone(),
            (None, false, false) => new_request_id()?,
            (None, _, _) => String::new(),
        };
        let (resource, resources) = if several {
            let all = std::iter::once(self.resource.clone())
                .chain(self.more.iter().cloned())
                .collect();
            (String::new(), all)
        } else {
            (self.resource.clone(), Vec::new())
        };
        let mode = if self.shared {
            pb::LockMode::Shared
        } else {
            pb::LockMode::Exclusive
        };
        Ok(pb::AcquireRequest {
            resource,
            ttl: Some(proto_duration(self.ttl)),
            wait: optional_duration(self.wait),
            owner: self.owner.clone(),
            request_id,
            lock_delay: optional_duration(self.lock_delay),
            hold_at_least: optional_duration(self.hold_at_least),
            resources,
            mode: mode as i32,
            limit: self.limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn client() -> Client {
        Client::builder("127.0.0.1:1")
            .connect_lazy()
            .expect("a lazy client")
    }

    /// The request carries what was set; a request id is drawn for one
    /// resource without a limit, none for a permit or several resources.
    #[tokio::test]
    async fn requests() {
        let c = client().await;
        let ttl = Duration::from_secs(10);
        let plain = c.acquire("r", ttl).request().expect("valid");
        assert_eq!(plain.resource, "r");
        assert_eq!(plain.request_id.len(), 32);
        assert_eq!(plain.wait, None);
        assert_eq!(plain.mode, pb::LockMode::Exclusive as i32);
        let permit = c.acquire("r", ttl).limit(3).request().expect("valid");
        assert_eq!((permit.limit, permit.request_id.as_str()), (3, ""));
        let multi = c
            .acquire("a", ttl)
            .resources(["b", "c"])
            .request()
            .expect("valid");
        assert_eq!(multi.resource, "");
        assert_eq!(multi.resources, ["a", "b", "c"]);
        assert_eq!(multi.request_id, "");
        let shared = c.acquire("r", ttl).shared().request().expect("valid");
        assert_eq!(shared.mode, pb::LockMode::Shared as i32);
        let given = c
            .acquire("r", ttl)
            .request_id("x".repeat(22))
            .request()
            .expect("valid");
        assert_eq!(given.request_id, "x".repeat(22));
    }

    /// What the client can check is refused before sending, naming the
    /// field.
    #[tokio::test]
    async fn refused_before_sending() {
        let c = client().await;
        let ttl = Duration::from_secs(10);
        let field = |a: Acquire<Lock>| {
            a.request()
                .map(drop)
                .expect_err("refused")
                .field()
                .map(str::to_owned)
        };
        assert_eq!(field(c.acquire("", ttl)).as_deref(), Some("resource"));
        assert_eq!(
            field(c.acquire("r", Duration::ZERO)).as_deref(),
            Some("ttl")
        );
        assert_eq!(
            field(c.acquire("r", ttl).limit(2).request_id("x".repeat(22))).as_deref(),
            Some("request_id")
        );
        assert_eq!(
            field(
                c.acquire("r", ttl)
                    .resources(["s"])
                    .request_id("x".repeat(22))
            )
            .as_deref(),
            Some("request_id")
        );
        assert_eq!(
            field(c.acquire("r", ttl).timeout(Duration::ZERO)).as_deref(),
            Some("timeout")
        );
    }

    /// Debug never shows the request id.
    #[tokio::test]
    async fn debug_redacts_the_request_id() {
        let c = client().await;
        let shown = format!(
            "{:?}",
            c.acquire("r", Duration::from_secs(1))
                .request_id("s3cr3t-id-s3cr3t-id-s3cr3t")
        );
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }
}
