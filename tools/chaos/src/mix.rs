//! Unary clients of every kind but multi: exclusive (`mode`), shared,
//! semaphore permits (`limit`), on a [`Menu`] of resources. The `full`
//! schedule's semaphore clients and `--rw` clients are menus of resources
//! of their own; `--mix` points menus of every kind at the SAME hot
//! resources as the plain, session and multi clients (and, where frozen
//! children run, at theirs too: a frozen holder's lock_delay must keep
//! every kind out, `crate::frozen`), with:
//! - request ids on some exclusive and shared Acquires (a fresh one per
//!   acquisition), some of them first sent with a short gRPC deadline so
//!   that they end DEADLINE_EXCEEDED while waiting; an Acquire answered
//!   DEADLINE_EXCEEDED, UNAVAILABLE, UNKNOWN, CANCELLED or nothing is
//!   retried with the same request id through the same or the other
//!   replica (both calls recorded; equal tokens are one lock), through
//!   the other one only after [`OTHER_REPLICA_GAP`];
//! - gRPC deadlines of 1-20 ms on some Acquires: of a hot resource (only
//!   recorded), or of a resource nobody else uses, whose masters are then
//!   read directly (`crate::leftovers`);
//! - a `hold_at_least` of 50-400 ms on some exclusive Acquires, asked
//!   without waiting as a scheduled job asks, so that most are released
//!   before it ran (`crate::hold_at_least` judges them);
//! - a `lock_delay` of [`ABANDONED_DELAY`] on a few permits, which their
//!   client then never releases, as a holder that vanished would not: no
//!   conflicting grant of any kind may come before its expiry plus the
//!   delay (`crate::lock_delay` judges them).
//!
//! A permit asked under another limit than the resource's holders' is
//! FAILED_PRECONDITION: recorded, not a violation. Every grant goes into
//! the one history with its kind and token; the cross-kind checks
//! (`crate::exclusion`) judge them all together.

use crate::clients::{ClientLog, Shared};
use crate::history::{Failure, Kind, Time, Via, Window, Workload};
use crate::leftovers::{self, Probe};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, Lock, LockMode};
use std::sync::Arc;
use std::time::Duration;

/// First client id of the `--rw` clients.
pub(crate) const RW_FIRST_ID: u32 = 30_000;
/// First client id of the semaphore clients.
pub(crate) const SEMAPHORE_FIRST_ID: u32 = 31_000;
/// First client id of the `--mix` unary clients.
pub(crate) const MIX_FIRST_ID: u32 = 32_000;
/// Bound on one call beyond its wait.
const CALL_SLACK: Duration = Duration::from_millis(1_500);
/// Retries of one acquisition with its request id.
const RETRIES: usize = 2;
/// A retry through the OTHER replica waits this long first: the contract
/// (lock.proto, `request_id`) lets one sent within about 3 x node_timeout
/// of the error be answered the first replica's late grant just before
/// that replica releases it (its holder would learn it from Extend or
/// Validate): not what this client checks. Through the same replica the
/// daemon serialises the retry behind the late grant's release.
const OTHER_REPLICA_GAP: Duration = Duration::from_millis(300);

/// What a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// `mode` EXCLUSIVE.
    Exclusive,
    /// `mode` SHARED.
    Shared,
    /// A permit of this limit.
    Permit(u32),
}

impl Ask {
    fn kind(self) -> Kind {
        match self {
            Ask::Exclusive => Kind::Plain,
            Ask::Shared => Kind::Shared,
            Ask::Permit(limit) => Kind::Permit(limit),
        }
    }
}

/// The shape of a client's work.
#[derive(Debug, Clone)]
pub(crate) struct Menu {
    /// Resources it locks.
    pub resources: Vec<String>,
    /// What it asks for, with weights.
    pub asks: Vec<(u32, Ask)>,
    /// Lease and wait of an ordinary Acquire.
    pub ttl: Duration,
    pub wait: Duration,
    /// Work under a grant, in ms.
    pub work_ms: (u64, u64),
    /// Share of grants extended half-way.
    pub extend_share: f64,
    /// Share of exclusive and shared Acquires with a request id.
    pub request_id_share: f64,
    /// Share of Acquires with a 1-20 ms gRPC deadline.
    pub short_deadline_share: f64,
    /// Share of iterations that instead send such an Acquire of a fresh
    /// resource and read the masters afterwards (`crate::leftovers`).
    pub fresh_deadline_share: f64,
    /// Share of exclusive Acquires with a `hold_at_least` in
    /// [`HOLD_AT_LEAST_MS`].
    pub hold_at_least_share: f64,
    /// Share of permit Acquires asked with a lock_delay of
    /// [`ABANDONED_DELAY`] and left to expire.
    pub abandon_share: f64,
}

