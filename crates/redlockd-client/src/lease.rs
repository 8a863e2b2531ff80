//! A lock held by a Hold session, as its holder sees it: [`Lease`]. The
//! state it shares with the task reading the session's events is
//! [`Shared`] (`validity.rs`).

use crate::end::End;
use crate::error::Error;
use crate::events::{LeaseEnd, LeaseEvents};
use crate::lock::Lock;
use crate::reattach::Keeper;
use crate::validity::Shared;
use redlockd_proto::pb;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// A lock held by an open Hold session: the daemon extends it while the
/// session lasts. Made by awaiting [`Client::hold`](crate::Client::hold).
///
/// Every way the lock can go away ends the lease at once, with the reason:
/// - the daemon sends `lost` (an extension failed; an operator's
///   force-release);
/// - the daemon sends `released` nobody asked for (it is stopping);
/// - the stream ends or breaks (daemon gone, connection cut);
/// - no extension arrived before the last known validity ran out, less
///   [`stop_margin`](crate::stop_margin) (the daemon or the network went
///   quiet; the process was paused).
///
/// [`Lease::lost`] is a future that resolves then; [`Lease::check`] says
/// so at any step of the work. Dropping the lease ends the session (the
/// request stream is half-closed, an orderly end: the daemon releases the
/// lock); [`Lease::release`] does the same and says whether it was still
/// held. `Debug` leaves the token out.
///
/// # Examples
///
/// ```no_run
/// # async fn write(_: u64) {}
/// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
/// use std::time::Duration;
///
/// let lease = client
///     .hold("orders/42", Duration::from_secs(10))
///     .wait(Duration::from_secs(5))
///     .await?;
/// tokio::select! {
///     () = write(lease.fence()) => {}
///     lost = lease.lost() => return Err(lost),
/// }
/// lease.release().await?;
/// # Ok(()) }
/// ```
pub struct Lease {
    shared: Arc<Shared>,
    /// The lock as granted: resource(s), token, fence, permit.
    granted: Lock,
    /// The session's request stream: dropping it half-closes the session.
    requests: mpsc::Sender<pb::HoldRequest>,
    /// Dropped with the lease: tells the event reader to wind down.
    _dropped: oneshot::Sender<()>,
    /// How long a release waits for the daemon's answer.
    call_timeout: Duration,
    /// Set when the lease reattaches: its Release calls.
    keeper: Option<Arc<Keeper>>,
}

impl Lease {
    /// A lease on `granted`, its session's requests sent on `requests`.
    pub(crate) fn new(
        shared: Arc<Shared>,
        granted: Lock,
        requests: mpsc::Sender<pb::HoldRequest>,
        dropped: oneshot::Sender<()>,
        call_timeout: Duration,
        keeper: Option<Arc<Keeper>>,
    ) -> Lease {
        Lease {
            shared,
            granted,
            requests,
            _dropped: dropped,
            call_timeout,
            keeper,
        }
    }

    /// The fencing token: pass it with every write made under the lock and
    /// let the resource reject smaller ones.
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// println!("writing with fence {}", lease.fence());
    /// # }
    /// ```
    pub fn fence(&self) -> u64 {
        self.granted.fence()
    }

    /// The resource locked (the first one of a lock on several resources).
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// println!("holding {}", lease.resource());
    /// # }
    /// ```
    pub fn resource(&self) -> &str {
        self.granted.resource()
    }

    /// The lock's secret token (for a resource server's
    /// [`Client::validate`](crate::Client::validate)). Never log it.
    ///
    /// ```no_run
    /// # fn hand_over(_: &str) {}
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// hand_over(lease.token());
    /// # }
    /// ```
    pub fn token(&self) -> &str {
        self.granted.token()
    }

    /// The lock as last granted or extended: its validity and
    /// [`valid_until`](Lock::valid_until) as the session's events moved
    /// them.
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// let lock = lease.lock();
    /// println!("{:?} left", lock.remaining());
    /// # }
    /// ```
    pub fn lock(&self) -> Lock {
        let now = self.shared.snapshot();
        self.granted.with_validity(now.validity, now.valid_until)
    }

    /// How many extensions the daemon has made.
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// println!("extended {} times", lease.extensions());
    /// # }
    /// ```
    pub fn extensions(&self) -> u64 {
        self.shared.snapshot().extensions
    }

    /// Whether the daemon said it is stopping: the lock is still held and
    /// extended until its drain ends; then the daemon stops extending it and
    /// the lease ends (`lost`; the lock expires with its ttl).
    /// Finish the work and release, or be ready to lose the lock.
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// if lease.is_draining() {
    ///     println!("finishing up: the daemon is stopping");
    /// }
    /// # }
    /// ```
    pub fn is_draining(&self) -> bool {
        self.shared.snapshot().draining
    }

