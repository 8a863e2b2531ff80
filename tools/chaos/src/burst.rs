//! Bursts: a few times a run, where the fault plan has every
//! master healthy for a while ([`times`]), `--bursts` Acquire calls start at once
//! through one HTTP/2 connection (a replica's shared channel, the one the
//! checking clients use too), while the checker keeps checking. Most go to
//! distinct resources; [`HOT_SHARE`] of them to a few burst-hot resources
//! of their own (not the checked hot resources, whose holders must all be
//! in the history), where all but one are refused ABORTED. Granted locks
//! are released at once.
//!
//! Every answer is recorded with its code. Overload must be queued or
//! refused RESOURCE_EXHAUSTED ("the daemon is overloaded"), never blamed on
//! the masters: a burst call answered UNAVAILABLE while every master is
//! healthy and its replica up is a violation ([`check`]).

use crate::clients::Shared;
use crate::cluster::Cluster;
use crate::faults::{Budget, Plan};
use crate::figures::{masters_faulted, BurstFigures};
use crate::findings::{Check, Findings, Violation};
use crate::history::{Clock, Fault, Time};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, ReleaseRequest};
use redlockd_testkit::proxy::Mode;
use std::sync::Arc;
use std::time::Duration;

/// Share of a burst's calls on the burst-hot resources.
const HOT_SHARE: usize = 4; // one call in four
/// Burst-hot resources.
const HOT: usize = 4;
/// Lease of a burst's locks.
const TTL: Duration = Duration::from_secs(2);
/// The first moment a burst may start (the replicas are serving).
const FIRST: Duration = Duration::from_millis(300);
/// A burst starts only where no master fault is planned for this long.
const QUIET: Duration = Duration::from_millis(1500);
/// At most this many bursts, at least [`SPACING`] apart.
const MAX_BURSTS: usize = 3;
const SPACING: Duration = Duration::from_secs(5);
/// Bound on a whole burst.
const LIMIT: Duration = Duration::from_secs(30);

/// One burst call's answer.
#[derive(Debug, Clone)]
pub(crate) struct BurstCall {
    /// Which burst (0, 1, ...).
    pub burst: usize,
    /// The replica it went to.
    pub replica: usize,
    /// Sent.
    pub sent: Time,
    /// Answered.
    pub received: Time,
    /// `None` when granted, else the status code.
    pub code: Option<tonic::Code>,
    /// The status message of a failure.
    pub message: String,
}

/// When the bursts start: where the plan has every master healthy for
/// [`QUIET`] (a burst with masters faulted could not tell overload from
/// failed masters): the warm-up, the gaps between master faults (rare in
/// `full`) and the healthy tail.
pub(crate) fn times(plan: &Plan, budget: Budget, deadline: Time) -> Vec<Time> {
    let busy: Vec<(Time, Time)> = plan
        .faults
        .iter()
        .filter(|f| f.kind.on_master())
        .map(|f| (f.at, f.at + f.len + budget.after(f.kind)))
        .collect();
    let candidates = std::iter::once(FIRST).chain(busy.iter().map(|(_, end)| *end + FIRST));
    let mut starts: Vec<Time> = candidates
        .filter(|t| *t + QUIET <= deadline)
        .filter(|t| busy.iter().all(|(a, b)| *b <= *t || *a >= *t + QUIET))
        .collect();
    starts.sort_unstable();
    let mut chosen: Vec<Time> = Vec::new();
    for t in starts {
        if chosen.len() < MAX_BURSTS && chosen.last().is_none_or(|last| t >= *last + SPACING) {
            chosen.push(t);
        }
    }
    chosen
}

/// The daemon replica each burst of `times` goes to: in turn, but past a
/// replica the plan kills or drains while the burst starts (its process
/// would find no server, and the burst would not run). With every replica
/// faulted then (at most one is, at a time), the turn's.
pub(crate) fn replicas_for(
    plan: &Plan,
    budget: Budget,
    times: &[Time],
    replicas: usize,
) -> Vec<usize> {
    let faulted = |replica: usize, at: Time| {
        plan.faults.iter().any(|f| {
            !f.kind.on_master()
                && f.target == replica
                && f.at <= at + QUIET
                && at <= f.at + f.len + budget.after(f.kind)
        })
    };
    times
        .iter()
        .enumerate()
        .map(|(k, &at)| {
            (0..replicas)
                .map(|step| (k + step) % replicas)
                .find(|&replica| !faulted(replica, at))
                .unwrap_or(k % replicas.max(1))
        })
        .collect()
}

