//! The workload: many concurrent gRPC clients spread over the replicas.
//!
//! - Contended clients loop on a few hot resources: Acquire (with a wait),
//!   a critical section that updates both registers of the resource, and
//!   Release. Some critical sections extend the lock half-way; a few sleep
//!   past their validity before writing (Kleppmann's paused client).
//! - Uncontended clients acquire a fresh resource name each time, without
//!   waiting, and release it at once: every failure is an availability
//!   miss, never contention.
//!
//! Every loop ends at the deadline; every call has a client-side timeout.

use crate::history::{
    Attempt, Clock, ExtendOutcome, FailedCall, Failure, Grant, Kind, ReleaseRecord, Time, Via,
    Window, Workload,
};
use crate::registers::Registers;
use crate::replicas::Routes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, ExtendRequest, Lock, ReleaseRequest};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Added to a call's own wait for its client-side timeout.
const CALL_SLACK: Duration = Duration::from_millis(1500);

/// The shape of the workload.
#[derive(Debug, Clone)]
pub(crate) struct Profile {
    /// Clients on the hot resources.
    pub contended_clients: usize,
    /// How many hot resources.
    pub hot: usize,
    /// Clients on fresh resources.
    pub uncontended_clients: usize,
    /// Lease of a contended lock.
    pub contended_ttl: Duration,
    /// How long a contended Acquire waits.
    pub contended_wait: Duration,
    /// Work inside an ordinary critical section, in ms (inclusive range).
    pub work_ms: (u64, u64),
    /// Share of critical sections that hold on for a long time instead,
    /// and for how long (ms): the long leases of the counterfactual.
    pub long_hold: (f64, u64, u64),
    /// Share of critical sections that sleep past their validity.
    pub pause_share: f64,
    /// Share of critical sections that Extend half-way.
    pub extend_share: f64,
    /// Lease of an uncontended lock.
    pub uncontended_ttl: Duration,
    /// Pause between two uncontended acquisitions, in ms.
    pub uncontended_gap_ms: (u64, u64),
    /// Clients holding `Hold` sessions on the hot resources
    /// (`crate::sessions`).
    pub session_clients: usize,
}

/// What every client shares.
pub(crate) struct Shared {
    /// The run's clock.
    pub clock: Clock,
    /// No new operation starts after this.
    pub deadline: Time,
    /// How to reach the replicas.
    pub routes: Arc<Routes>,
    /// Names of the hot resources, index-aligned with `registers`.
    pub hot: Vec<String>,
    /// The registers of each hot resource.
    pub registers: Vec<Arc<Registers>>,
    /// The registers of each election (`crate::elections`), apart from
    /// the lock of the same name's.
    pub election_registers: Vec<Arc<Registers>>,
    /// Grant ids.
    pub next_grant: AtomicU64,
    /// Prefix of resource names (unique per run).
    pub tag: String,
    /// The masters' own ports (not their proxies'), to read keys directly.
    pub masters: Vec<u16>,
    /// The replicas' gRPC addresses, for new connections.
    pub addrs: Vec<std::net::SocketAddr>,
    /// The planned rolling restart, if any (`--mix`): the long holders
    /// hold across it.
    pub rolling: Option<(Time, Time)>,
}

/// What one client recorded.
#[derive(Debug, Default)]
pub(crate) struct ClientLog {
    /// Its grants.
    pub grants: Vec<Grant>,
    /// Its uncontended attempts.
    pub attempts: Vec<Attempt>,
    /// Its failed contended Acquires.
    pub contended_failures: Vec<Failure>,
    /// Its Acquires that were not granted, with what they asked.
    pub failed: Vec<FailedCall>,
    /// Reads of the masters after short-deadline Acquires
    /// (`crate::leftovers`), still running.
    pub probes: Vec<tokio::task::JoinHandle<crate::leftovers::Probe>>,
    /// Acquires retried with their request id, and acquisitions granted
    /// on a retry.
    pub retries: usize,
    pub retried_grants: usize,
    /// Hold sessions retried with their request id on a new connection,
    /// and those retries granted (`crate::hold_retry`).
    pub hold_retries: usize,
    pub hold_retries_granted: usize,
    /// Its sessions told `draining`.
    pub drained: usize,
}

fn proto(d: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(d).ok()
}

fn validity(lock: &Lock) -> Duration {
    lock.validity
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

fn between(rng: &mut StdRng, (lo, hi): (u64, u64)) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi.max(lo)))
}

/// A call bounded by `limit`; a failure comes with the status message.
async fn call_with_message<T>(
    limit: Duration,
    request: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, (Failure, String)> {
    match tokio::time::timeout(limit, request).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err((Failure::Status(status.code()), status.message().to_owned())),
        Err(_) => Err((Failure::TimedOut, format!("no answer within {limit:?}"))),
    }
}