/// The lock_delay of a permit the mix leaves to expire: long enough that
/// other kinds come asking inside it, short enough that the resource is
/// not kept from the others for long.
const ABANDONED_DELAY: Duration = Duration::from_millis(700);

/// The `hold_at_least` of the mix's exclusive Acquires that ask for one,
/// in ms: within the mix's lease, mostly longer than its work.
const HOLD_AT_LEAST_MS: (u64, u64) = (50, 400);

impl Menu {
    /// The semaphore clients' menu of the `full` schedule: one semaphore
    /// of limit 2 of their own.
    pub(crate) fn semaphore(tag: &str) -> Menu {
        Menu {
            resources: vec![format!("{tag}/semaphore")],
            asks: vec![(1, Ask::Permit(2))],
            ttl: Duration::from_secs(1),
            wait: Duration::from_secs(1),
            work_ms: (0, 20),
            extend_share: 0.0,
            request_id_share: 0.0,
            short_deadline_share: 0.0,
            fresh_deadline_share: 0.0,
            hold_at_least_share: 0.0,
            abandon_share: 0.0,
        }
    }

    /// `--rw`: three shared for one exclusive, two resources of their own.
    pub(crate) fn rw(tag: &str) -> Menu {
        Menu {
            resources: (0..2).map(|i| format!("{tag}/rw/{i}")).collect(),
            asks: vec![(3, Ask::Shared), (1, Ask::Exclusive)],
            ttl: Duration::from_millis(1_500),
            wait: Duration::from_millis(1_500),
            work_ms: (5, 60),
            extend_share: 0.3,
            request_id_share: 0.0,
            short_deadline_share: 0.0,
            fresh_deadline_share: 0.0,
            hold_at_least_share: 0.0,
            abandon_share: 0.0,
        }
    }

    /// `--mix`: every kind on the hot resources, with request ids and
    /// short deadlines; and on the frozen children's resource where they
    /// run, so that a vanished holder's lock_delay is judged against every
    /// kind (`crate::frozen`).
    pub(crate) fn mix(hot: &[String], frozen: Option<String>) -> Menu {
        Menu {
            resources: hot.iter().cloned().chain(frozen).collect(),
            asks: vec![
                (3, Ask::Permit(2)),
                (2, Ask::Permit(3)),
                (3, Ask::Shared),
                (2, Ask::Exclusive),
            ],
            ttl: Duration::from_millis(800),
            wait: Duration::from_millis(800),
            work_ms: (0, 30),
            extend_share: 0.15,
            request_id_share: 0.4,
            short_deadline_share: 0.05,
            fresh_deadline_share: 0.06,
            hold_at_least_share: 0.5,
            abandon_share: 0.1,
        }
    }