/// `--unrecorded-burst-outage`: at each of `times`, three masters' links
/// blackholed for [`QUIET`], a fault the history does not record. A
/// counterfactual only: the daemons then rightly answer part of the burst
/// UNAVAILABLE, and [`check`], told every master was healthy, must report
/// it (`short_runs.rs`).
pub(crate) async fn unrecorded_outage(cluster: &Cluster, clock: Clock, times: Vec<Time>) {
    for at in times {
        tokio::time::sleep_until(clock.deadline(at)).await;
        for i in 0..3 {
            cluster.set_mode(i, Mode::Blackhole);
        }
        tokio::time::sleep_until(clock.deadline(at + QUIET)).await;
        for i in 0..3 {
            cluster.set_mode(i, Mode::Pass);
        }
    }
}

/// The hidden first argument of the burst process mode.
pub(crate) const BURST_FLAG: &str = "--burst-client";

/// Fires a burst at each of `times` through its replica, each from a process of its own (this
/// binary with [`BURST_FLAG`]), so that its thousands of tasks do not
/// starve the checker's own tasks (among them the proxies in front of the
/// masters, whose delay the daemon would rightly count against them);
/// every call's answer, and the bursts whose process failed.
pub(crate) async fn bursts(
    shared: Arc<Shared>,
    addrs: Vec<std::net::SocketAddr>,
    times: Vec<(Time, usize)>,
    calls_each: usize,
) -> Fired {
    let clock = shared.clock;
    let (mut fired, mut calls, mut failed) = (0, Vec::new(), Vec::new());
    let start_ns =
        crate::frozen_child::monotonic_ns().saturating_sub(clock.now().as_nanos() as u64);
    for (at, replica) in times {
        tokio::time::sleep_until(clock.deadline(at)).await;
        let Some(addr) = addrs.get(replica) else {
            break;
        };
        match one_burst(&shared, *addr, start_ns, fired, calls_each).await {
            Ok(answers) => {
                calls.extend(answers.into_iter().map(|(sent, received, code)| BurstCall {
                    burst: fired,
                    replica,
                    sent,
                    received,
                    code: code.as_ref().map(|(c, _)| *c),
                    message: code.map(|(_, m)| m).unwrap_or_default(),
                }))
            }
            Err(error) => {
                tracing::warn!("burst {fired}: {error}");
                failed.push((fired, at, error.to_string()));
            }
        }
        fired += 1;
    }
    Fired {
        fired,
        calls,
        failed,
    }
}

/// What [`bursts`] did.
#[derive(Debug, Default)]
pub(crate) struct Fired {
    /// Bursts started.
    pub fired: usize,
    /// Every answer of every burst.
    pub calls: Vec<BurstCall>,
    /// Bursts whose process failed: which, when, why.
    pub failed: Vec<(usize, Time, String)>,
}

/// An answer: sent, received, and the failure's code and message.
type Answer = (Time, Time, Option<(tonic::Code, String)>);