/// A call bounded by `limit`.
async fn call<T>(
    limit: Duration,
    request: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, Failure> {
    call_with_message(limit, request)
        .await
        .map_err(|(failure, _)| failure)
}

impl Shared {
    /// Acquire `resource` through the replica `home` prefers: (replica,
    /// sent, received, outcome).
    async fn acquire(
        &self,
        home: usize,
        resource: &str,
        ttl: Duration,
        wait: Duration,
    ) -> (usize, Time, Time, Result<Lock, (Failure, String)>) {
        let (replica, channel) = self.routes.pick(home);
        let request = AcquireRequest {
            resource: resource.to_owned(),
            ttl: proto(ttl),
            wait: proto(wait),
            owner: "chaos".to_owned(),
            request_id: String::new(),
            ..Default::default()
        };
        let sent = self.clock.now();
        let mut client = LockServiceClient::new(channel);
        let answer = call_with_message(wait + CALL_SLACK, client.acquire(request)).await;
        let received = self.clock.now();
        let missing = || (Failure::Status(tonic::Code::Internal), "no lock".to_owned());
        let lock = answer.and_then(|a| a.lock.ok_or_else(missing));
        (replica, sent, received, lock)
    }

    /// Extends `lock` and records it in `grant` (a successful one adds a
    /// window).
    pub(crate) async fn extend(&self, home: usize, lock: &Lock, ttl: Duration, grant: &mut Grant) {
        let (_, channel) = self.routes.pick(home);
        let request = ExtendRequest {
            resource: lock.resource.clone(),
            token: lock.token.clone(),
            ttl: proto(ttl),
        };
        let sent = self.clock.now();
        let answer = call(CALL_SLACK, LockServiceClient::new(channel).extend(request)).await;
        let received = self.clock.now();
        let outcome = match answer {
            Ok(answer) => match answer.lock {
                Some(extended) => ExtendOutcome::Ok(validity(&extended)),
                None => ExtendOutcome::Failed(tonic::Code::Internal),
            },
            Err(Failure::Status(tonic::Code::FailedPrecondition)) => ExtendOutcome::Lost,
            Err(Failure::Status(code)) => ExtendOutcome::Failed(code),
            Err(Failure::TimedOut) => ExtendOutcome::Unknown,
        };
        grant.extended(sent, received, outcome);
    }

    /// The record of an Acquire of `resources` that was not granted.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn failed(
        &self,
        client: u32,
        replica: usize,
        (kind, via): (Kind, Via),
        resources: &[String],
        request_id: Option<&str>,
        (sent, received): (Time, Time),
        (failure, message): (Failure, String),
    ) -> FailedCall {
        FailedCall {
            id: self.next_id(),
            client,
            replica,
            via,
            kind,
            resources: resources.to_vec(),
            request_id: request_id.map(str::to_owned),
            sent,
            received,
            failure,
            message,
        }
    }

    /// A new call id (shared with the grant ids).
    pub(crate) fn next_id(&self) -> u64 {
        self.next_grant.fetch_add(1, Ordering::Relaxed)
    }

    /// Releases `lock`, once more through another replica if the first
    /// call fails (a token is valid on any replica). The record spans both
    /// calls: the holder gave the lock up when it sent the first.
    pub(crate) async fn release(&self, home: usize, lock: &Lock) -> ReleaseRecord {
        let sent = self.clock.now();
        let (mut outcome, mut calls) = (Err(Failure::TimedOut), 0);
        let mut first_failure = None;
        for attempt in 0..2 {
            let (_, channel) = self.routes.pick(home + attempt);
            let request = ReleaseRequest {
                resource: lock.resource.clone(),
                token: lock.token.clone(),
            };
            let answer = call(CALL_SLACK, LockServiceClient::new(channel).release(request)).await;
            outcome = answer.map(|a| a.was_held);
            calls += 1;
            if calls == 1 {
                first_failure = outcome.err();
            }
            if outcome.is_ok() {
                break;
            }
        }
        ReleaseRecord {
            sent,
            received: self.clock.now(),
            outcome,
            calls,
            first_failure,
        }
    }

    pub(crate) fn grant(
        &self,
        workload: Workload,
        client: u32,
        replica: usize,
        lock: &Lock,
    ) -> Grant {
        let id = self.next_id();
        Grant {
            id,
            call: id,
            resource: lock.resource.clone(),
            kind: Kind::Plain,
            via: Via::Unary,
            // No token known (a frozen child's grant): one of its own, so
            // that it is never taken for another grant's lock.
            token: match lock.token.is_empty() {
                true => format!("untold-{id}"),
                false => lock.token.clone(),
            },
            permit: lock.permit,
            request_id: None,
            extends: Vec::new(),
            workload,
            client,
            replica,
            fence: lock.fence,
            sent: Time::ZERO,
            received: Time::ZERO,
            windows: Vec::new(),
            valid_until: Time::ZERO,
            paused: false,
            cs_end: Time::ZERO,
            release: None,
            hold_at_least: Duration::ZERO,
            hold_from: Time::ZERO,
            left_to_expire: None,
        }
    }
}

