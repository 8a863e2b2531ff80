//! Session clients: `Hold` sessions on the hot resources, beside the
//! Acquire clients. A session keeps its lock past its ttl through the
//! daemon's extensions; each `acquired` and `extended` event is a window.
//! A plain session's critical section updates both registers, then the
//! client sends `release` and records the `released` answer. On `draining`
//! (its replica was sent SIGTERM) it cuts its work short and releases; on
//! `lost`, an error or the end of the stream it stops without writing.
//! Every wait is bounded.
//!
//! Under `--mix` ([`Menu::mix`]) sessions also hold shared locks and
//! permits of limit 2 and 3 of the same resources, some for seconds (the
//! long holders, alive across rolling restarts of the masters), and some
//! plain and shared sessions are retried with their request id
//! (`crate::hold_retry`).

use crate::clients::{ClientLog, Profile, Shared};
use crate::history::{
    ExtendOutcome, Failure, Grant, Kind, ReleaseRecord, Time, Via, Window, Workload,
};
use crate::mix::Ask;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
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
/// Lease of a long holder's sessions (below the runs' `max_ttl` of 3 s).
const LONG_TTL: Duration = Duration::from_secs(2);
/// Work inside a session's critical section, in ms.
const WORK_MS: (u64, u64) = (50, 700);
/// Session clients' ids start here (apart from the Acquire clients').
pub(crate) const FIRST_ID: u32 = 1_000;

/// A session sends `release` only with at least this much of its
/// guarantee left; closer to the end it drops the stream instead (the
/// daemon then releases at once): a `release` that reaches the masters
/// after the lease ran out rightly answers `was_held = false`, which the
/// checker would count against a release sent within validity.
const RELEASE_MARGIN: Duration = Duration::from_millis(150);

/// Bound on any one wait for the daemon.
pub(crate) const PATIENCE: Duration = Duration::from_millis(3000);

/// What a session client holds, and how long.
#[derive(Debug, Clone)]
pub(crate) struct Menu {
    /// What it asks for, with weights.
    pub asks: Vec<(u32, Ask)>,
    /// Work of an ordinary session, in ms.
    pub work_ms: (u64, u64),
    /// Share of sessions held for long, and for how long (ms).
    pub long: (f64, u64, u64),
    /// Share of plain and shared sessions retried with their request id
    /// on a new connection while the first stream lingers.
    pub retry_share: f64,
    /// A long holder: what it holds across the rolling restart, on which
    /// hot resource.
    pub across_rolling: Option<(Ask, usize)>,
    /// The lease its sessions ask for (the daemon extends it).
    pub ttl: Duration,
}

impl Menu {
    /// Plain sessions only (without `--mix`).
    pub(crate) fn plain() -> Menu {
        Menu {
            asks: vec![(1, Ask::Exclusive)],
            work_ms: WORK_MS,
            long: (0.0, 0, 0),
            retry_share: 0.0,
            across_rolling: None,
            ttl: TTL,
        }
    }

    /// `--mix`: every kind, a few long holds, retries.
    pub(crate) fn mix() -> Menu {
        Menu {
            asks: vec![
                (4, Ask::Exclusive),
                (2, Ask::Shared),
                (2, Ask::Permit(2)),
                (1, Ask::Permit(3)),
            ],
            work_ms: WORK_MS,
            long: (0.1, 1_500, 5_000),
            retry_share: 0.25,
            across_rolling: None,
            ttl: TTL,
        }
    }

    /// `--mix`'s long holder `n`: permits and shared locks held for
    /// seconds; across the rolling restart, holder 0 holds a permit of
    /// limit 2 of hot resource 0, holder 1 one of limit 3 of hot resource
    /// 3 and holder 2 a shared lock of hot resource 1, from before it
    /// starts until after it ends.
    pub(crate) fn long(n: u32) -> Menu {
        Menu {
            asks: vec![(2, Ask::Permit(2)), (1, Ask::Shared), (1, Ask::Permit(3))],
            work_ms: WORK_MS,
            long: (1.0, 3_000, 9_000),
            retry_share: 0.0,
            across_rolling: Some(match n {
                0 => (Ask::Permit(2), 0),
                1 => (Ask::Permit(3), 3),
                _ => (Ask::Shared, 1),
            }),
            // Long enough that a starved daemon's late extension does not
            // cost a long hold its lock.
            ttl: LONG_TTL,
        }
    }