async fn one_burst(
    shared: &Shared,
    addr: std::net::SocketAddr,
    start_ns: u64,
    k: usize,
    calls: usize,
) -> Result<Vec<Answer>, crate::cluster::BoxError> {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .arg(BURST_FLAG)
        .arg(addr.to_string())
        .arg(start_ns.to_string())
        .arg(format!("{}/burst/{k}", shared.tag))
        .arg(format!("{}/burst-hot", shared.tag))
        .arg(calls.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout of the burst")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut answers = Vec::with_capacity(calls);
    let read = async {
        while let Some(line) = lines.next_line().await? {
            let mut words = line.splitn(4, ' ');
            let mut at = || -> Result<Time, crate::cluster::BoxError> {
                Ok(Duration::from_nanos(
                    words.next().ok_or("short line")?.parse()?,
                ))
            };
            let (sent, received) = (at()?, at()?);
            let code: i32 = words.next().ok_or("short line")?.parse()?;
            let failure = (code != 0).then(|| {
                let message = words.next().unwrap_or("").to_owned();
                (tonic::Code::from_i32(code), message)
            });
            answers.push((sent, received, failure));
        }
        Ok::<_, crate::cluster::BoxError>(())
    };
    tokio::time::timeout(LIMIT + LIMIT, read)
        .await
        .map_err(|_| "the burst process did not finish")??;
    let status = child.wait().await?;
    if !status.success() {
        // Its stderr (inherited) says why, e.g. "chaos --burst-client:
        // transport error": a burst that did not run, not one of 0 calls.
        return Err(format!(
            "the burst process exited with {status} after {} answers",
            answers.len()
        )
        .into());
    }
    Ok(answers)
}

/// `--burst-client ADDR START_NS PREFIX HOT_PREFIX CALLS`: CALLS Acquire
/// calls at once through one connection, one line per answer on stdout:
/// `<sent ns> <received ns> <code, 0 = granted> <message>`.
pub(crate) fn burst_main(args: &[String]) -> Result<(), crate::cluster::BoxError> {
    let [addr, start_ns, prefix, hot, calls] = args else {
        return Err("usage: --burst-client ADDR START_NS PREFIX HOT_PREFIX CALLS".into());
    };
    let calls: usize = calls.parse()?;
    let addr: std::net::SocketAddr = addr.parse()?;
    let start_ns: u64 = start_ns.parse()?;
    let now =
        move || Duration::from_nanos(crate::frozen_child::monotonic_ns().saturating_sub(start_ns));
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let channel = redlockd_testkit::client::endpoint(addr)?.connect().await?;
        let tasks: Vec<_> = (0..calls)
            .map(|i| {
                let resource = match i % HOT_SHARE {
                    0 => format!("{hot}/{}", i % HOT),
                    _ => format!("{prefix}/{i}"),
                };
                let mut client = LockServiceClient::new(channel.clone());
                tokio::spawn(async move {
                    let request = AcquireRequest {
                        resource: resource.clone(),
                        ttl: prost_types::Duration::try_from(TTL).ok(),
                        wait: None,
                        owner: "chaos-burst".to_owned(),
                        request_id: String::new(),
                        ..Default::default()
                    };
                    let sent = now();
                    let answer = tokio::time::timeout(LIMIT, client.acquire(request)).await;
                    let received = now();
                    let (code, message) = match answer {
                        Ok(Ok(response)) => {
                            if let Some(lock) = response.into_inner().lock {
                                let release = ReleaseRequest {
                                    resource,
                                    token: lock.token,
                                };
                                let _ = tokio::time::timeout(LIMIT, client.release(release)).await;
                            }
                            (0, String::new())
                        }
                        Ok(Err(status)) => (status.code() as i32, status.message().to_owned()),
                        Err(_) => (
                            tonic::Code::DeadlineExceeded as i32,
                            "client timeout".into(),
                        ),
                    };
                    format!(
                        "{} {} {code} {}",
                        sent.as_nanos(),
                        received.as_nanos(),
                        message.replace('\n', " ")
                    )
                })
            })
            .collect();
        let mut out = std::io::stdout().lock();
        for line in futures::future::join_all(tasks).await.into_iter().flatten() {
            use std::io::Write;
            writeln!(out, "{line}")?;
        }
        Ok(())
    })
}

/// Counts the bursts' codes; UNAVAILABLE with all masters healthy and the
/// replica not faulted is a violation.
pub(crate) fn check(fired: &Fired, faults: &[Fault], findings: &mut Findings) -> BurstFigures {
    let calls = &fired.calls;
    let mut figures = BurstFigures {
        bursts: fired.fired,
        calls: calls.len(),
        failed: fired.failed.clone(),
        ..BurstFigures::default()
    };
    let mut shown = 0;
    for call in calls {
        if figures.per_burst.len() <= call.burst {
            // A burst without answers (its process failed) keeps 0 calls
            // and is not shown as a burst; `failed` says what happened.
            figures
                .per_burst
                .resize(call.burst + 1, (Time::MAX, 0, 0, 0));
        }
        let this = &mut figures.per_burst[call.burst];
        this.0 = this.0.min(call.sent);
        this.1 += 1;
        this.2 += usize::from(call.code.is_none());
        this.3 += usize::from(call.code == Some(tonic::Code::Unavailable));
        let Some(code) = call.code else {
            figures.granted += 1;
            continue;
        };
        let count = figures.codes.entry(format!("{code:?}")).or_default();
        if *count == 0 {
            // One message per code, for whoever reads the run's log.
            tracing::info!("burst answer {code:?}: {:?}", call.message);
        }
        *count += 1;
        if code != tonic::Code::Unavailable {
            continue;
        }
        let replica_faulted = faults.iter().any(|f| {
            !f.kind.on_master()
                && f.target == call.replica
                && f.start <= call.received
                && f.counts_until >= call.sent
        });
        match masters_faulted(faults, call.sent, call.received) {
            0 if !replica_faulted => {
                figures.unavailable_healthy += 1;
                // Every one counts; the first few carry their evidence.
                shown += 1;
                findings.violations.push(Violation {
                    check: Check::BurstUnavailable,
                    detail: match shown <= 3 {
                        true => format!(
                            "burst call on replica {} sent {:.3} s answered {:.3} s: \
                             UNAVAILABLE {:?} with every master healthy",
                            call.replica,
                            call.sent.as_secs_f64(),
                            call.received.as_secs_f64(),
                            call.message
                        ),
                        false => "burst call UNAVAILABLE with every master healthy".into(),
                    },
                });
            }
            _ => figures.unavailable_faulted += 1,
        }
    }
    figures
}