/// One contended client until the deadline.
pub(crate) async fn contended(
    id: u32,
    shared: Arc<Shared>,
    profile: Profile,
    seed: u64,
) -> ClientLog {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0xC0);
    let (home, clock, mut log) = (id as usize, shared.clock, ClientLog::default());
    while clock.now() < shared.deadline {
        let hot = rng.random_range(0..shared.hot.len());
        let wait = profile
            .contended_wait
            .min(shared.deadline.saturating_sub(clock.now()));
        let (replica, sent, received, answer) = shared
            .acquire(home, &shared.hot[hot], profile.contended_ttl, wait)
            .await;
        let lock = match answer {
            Ok(lock) => lock,
            Err((failure, message)) => {
                log.contended_failures.push(failure);
                log.failed.push(shared.failed(
                    id,
                    replica,
                    (Kind::Plain, Via::Unary),
                    &shared.hot[hot..=hot],
                    None,
                    (sent, received),
                    (failure, message),
                ));
                if failure != Failure::Status(tonic::Code::Aborted) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
        };
        let mut grant = shared.grant(Workload::Contended, id, replica, &lock);
        let first = Window::of_call(sent, received, validity(&lock));
        (grant.sent, grant.received, grant.valid_until) = (sent, received, first.end);
        grant.windows.push(first);
        if grant.stale_on_arrival() {
            // No guarantee left (counted from the send): hands the lock back.
            grant.cs_end = received;
            grant.release = Some(shared.release(home, &lock).await);
            log.grants.push(grant);
            continue;
        }
        let registers = &shared.registers[hot];
        let fenced = registers.check_in(&clock, grant.id, lock.fence, grant.valid_until);
        let plain = registers.read_plain();
        if rng.random_bool(profile.pause_share) {
            // Kleppmann: the holder stops past its validity, then writes.
            grant.paused = true;
            let wake = grant.valid_until + between(&mut rng, (20, 200));
            tokio::time::sleep_until(clock.deadline(wake)).await;
        } else {
            let (long_share, lo, hi) = profile.long_hold;
            let mut work = match rng.random_bool(long_share) {
                true => between(&mut rng, (lo, hi)),
                false => between(&mut rng, profile.work_ms),
            };
            // Never past the validity on purpose: that is the pause's job.
            let room = grant
                .valid_until
                .saturating_sub(clock.now() + Duration::from_millis(50));
            work = work.min(room);
            if rng.random_bool(profile.extend_share) {
                tokio::time::sleep(work / 2).await;
                shared
                    .extend(home, &lock, profile.contended_ttl, &mut grant)
                    .await;
                tokio::time::sleep(work / 2).await;
            } else {
                tokio::time::sleep(work).await;
            }
            registers.write_plain(&clock, grant.id, plain, grant.valid_until);
        }
        if let Some(read) = fenced {
            registers.write_fenced(&clock, grant.id, lock.fence, read, grant.valid_until);
        }
        grant.cs_end = clock.now();
        grant.release = Some(shared.release(home, &lock).await);
        log.grants.push(grant);
    }
    log
}

/// One uncontended client until the deadline.
pub(crate) async fn uncontended(
    id: u32,
    shared: Arc<Shared>,
    profile: Profile,
    seed: u64,
) -> ClientLog {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0x0C);
    let (home, clock, mut log) = (id as usize, shared.clock, ClientLog::default());
    let mut n = 0u64;
    while clock.now() < shared.deadline {
        let resource = format!("{}/free/{id}/{n}", shared.tag);
        n += 1;
        let (replica, sent, received, answer) = shared
            .acquire(home, &resource, profile.uncontended_ttl, Duration::ZERO)
            .await;
        log.attempts.push(Attempt {
            replica,
            sent,
            received,
            outcome: answer.as_ref().map(|_| ()).map_err(|(f, _)| *f),
            message: answer.as_ref().err().map(|(_, m)| m.clone()),
        });
        if let Ok(lock) = answer {
            let mut grant = shared.grant(Workload::Uncontended, id, replica, &lock);
            let window = Window::of_call(sent, received, validity(&lock));
            (grant.sent, grant.received, grant.valid_until) = (sent, received, window.end);
            grant.windows.push(window);
            grant.cs_end = received;
            grant.release = Some(shared.release(home, &lock).await);
            log.grants.push(grant);
        }
        tokio::time::sleep(between(&mut rng, profile.uncontended_gap_ms)).await;
    }
    log
}
