//! Hold sessions: opening one when an `Acquire<Lease>` is awaited, up to
//! the grant; the task that then reads its events is `watch.rs`.

use crate::acquire::{Acquire, BoxFuture};
use crate::client::Client;
use crate::error::Error;
use crate::lease::Lease;
use crate::lock::Lock;
use crate::reattach::Keeper;
use crate::unanswered::{answered_by_daemon, token_of, Unanswered};
use crate::validity::{stop_margin, Shared};
use crate::watch::Watch;
use crate::wire::std_duration;
use redlockd_proto::pb;
use redlockd_proto::pb::hold_event::Event;
use std::future::IntoFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming};

impl Client {
    /// Opens a Hold session on `resource` for `ttl`: set options on the
    /// returned [`Acquire`] (the same as [`Client::acquire`]'s), then
    /// `.await` it for the [`Lease`]. While the session lasts the daemon
    /// extends the lock before it expires; [`Lease::lost`] says when it is
    /// gone. [`Error::Held`] when the resource stayed held elsewhere for the
    /// whole wait.
    ///
    /// Dropping the future before the grant cancels the session: the daemon
    /// releases whatever it got, and so does this client in the background
    /// (by the token the session's request id derives, as for
    /// [`Client::acquire`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let lease = client
    ///     .hold("jobs/nightly", Duration::from_secs(10))
    ///     .wait(Duration::from_secs(60))
    ///     .await?;
    /// lease.check()?;
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn hold(&self, resource: impl Into<String>, ttl: Duration) -> Acquire<Lease> {
        Acquire::new(self.clone(), resource.into(), ttl)
    }
}

impl Acquire<Lease> {
    /// Keeps the lock through a broken or silent session, as
    /// `redlockctl run` does: when the session breaks (the connection
    /// reset, the daemon restarted behind the same address) the lease
    /// calls Extend with the lock's token on a new connection, after a
    /// short pause that lets a live daemon's release of the broken
    /// session's lock land first (so that a lock that is gone is not
    /// believed in); when no extension came through the session for half
    /// the ttl (a partition, a hung connection) it extends the lock itself
    /// the same way while the session stays open. It goes on, an attempt
    /// each third of the ttl and after each failure a new connection, until
    /// the session extends the lock again, the daemon refuses (the lease
    /// ends: [`LeaseEnd::gone`](crate::LeaseEnd::gone)), or no attempt
    /// succeeded before the validity, less
    /// [`stop_margin`], runs out: the lease then ends
    /// on this process's clock as any other does, and
    /// [`Lease::lost`] resolves. [`Lease::events`] reports each step.
    ///
    /// Without it (the default, as in the Go, Python, Node and Java
    /// clients) a broken session ends the lease at once. A reattached lock
    /// is no longer tied to a session: if this process dies it expires
    /// with its ttl instead of being released at once, and
    /// [`Lease::release`] (or dropping the lease) releases it with a
    /// Release call on a new connection.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let lease = client
    ///     .hold("jobs/nightly", Duration::from_secs(10))
    ///     .reattach()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn reattach(self) -> Acquire<Lease> {
        self.with_reattach()
    }
}

impl IntoFuture for Acquire<Lease> {
    type Output = Result<Lease, Error>;
    type IntoFuture = BoxFuture<Lease>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(open(self))
    }
}

