//! The Hold stream as the chaos clients speak it: the `acquire` message,
//! opening a session and reading its grant, following its extensions,
//! releasing, and the bounded waits on its events. The session clients
//! (`crate::sessions`) and the request-id retries (`crate::hold_retry`)
//! both use it.

use crate::clients::Shared;
use crate::history::{
    ExtendOutcome, Failure, Grant, Kind, ReleaseRecord, Time, Via, Window, Workload,
};
use crate::mix::Ask;
use rand::rngs::StdRng;
use rand::Rng;
use redlockd_proto::pb::hold_event::Event;
use redlockd_proto::pb::hold_request::{Release, Request};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, HoldEvent, HoldRequest, Lock, LockMode};
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use tonic::Streaming;

/// Lease of a session's lock: short, so that the work outlasts it and the
/// extensions carry the lock.
pub(crate) const TTL: Duration = Duration::from_millis(300);

/// A session sends `release` only with at least this much of its
/// guarantee left; closer to the end it drops the stream instead (the
/// daemon then releases at once): a `release` that reaches the masters
/// after the lease ran out rightly answers `was_held = false`, which the
/// checker would count against a release sent within validity.
pub(crate) const RELEASE_MARGIN: Duration = Duration::from_millis(150);

/// Bound on any one wait for the daemon.
pub(crate) const PATIENCE: Duration = Duration::from_millis(3000);

pub(crate) fn validity(lock: &Lock) -> Duration {
    lock.validity
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// Why a critical section stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The work is done, or the daemon is draining: write and release.
    Done,
    /// The lock is no longer guaranteed (`lost`, an error, the stream
    /// ended, `released` by the daemon): do not write.
    Gone,
}

/// An open session holding its lock.
pub(crate) struct Open {
    pub requests: mpsc::Sender<HoldRequest>,
    pub events: Streaming<HoldEvent>,
    pub lock: Lock,
    pub sent: Time,
    pub received: Time,
}

/// The `acquire` message of a session.
pub(crate) fn acquire_request(
    resource: &str,
    (ask, ttl): (Ask, Duration),
    wait: Duration,
    request_id: Option<&str>,
) -> AcquireRequest {
    let (mode, limit) = match ask {
        Ask::Exclusive => (LockMode::Exclusive, 0),
        Ask::Shared => (LockMode::Shared, 0),
        Ask::Permit(limit) => (LockMode::Exclusive, limit),
    };
    AcquireRequest {
        resource: resource.to_owned(),
        ttl: prost_types::Duration::try_from(ttl).ok(),
        wait: prost_types::Duration::try_from(wait).ok(),
        owner: "chaos-session".to_owned(),
        request_id: request_id.unwrap_or_default().to_owned(),
        mode: mode as i32,
        limit,
        ..Default::default()
    }
}

/// Opens a session on `channel` with `request` and waits for `acquired`;
/// a failure comes with its message and when it was sent and ended.
pub(crate) async fn open(
    shared: &Shared,
    channel: Channel,
    request: AcquireRequest,
    wait: Duration,
) -> Result<Open, (Failure, String, Time, Time)> {
    let clock = shared.clock;
    let (requests, outgoing) = mpsc::channel(2);
    let first = HoldRequest {
        request: Some(Request::Acquire(request)),
    };
    let sent = clock.now();
    if requests.send(first).await.is_err() {
        let failure = (Failure::Status(tonic::Code::Internal), "queue".to_owned());
        return Err((failure.0, failure.1, sent, clock.now()));
    }
    let opened = tokio::time::timeout(
        wait + PATIENCE,
        LockServiceClient::new(channel).hold(tokio_stream::wrappers::ReceiverStream::new(outgoing)),
    )
    .await;
    let mut events = match opened {
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => {
            let message = status.message().to_owned();
            return Err((Failure::Status(status.code()), message, sent, clock.now()));
        }
        Err(_) => {
            let message = "the stream did not open in time".to_owned();
            return Err((Failure::TimedOut, message, sent, clock.now()));
        }
    };
    match next_with_message(&mut events, wait + PATIENCE).await {
        Ok(Some(Event::Acquired(lock))) => Ok(Open {
            requests,
            events,
            lock,
            sent,
            received: clock.now(),
        }),
        Ok(other) => {
            let message = format!("first event {other:?}");
            let failure = Failure::Status(tonic::Code::Internal);
            Err((failure, message, sent, clock.now()))
        }
        Err((failure, message)) => Err((failure, message, sent, clock.now())),
    }
}

/// The grant of an open session, as the Acquire clients count one: from
/// when the `acquire` was sent (queued, before the stream even opened), as
/// the contract asks.
pub(crate) fn grant_of(
    shared: &Shared,
    id: u32,
    replica: usize,
    ask: Ask,
    open: &Open,
    request_id: Option<&str>,
) -> Grant {
    let mut grant = shared.grant(Workload::Contended, id, replica, &open.lock);
    grant.kind = match ask {
        Ask::Exclusive => Kind::Plain,
        Ask::Shared => Kind::Shared,
        Ask::Permit(limit) => Kind::Permit(limit),
    };
    grant.via = Via::Hold;
    grant.request_id = request_id.map(str::to_owned);
    let first = Window::of_call(open.sent, open.received, validity(&open.lock));
    (grant.sent, grant.received, grant.valid_until) = (open.sent, open.received, first.end);
    grant.windows.push(first);
    grant
}