    /// `Ok` while the lock is held; [`Error::Lost`] once it is gone (see
    /// [`Lease`]), including when its validity has just run out on this
    /// process's clock with no extension. Call it before each step of the
    /// work done under the lock.
    ///
    /// ```no_run
    /// # fn step(_: u64) {}
    /// # async fn demo(lease: redlockd_client::Lease) -> Result<(), redlockd_client::Error> {
    /// for _ in 0..10 {
    ///     lease.check()?;
    ///     step(lease.fence());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        self.shared.lapse_if_due();
        match self.shared.ended() {
            None => Ok(()),
            end => Err(self.shared.lost_error(end)),
        }
    }

    /// A future that resolves, with [`Error::Lost`] saying why, once the
    /// lock is gone (see [`Lease`]); at once if it already is. It does not
    /// borrow the lease: race it against the work (`tokio::select!`), or
    /// hand it to another task. It also resolves when the lease is released
    /// or dropped.
    ///
    /// ```no_run
    /// # async fn work(_: u64) {}
    /// # async fn demo(lease: redlockd_client::Lease) -> Result<(), redlockd_client::Error> {
    /// tokio::select! {
    ///     () = work(lease.fence()) => lease.release().await.map(drop),
    ///     lost = lease.lost() => Err(lost),
    /// }
    /// # }
    /// ```
    pub fn lost(&self) -> impl Future<Output = Error> + Send + 'static {
        self.shared.lost()
    }

    /// How the lease ended, once it did (`None` while the lock is held):
    /// why, whether the daemon said the lock is gone, and the lock's last
    /// known validity. A holder that must stop its work in time reads it
    /// after [`Lease::lost`] resolved: when the lease ended without the
    /// daemon's word the lock may still be held until
    /// [`LeaseEnd::valid_until`] (after a broken stream it may also be
    /// gone already: see there).
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// let lost = lease.lost().await;
    /// match lease.ended() {
    ///     Some(end) if end.gone => eprintln!("gone: {}", end.reason),
    ///     Some(end) => eprintln!("stop before {:?}: {}", end.valid_until, end.reason),
    ///     None => unreachable!("lost() resolved"),
    /// }
    /// # }
    /// ```
    pub fn ended(&self) -> Option<LeaseEnd> {
        self.shared.lapse_if_due();
        self.shared.lease_end()
    }

    /// The lease's [`LeaseEvent`](crate::LeaseEvent)s from now on:
    /// extensions, draining, and how a lease that
    /// [reattaches](crate::Acquire::reattach) keeps its lock. For logs:
    /// [`Lease::lost`] is what says when to stop.
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// let mut events = lease.events();
    /// while let Some(event) = events.next().await {
    ///     eprintln!("{event:?}");
    /// }
    /// # }
    /// ```
    pub fn events(&self) -> LeaseEvents {
        self.shared.events()
    }

    /// Releases the lock: sends `release` and waits (up to the client's
    /// call timeout) for the daemon's answer. Returns `was_held`: `false`
    /// means the lock had expired or was already gone, so the work may have
    /// overlapped another holder's; a lease that had already ended answers
    /// `false` at once. An error when the daemon could not tell
    /// ([`Error::Unavailable`]: the lock then expires with its ttl) or did
    /// not answer in time ([`Error::DeadlineExceeded`]: the session is
    /// dropped, which releases it too).
    ///
    /// A lease that [reattaches](crate::Acquire::reattach) and keeps its
    /// lock with Extends of its own (or whose session broke during the
    /// release) releases it with a Release call by its token on a new
    /// connection; so does one that ended without the daemon's word
    /// ([`LeaseEnd::gone`] false), as the lock may still be held.
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) -> Result<(), redlockd_client::Error> {
    /// if !lease.release().await? {
    ///     eprintln!("the lock was gone before the release: the work may have overlapped");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<bool, Error> {
        if let Some(end) = self.shared.ended() {
            return match &self.keeper {
                Some(keeper) if !end.gone() => keeper.release(self.call_timeout).await,
                _ => Ok(false),
            };
        }
        self.shared.set_releasing();
        if let Some(keeper) = self.keeper.as_ref().filter(|_| self.shared.extending()) {
            let released = keeper.release(self.call_timeout).await;
            self.shared.finish(match &released {
                Ok(was_held) => End::Released {
                    was_held: *was_held,
                    requested: true,
                },
                Err(_) => End::unconfirmed("released at the client's request (no answer)"),
            });
            return released;
        }
        let release = pb::HoldRequest {
            request: Some(pb::hold_request::Request::Release(
                pb::hold_request::Release {},
            )),
        };
        let answered = tokio::time::timeout(self.call_timeout, async {
            // On an error the stream is over already: the reader says how.
            let _ = self.requests.send(release).await;
            self.shared.until_ended().await
        })
        .await;
        match (answered, &self.keeper) {
            (Ok(Some(End::Released { was_held, .. })), _) => Ok(was_held),
            // The session broke under the release: the lock may be held.
            (Ok(Some(End::Gone { gone: false, .. })), Some(keeper)) => {
                keeper.release(self.call_timeout).await
            }
            (
                Ok(Some(End::Gone {
                    status: Some(status),
                    ..
                })),
                None,
            ) => Err(Error::from_call("Release", self.call_timeout, status)),
            (Ok(Some(End::Gone { .. }) | None), _) => Ok(false),
            (Err(_), _) => {
                self.shared.finish(End::unconfirmed(
                    "released at the client's request (no answer)",
                ));
                Err(Error::local_deadline("Release", self.call_timeout))
            }
        }
    }
}

impl Drop for Lease {
    /// Ends the session: the request stream is half-closed when the sender
    /// drops, which the daemon takes as an orderly end and releases.
    fn drop(&mut self) {
        self.shared.set_releasing();
    }
}

impl fmt::Debug for Lease {
    /// Everything but the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("lock", &self.lock())
            .field("extensions", &self.extensions())
            .field("draining", &self.is_draining())
            .field("ended", &self.shared.ended().is_some())
            .finish()
    }
}