    fn pick(&self, rng: &mut StdRng) -> Ask {
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

/// A request id: 32 hex characters (128 random bits).
pub(crate) fn request_id(rng: &mut StdRng) -> String {
    format!("{:032x}", rng.random::<u128>())
}

fn proto(d: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(d).ok()
}

/// A term of the request: none where zero, as a client that does not ask
/// for it sends.
fn unless_zero(d: Duration) -> Option<prost_types::Duration> {
    (!d.is_zero()).then(|| proto(d)).flatten()
}

fn validity(lock: &Lock) -> Duration {
    lock.validity
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// One Acquire: its request.
struct Call<'a> {
    resource: &'a str,
    ask: Ask,
    ttl: Duration,
    wait: Duration,
    deadline: Option<Duration>,
    request_id: Option<&'a str>,
    hold_at_least: Duration,
    lock_delay: Duration,
}

/// Sends `call` through the replica `home` prefers: (replica, sent,
/// received, the lock or the failure and its message).
async fn acquire(
    shared: &Shared,
    home: usize,
    call: &Call<'_>,
) -> (usize, Time, Time, Result<Lock, (Failure, String)>) {
    let (replica, channel) = shared.routes.pick(home);
    let (mode, limit) = match call.ask {
        Ask::Exclusive => (LockMode::Exclusive, 0),
        Ask::Shared => (LockMode::Shared, 0),
        Ask::Permit(limit) => (LockMode::Exclusive, limit),
    };
    let mut request = tonic::Request::new(AcquireRequest {
        resource: call.resource.to_owned(),
        ttl: proto(call.ttl),
        wait: proto(call.wait),
        owner: "chaos-mix".to_owned(),
        request_id: call.request_id.unwrap_or_default().to_owned(),
        mode: mode as i32,
        limit,
        hold_at_least: unless_zero(call.hold_at_least),
        lock_delay: unless_zero(call.lock_delay),
        ..Default::default()
    });
    if let Some(deadline) = call.deadline {
        request.set_timeout(deadline);
    }
    let guard = call.deadline.unwrap_or(call.wait).min(call.wait) + CALL_SLACK;
    let sent = shared.clock.now();
    let answer =
        tokio::time::timeout(guard, LockServiceClient::new(channel).acquire(request)).await;
    let received = shared.clock.now();
    let outcome = match answer {
        Ok(Ok(response)) => response.into_inner().lock.ok_or((
            Failure::Status(tonic::Code::Internal),
            "granted without a lock".to_owned(),
        )),
        Ok(Err(status)) => Err((Failure::Status(status.code()), status.message().to_owned())),
        Err(_) => Err((Failure::TimedOut, format!("no answer within {guard:?}"))),
    };
    (replica, sent, received, outcome)
}

/// Whether a failed Acquire with a request id is retried with it.
fn retried(failure: Failure) -> bool {
    matches!(
        failure,
        Failure::TimedOut
            | Failure::Status(
                tonic::Code::DeadlineExceeded
                    | tonic::Code::Unavailable
                    | tonic::Code::Unknown
                    | tonic::Code::Cancelled
            )
    )
}

/// One client of `menu` until the run's deadline.
pub(crate) async fn client(id: u32, shared: Arc<Shared>, menu: Menu, seed: u64) -> ClientLog {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0x313);
    let (home, clock) = (id as usize, shared.clock);
    let mut log = ClientLog::default();
    let mut fresh = 0u64;
    while clock.now() < shared.deadline {
        if rng.random_bool(menu.fresh_deadline_share) {
            fresh += 1;
            let resource = format!("{}/deadline/{id}/{fresh}", shared.tag);
            short_deadline_on_fresh(&shared, &mut rng, id, home, &resource, &mut log).await;
            continue;
        }
        let resource = menu.resources[rng.random_range(0..menu.resources.len())].clone();
        let ask = menu.pick(&mut rng);
        let wait = menu.wait.min(shared.deadline.saturating_sub(clock.now()));
        // Not with a limit: INVALID_ARGUMENT by the contract.
        let with_id = !matches!(ask, Ask::Permit(_)) && rng.random_bool(menu.request_id_share);
        let request_id = with_id.then(|| request_id(&mut rng));
        let with_hold = ask == Ask::Exclusive && rng.random_bool(menu.hold_at_least_share);
        let hold_at_least = match with_hold {
            true => {
                Duration::from_millis(rng.random_range(HOLD_AT_LEAST_MS.0..=HOLD_AT_LEAST_MS.1))
            }
            false => Duration::ZERO,
        };
        // As a scheduled job asks (ShedLock): once, without waiting, so
        // that the acquisition, from which the masters count the hold, is
        // close to the send, from which the check counts it.
        let wait = if with_hold { Duration::ZERO } else { wait };
        let abandon = matches!(ask, Ask::Permit(_)) && rng.random_bool(menu.abandon_share);
        let lock_delay = match abandon {
            true => ABANDONED_DELAY,
            false => Duration::ZERO,
        };
        let mut deadline = match rng.random_bool(menu.short_deadline_share) {
            true => Some(Duration::from_millis(rng.random_range(1..=20))),
            // A retried acquisition: first sent with a deadline shorter
            // than its wait, so it may end DEADLINE_EXCEEDED waiting.
            false if with_id && rng.random_bool(0.5) => {
                Some(Duration::from_millis(rng.random_range(20..=300)))
            }
            false => None,
        };
        let mut replica_home = home;
        let mut attempt = 0;
        // The first attempt's send: with a request id, a retry may take
        // over what that attempt acquired, whose hold the masters count
        // from that acquisition.
        let mut first_sent = None;
        let granted = loop {
            let call = Call {
                resource: &resource,
                ask,
                ttl: menu.ttl,
                wait,
                deadline,
                request_id: request_id.as_deref(),
                hold_at_least,
                lock_delay,
            };
            let (replica, sent, received, outcome) = acquire(&shared, replica_home, &call).await;
            first_sent.get_or_insert(sent);
            match outcome {
                Ok(lock) => break Some((replica, sent, received, lock)),
                Err((failure, message)) => {
                    log.failed.push(shared.failed(
                        id,
                        replica,
                        (ask.kind(), Via::Unary),
                        std::slice::from_ref(&resource),
                        request_id.as_deref(),
                        (sent, received),
                        (failure, message),
                    ));
                    if request_id.is_none() || !retried(failure) || attempt >= RETRIES {
                        if failure != Failure::Status(tonic::Code::Aborted) {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        break None;
                    }
                    attempt += 1;
                    log.retries += 1;
                    deadline = None;
                    // The same replica or the other one.
                    replica_home = home + rng.random_range(0..2);
                    if shared.routes.pick(replica_home).0 != replica {
                        tokio::time::sleep(OTHER_REPLICA_GAP).await;
                    }
                }
            }
        };
        let Some((replica, sent, received, lock)) = granted else {
            continue;
        };
        log.retried_grants += usize::from(attempt > 0);
        let mut grant = shared.grant(Workload::Contended, id, replica, &lock);
        grant.kind = ask.kind();
        grant.request_id = request_id;
        grant.hold_at_least = hold_at_least;
        grant.hold_from = first_sent.unwrap_or(sent);
        let first = Window::of_call(sent, received, validity(&lock));
        (grant.sent, grant.received, grant.valid_until) = (sent, received, first.end);
        grant.windows.push(first);
        if abandon {
            grant.cs_end = received;
            grant.left_to_expire = Some((menu.ttl, lock_delay));
            log.grants.push(grant);
            continue;
        }
        let room = grant.valid_until.saturating_sub(clock.now());
        let work = Duration::from_millis(rng.random_range(menu.work_ms.0..=menu.work_ms.1));
        let work = work.min(room);
        if rng.random_bool(menu.extend_share) {
            tokio::time::sleep(work / 2).await;
            shared.extend(home, &lock, menu.ttl, &mut grant).await;
            tokio::time::sleep(work / 2).await;
        } else {
            tokio::time::sleep(work).await;
        }
        grant.cs_end = clock.now();
        grant.release = Some(shared.release(home, &lock).await);
        log.grants.push(grant);
    }
    log
}

/// An Acquire with a 1-20 ms gRPC deadline of `resource`, which nobody
/// else uses, sent as the contract asks of clients (lock.proto,
/// DEADLINE_EXCEEDED): with a request id, and after DEADLINE_EXCEEDED or
/// CANCELLED (the answer may have been a grant still on its way), a
/// Release of the token it derives. The masters are read
/// [`leftovers::SETTLE`] later (in a task of its own, so the client goes
/// on).
async fn short_deadline_on_fresh(
    shared: &Arc<Shared>,
    rng: &mut StdRng,
    id: u32,
    home: usize,
    resource: &str,
    log: &mut ClientLog,
) {
    let id_text = request_id(rng);
    let call = Call {
        resource,
        ask: Ask::Exclusive,
        ttl: leftovers::TTL,
        wait: Duration::ZERO,
        deadline: Some(Duration::from_millis(rng.random_range(1..=20))),
        request_id: Some(&id_text),
        hold_at_least: Duration::ZERO,
        lock_delay: Duration::ZERO,
    };
    let (replica, sent, received, outcome) = acquire(shared, home, &call).await;
    let failure = match outcome {
        Ok(lock) => {
            let mut grant = shared.grant(Workload::Uncontended, id, replica, &lock);
            let window = Window::of_call(sent, received, validity(&lock));
            (grant.sent, grant.received, grant.valid_until) = (sent, received, window.end);
            grant.windows.push(window);
            grant.cs_end = received;
            grant.release = Some(shared.release(home, &lock).await);
            log.grants.push(grant);
            return;
        }
        Err((failure, message)) => {
            log.failed.push(shared.failed(
                id,
                replica,
                (Kind::Plain, Via::Unary),
                &[resource.to_owned()],
                None,
                (sent, received),
                (failure, message),
            ));
            failure
        }
    };
    let deadline_exceeded = match failure {
        Failure::Status(tonic::Code::DeadlineExceeded) => true,
        Failure::Status(tonic::Code::Cancelled) => false,
        _ => return,
    };
    if let Ok(id) = redlockd::redlock::RequestId::parse(&id_text) {
        let derived = Lock {
            resource: resource.to_owned(),
            token: redlockd::redlock::Token::derive(&id, resource)
                .expose()
                .to_owned(),
            ..Lock::default()
        };
        let _ = shared.release(home, &derived).await;
    }
    let (shared, resource) = (Arc::clone(shared), resource.to_owned());
    log.probes.push(tokio::spawn(async move {
        tokio::time::sleep_until(shared.clock.deadline(received + leftovers::SETTLE)).await;
        let read_from = shared.clock.now();
        let (answered_masters, present) = leftovers::read(&shared.masters, &resource).await;
        Probe {
            resource,
            replica,
            sent,
            answered: received,
            deadline_exceeded,
            read_from,
            read_until: shared.clock.now(),
            answered_masters,
            present,
        }
    }));
}