/// Follows the session's events until `until`: each `extended` is a
/// window counted from when the previous event arrived (the daemon sent
/// this one later: one-way delay taken off), `lost` an extension that
/// failed. `last_heard` is carried across calls.
pub(crate) async fn follow(
    shared: &Shared,
    events: &mut Streaming<HoldEvent>,
    grant: &mut Grant,
    last_heard: &mut Time,
    until: Time,
    drained: &mut usize,
) -> Stop {
    let clock = shared.clock;
    loop {
        let left = until.saturating_sub(clock.now());
        if left.is_zero() {
            return Stop::Done;
        }
        match next(events, left).await {
            Err(Failure::TimedOut) => return Stop::Done,
            Ok(Some(Event::Extended(extended))) => {
                let now = clock.now();
                let outcome = ExtendOutcome::Ok(validity(&extended));
                grant.extended(*last_heard, now, outcome);
                *last_heard = now;
            }
            Ok(Some(Event::Draining(draining))) => {
                self::drained(grant, draining.release_in, clock.now());
                *drained += 1;
                return Stop::Done;
            }
            Ok(Some(Event::Acquired(_))) => {}
            Ok(Some(Event::Lost(_))) => {
                let now = clock.now();
                grant.extended(*last_heard, now, ExtendOutcome::Lost);
                return Stop::Gone;
            }
            Ok(_) | Err(_) => return Stop::Gone,
        }
    }
}

/// A `draining` event arrived at `now`: the daemon keeps the lock until
/// `release_in` at most, so no window reaches past that.
pub(crate) fn drained(grant: &mut Grant, release_in: Option<prost_types::Duration>, now: Time) {
    let release_in = release_in
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default();
    let cut = now + release_in;
    grant.valid_until = grant.valid_until.min(cut);
    for window in &mut grant.windows {
        window.end = window.end.min(cut);
    }
}

/// Ends a session whose work is done: `release` with room to spare, else
/// the stream dropped (the daemon then releases at once: the holder gives
/// the lock up now, and no `was_held` comes back).
pub(crate) async fn finish(shared: &Shared, open: Open, grant: &Grant) -> ReleaseRecord {
    if grant.cs_end + RELEASE_MARGIN < grant.valid_until {
        let Open {
            requests,
            mut events,
            ..
        } = open;
        return release(shared, &requests, &mut events).await;
    }
    drop(open);
    let now = shared.clock.now();
    ReleaseRecord {
        sent: now,
        received: now,
        outcome: Err(Failure::Status(tonic::Code::Cancelled)),
        calls: 1,
        first_failure: None,
    }
}

/// The kind of a grant of `ask`.
pub(crate) fn grant_kind(ask: Ask) -> Kind {
    match ask {
        Ask::Exclusive => Kind::Plain,
        Ask::Shared => Kind::Shared,
        Ask::Permit(limit) => Kind::Permit(limit),
    }
}

pub(crate) fn between(rng: &mut StdRng, (lo, hi): (u64, u64)) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi.max(lo)))
}

/// The next event within `limit`: `Ok(None)` when the stream ended.
pub(crate) async fn next(
    events: &mut Streaming<HoldEvent>,
    limit: Duration,
) -> Result<Option<Event>, Failure> {
    next_with_message(events, limit).await.map_err(|(f, _)| f)
}

/// [`next`] with a failure's status message.
async fn next_with_message(
    events: &mut Streaming<HoldEvent>,
    limit: Duration,
) -> Result<Option<Event>, (Failure, String)> {
    match tokio::time::timeout(limit, events.message()).await {
        Ok(Ok(Some(event))) => Ok(event.event),
        Ok(Ok(None)) => Ok(None),
        Ok(Err(status)) => Err((Failure::Status(status.code()), status.message().to_owned())),
        Err(_) => Err((Failure::TimedOut, format!("no event within {limit:?}"))),
    }
}

/// Sends `release` and waits for `released`, skipping late extensions.
pub(crate) async fn release(
    shared: &Shared,
    requests: &mpsc::Sender<HoldRequest>,
    events: &mut Streaming<HoldEvent>,
) -> ReleaseRecord {
    let clock = shared.clock;
    let sent = clock.now();
    let message = HoldRequest {
        request: Some(Request::Release(Release {})),
    };
    let mut outcome = Err(Failure::TimedOut);
    if requests.send(message).await.is_ok() {
        outcome = released(shared, events).await;
    }
    ReleaseRecord {
        sent,
        received: clock.now(),
        outcome,
        calls: 1,
        first_failure: None,
    }
}

/// Waits for `released` (after a `release` or a half-close).
pub(crate) async fn released(
    shared: &Shared,
    events: &mut Streaming<HoldEvent>,
) -> Result<bool, Failure> {
    let clock = shared.clock;
    let give_up = clock.now() + PATIENCE;
    loop {
        match next(events, give_up.saturating_sub(clock.now())).await {
            Ok(Some(Event::Released(released))) => return Ok(released.was_held),
            // Lost before the release was served: no `was_held`.
            Ok(Some(Event::Lost(_))) => return Err(Failure::Status(tonic::Code::Aborted)),
            Ok(Some(_)) => continue,
            Ok(None) => return Err(Failure::Status(tonic::Code::Unavailable)),
            Err(failure) => return Err(failure),
        }
    }
}
