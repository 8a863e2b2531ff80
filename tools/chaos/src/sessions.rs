//! Session clients: `Hold` sessions on the hot resources, beside the
//! Acquire clients. A session keeps its lock past its ttl through the
//! daemon's extensions; each `acquired` and `extended` event is a window.
//! The critical section updates both registers, then the client sends
//! `release` and records the `released` answer. On `draining` (its replica
//! was sent SIGTERM) it cuts its work short and releases; on `lost`, an
//! error or the end of the stream it stops without writing. Every wait is
//! bounded.

use crate::clients::{ClientLog, Profile, Shared};
use crate::history::{Failure, ReleaseRecord, Window, Workload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::hold_event::Event;
use redlockd_proto::pb::hold_request::{Release, Request};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, HoldEvent, HoldRequest, Lock};
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::Streaming;

/// Lease of a session's lock: short, so that the work outlasts it and the
/// extensions carry the lock.
const TTL: Duration = Duration::from_millis(300);
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
const PATIENCE: Duration = Duration::from_millis(3000);

fn validity(lock: &Lock) -> Duration {
    lock.validity
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// Why a critical section stopped early.
enum Stop {
    /// The work is done, or the daemon is draining: write and release.
    Done,
    /// The lock is no longer guaranteed (`lost`, an error, the stream
    /// ended, `released` by the daemon): do not write.
    Gone,
}

/// One session client until the deadline.
pub(crate) async fn session(
    id: u32,
    shared: std::sync::Arc<Shared>,
    profile: Profile,
    seed: u64,
) -> ClientLog {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0x5E);
    let (home, clock, mut log) = (id as usize, shared.clock, ClientLog::default());
    while clock.now() < shared.deadline {
        let hot = rng.random_range(0..shared.hot.len());
        let wait = profile
            .contended_wait
            .min(shared.deadline.saturating_sub(clock.now()));
        let (replica, channel) = shared.routes.pick(home);
        let (requests, outgoing) = mpsc::channel(2);
        let first = HoldRequest {
            request: Some(Request::Acquire(AcquireRequest {
                resource: shared.hot[hot].clone(),
                ttl: prost_types::Duration::try_from(TTL).ok(),
                wait: prost_types::Duration::try_from(wait).ok(),
                owner: "chaos-session".to_owned(),
                request_id: String::new(),
                ..Default::default()
            })),
        };
        if requests.send(first).await.is_err() {
            continue;
        }
        let sent = clock.now();
        let opened = tokio::time::timeout(
            wait + PATIENCE,
            LockServiceClient::new(channel)
                .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing)),
        )
        .await;
        let mut events = match opened {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => {
                log.contended_failures.push(Failure::Status(status.code()));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(_) => {
                log.contended_failures.push(Failure::TimedOut);
                continue;
            }
        };
        let lock = match next(&mut events, wait + PATIENCE).await {
            Ok(Some(Event::Acquired(lock))) => lock,
            Ok(_) => continue,
            Err(failure) => {
                log.contended_failures.push(failure);
                if failure != Failure::Status(tonic::Code::Aborted) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
        };
        let received = clock.now();
        // Counted until the session ends, so a drain finds it.
        let _holding = shared.routes.holding(replica);
        let mut grant = shared.grant(Workload::Contended, id, replica, &lock);
        // `acquired` as the Acquire clients count a grant: from when the
        // `acquire` was sent (queued, before the stream even opened), as the
        // contract asks; each `extended` is counted from when the previous
        // event arrived (the daemon sent this one later): one-way delay
        // taken off.
        let first = Window::of_call(sent, received, validity(&lock));
        let mut last_heard = received;
        (grant.sent, grant.received, grant.valid_until) = (sent, received, first.end);
        grant.windows.push(first);
        let registers = &shared.registers[hot];
        let fenced = registers.check_in(&clock, grant.id, lock.fence, grant.valid_until);
        let plain = registers.read_plain();
        let work_until = clock.now() + between(&mut rng, WORK_MS);
        let stop = loop {
            let left = work_until.saturating_sub(clock.now());
            if left.is_zero() {
                break Stop::Done;
            }
            match next(&mut events, left).await {
                Err(Failure::TimedOut) => break Stop::Done,
                Ok(Some(Event::Extended(extended))) => {
                    let now = clock.now();
                    let window = Window {
                        start: now,
                        end: last_heard + validity(&extended),
                    };
                    last_heard = now;
                    if window.start < grant.valid_until {
                        grant.valid_until = grant.valid_until.max(window.end);
                    }
                    grant.windows.push(window);
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
                    log.drained += 1;
                    break Stop::Done;
                }
                Ok(Some(Event::Acquired(_))) => {}
                Ok(_) | Err(_) => break Stop::Gone,
            }
        };
        if let Stop::Done = stop {
            registers.write_plain(&clock, grant.id, plain, grant.valid_until);
            if let Some(read) = fenced {
                registers.write_fenced(&clock, grant.id, lock.fence, read, grant.valid_until);
            }
        }
        grant.cs_end = clock.now();
        if let Stop::Done = stop {
            grant.release = Some(if grant.cs_end + RELEASE_MARGIN < grant.valid_until {
                release(&shared, &requests, &mut events).await
            } else {
                // Dropping the stream releases the lock: the holder gives
                // it up now, and no `was_held` comes back.
                drop(events);
                drop(requests);
                let now = clock.now();
                ReleaseRecord {
                    sent: now,
                    received: now,
                    outcome: Err(Failure::Status(tonic::Code::Cancelled)),
                    calls: 1,
                }
            });
        }
        log.grants.push(grant);
    }
    log
}

fn between(rng: &mut StdRng, (lo, hi): (u64, u64)) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi.max(lo)))
}

/// The next event within `limit`: `Ok(None)` when the stream ended.
async fn next(
    events: &mut Streaming<HoldEvent>,
    limit: Duration,
) -> Result<Option<Event>, Failure> {
    match tokio::time::timeout(limit, events.message()).await {
        Ok(Ok(Some(event))) => Ok(event.event),
        Ok(Ok(None)) => Ok(None),
        Ok(Err(status)) => Err(Failure::Status(status.code())),
        Err(_) => Err(Failure::TimedOut),
    }
}

/// Sends `release` and waits for `released`, skipping late extensions.
async fn release(
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
        let give_up = clock.now() + PATIENCE;
        loop {
            match next(events, give_up.saturating_sub(clock.now())).await {
                Ok(Some(Event::Released(released))) => {
                    outcome = Ok(released.was_held);
                    break;
                }
                // Lost before the release was served: no `was_held`.
                Ok(Some(Event::Lost(_))) => {
                    outcome = Err(Failure::Status(tonic::Code::Aborted));
                    break;
                }
                Ok(Some(_)) => continue,
                Ok(None) => {
                    outcome = Err(Failure::Status(tonic::Code::Unavailable));
                    break;
                }
                Err(failure) => {
                    outcome = Err(failure);
                    break;
                }
            }
        }
    }
    ReleaseRecord {
        sent,
        received: clock.now(),
        outcome,
        calls: 1,
    }
}