/// Opens the session and waits for its grant, within the call's limit.
async fn open(call: Acquire<Lease>) -> Result<Lease, Error> {
    let request = call.request()?;
    let ttl = call.ttl();
    let limit = call.limit_of_call();
    let resource = match request.resources.first() {
        Some(first) => first.clone(),
        None => request.resource.clone(),
    };
    let inner = &call.client.inner;
    let deadline = tokio::time::Instant::now() + limit;
    // As for a unary acquire: a grant whose `acquired` this side never read
    // (the future dropped, the limit run out, the stream broken) is
    // released in the background by the token its request id derives, even
    // where the daemon would leave it to expire (a lock-delay).
    let token = token_of(&request);
    if let Some(token) = &token {
        if tokio::time::timeout_at(deadline, inner.releases.settled(token))
            .await
            .is_err()
        {
            return Err(Error::local_deadline("Hold", limit));
        }
    }
    let unanswered = Unanswered::new(&inner.releases, &inner.stub, &request.resource, token);
    let (requests, outgoing) = mpsc::channel(2);
    let first = pb::HoldRequest {
        request: Some(pb::hold_request::Request::Acquire(request)),
    };
    requests
        .try_send(first)
        .map_err(|_| Error::Other(Status::internal("Hold: the request queue refused")))?;
    let mut stub = inner.stub.clone();
    let sent = Instant::now();
    // Dropped unfinished (the limit, or the caller's drop), the call is
    // cancelled: the daemon releases whatever the session got.
    let opened = tokio::time::timeout_at(deadline, async {
        let mut events = stub
            .hold(tonic::Request::new(ReceiverStream::new(outgoing)))
            .await?
            .into_inner();
        let first = events.message().await?;
        Ok::<_, Status>((events, first))
    })
    .await;
    let (mut events, first) = match opened {
        Ok(Ok(opened)) => opened,
        Ok(Err(status)) => {
            if answered_by_daemon(&status) {
                unanswered.answered();
            }
            return Err(Error::from_call("Hold", limit, status));
        }
        Err(_) => return Err(Error::local_deadline("Hold", limit)),
    };
    let granted = match first.and_then(|e| e.event) {
        Some(Event::Acquired(lock)) => Lock::from_wire(lock, sent),
        // The daemon ended the session in order, without a grant.
        None => {
            unanswered.answered();
            return Err(Error::Unavailable(Status::unavailable(
                "Hold: the session ended before the lock was acquired",
            )));
        }
        Some(other) => {
            return Err(Error::Other(Status::internal(format!(
                "Hold: `{}` before `acquired`",
                event_name(&other)
            ))))
        }
    };
    let arrived = Instant::now();
    let shared = if granted.valid_until() > arrived + stop_margin(ttl) {
        Shared::new(
            resource,
            ttl,
            granted.validity(),
            granted.valid_until(),
            arrived,
        )
    } else {
        first_extension(&mut events, resource, ttl, arrived).await?
    };
    // The session holds the lock from here: its end releases it.
    unanswered.answered();
    let shared = Arc::new(shared);
    let (dropped, on_drop) = oneshot::channel();
    let call_timeout = call.client.call_timeout();
    let keeper = call
        .reattaches()
        .then(|| Arc::new(Keeper::new(call.client.clone(), granted.clone(), ttl)));
    let watch = Watch::new(
        Arc::clone(&shared),
        events,
        on_drop,
        call_timeout,
        keeper.clone(),
    );
    tokio::spawn(watch.run());
    Ok(Lease::new(
        shared,
        granted,
        requests,
        dropped,
        call_timeout,
        keeper,
    ))
}

/// A grant that waited longer than its validity arrives already lapsed by
/// this client's count (from when `acquire` was sent): the lock is held,
/// but nothing vouches for it yet. The daemon's first extension, a third of
/// the ttl later, does; it counts from the grant's arrival. Waits for it
/// (at most a ttl); without it, or dropped before, the session is
/// cancelled (the daemon releases the lock) and the derived token released
/// in the background.
async fn first_extension(
    events: &mut Streaming<pb::HoldEvent>,
    resource: String,
    ttl: Duration,
    arrived: Instant,
) -> Result<Shared, Error> {
    let lapsed = |why: &str, code| {
        Error::lost(
            &resource,
            &format!(
                "the grant arrived after its validity ran out (a wait longer than \
                 the ttl) and {why}"
            ),
            code,
        )
    };
    let event = match tokio::time::timeout(ttl, events.message()).await {
        Ok(Ok(event)) => event.and_then(|e| e.event),
        Ok(Err(status)) => return Err(lapsed("the session broke", status.code())),
        Err(_) => return Err(lapsed("no extension followed", Code::FailedPrecondition)),
    };
    let Some(Event::Extended(lock)) = event else {
        return Err(lapsed("no extension followed", Code::FailedPrecondition));
    };
    let now = Instant::now();
    let validity = std_duration(lock.validity);
    let valid_until = arrived + validity;
    if valid_until <= now + stop_margin(ttl) {
        return Err(lapsed("its first extension too", Code::FailedPrecondition));
    }
    Ok(Shared::new(resource, ttl, validity, valid_until, now))
}

/// An event's name, for messages (never its content: a lock carries its
/// token).
fn event_name(event: &Event) -> &'static str {
    match event {
        Event::Acquired(_) => "acquired",
        Event::Extended(_) => "extended",
        Event::Released(_) => "released",
        Event::Lost(_) => "lost",
        Event::Draining(_) => "draining",
    }
}