    pub(crate) fn pick(&self, rng: &mut StdRng) -> Ask {
        let total: u32 = self.asks.iter().map(|(w, _)| w).sum();
        let mut at = rng.random_range(0..total.max(1));
        for (weight, ask) in &self.asks {
            if at < *weight {
                return *ask;
            }
            at -= weight;
        }
        Ask::Exclusive
    }
}

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
                // The daemon keeps the lock until `release_in` at most:
                // no window reaches past that.
                let release_in = draining
                    .release_in
                    .and_then(|d| Duration::try_from(d).ok())
                    .unwrap_or_default();
                let cut = clock.now() + release_in;
                grant.valid_until = grant.valid_until.min(cut);
                for window in &mut grant.windows {
                    window.end = window.end.min(cut);
                }
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

/// One session client until the deadline.
pub(crate) async fn session(
    id: u32,
    shared: std::sync::Arc<Shared>,
    profile: Profile,
    menu: Menu,
    seed: u64,
) -> ClientLog {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0x5E);
    let (home, clock, mut log) = (id as usize, shared.clock, ClientLog::default());
    while clock.now() < shared.deadline {
        let mut hot = rng.random_range(0..shared.hot.len());
        let mut ask = menu.pick(&mut rng);
        let wait = profile
            .contended_wait
            .min(shared.deadline.saturating_sub(clock.now()));
        let (long_share, lo, hi) = menu.long;
        let mut work = match rng.random_bool(long_share) {
            true => between(&mut rng, (lo, hi)),
            false => between(&mut rng, menu.work_ms),
        };
        let across = shared.rolling.zip(menu.across_rolling);
        if let Some(((_, end), (held, resource))) =
            across.filter(|((_, end), _)| clock.now() < *end)
        {
            // Held until well after the last restarted master is back.
            (ask, hot) = (held, resource % shared.hot.len());
            work = (end + Duration::from_secs(3)).saturating_sub(clock.now());
        }
        if !matches!(ask, Ask::Permit(_)) && rng.random_bool(menu.retry_share) {
            let resource = shared.hot[hot].clone();
            crate::hold_retry::round(&shared, &mut rng, id, &resource, ask, wait, &mut log).await;
            continue;
        }
        let (replica, channel) = shared.routes.pick(home);
        let request = acquire_request(&shared.hot[hot], (ask, menu.ttl), wait, None);
        let mut open = match open(&shared, channel, request, wait).await {
            Ok(open) => open,
            Err((failure, message, sent, received)) => {
                log.contended_failures.push(failure);
                let resources = &shared.hot[hot..=hot];
                let what = (grant_kind(ask), Via::Hold);
                let answer = (failure, message);
                let failed =
                    shared.failed(id, replica, what, resources, None, (sent, received), answer);
                log.failed.push(failed);
                if failure != Failure::Status(tonic::Code::Aborted) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
        };
        // Counted until the session ends, so a drain finds it.
        let _holding = shared.routes.holding(replica);
        let mut grant = grant_of(&shared, id, replica, ask, &open, None);
        let mut last_heard = open.received;
        let registers = &shared.registers[hot];
        let plain = ask == Ask::Exclusive;
        let fenced = plain
            .then(|| registers.check_in(&clock, grant.id, open.lock.fence, grant.valid_until))
            .flatten();
        let read = registers.read_plain();
        let until = clock.now() + work;
        let stop = follow(
            &shared,
            &mut open.events,
            &mut grant,
            &mut last_heard,
            until,
            &mut log.drained,
        )
        .await;
        if stop == Stop::Done && plain {
            registers.write_plain(&clock, grant.id, read, grant.valid_until);
            if let Some(read) = fenced {
                registers.write_fenced(&clock, grant.id, open.lock.fence, read, grant.valid_until);
            }
        }
        grant.cs_end = clock.now();
        if stop == Stop::Done {
            grant.release = Some(finish(&shared, open, &grant).await);
        }
        log.grants.push(grant);
    }
    log
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
