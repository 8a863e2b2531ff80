//! W2, contended hand-off: wake-ups (`redlock.wake_on_release = true`, the
//! default: a local FIFO queue woken by releases) vs blind Redlock polling
//! (`false`: each waiter retries after a jittered 5-50 ms pause).
//!
//! Workload W2, "contended hand-off": `--contenders` tasks (16), each on its
//! own gRPC connection, loop on ONE resource: Acquire (ttl 10 s, wait 30 s),
//! hold `--hold-us`, Release, until `--duration`; Acquires still waiting then
//! are dropped (the daemon releases what it grants after that). A hand-off is
//! a grant to a *different* contender than the previous grant; its latency
//! runs from the previous holder sending Release to the next holder receiving
//! its grant, on one `std::time::Instant` clock. Also reported: the longest
//! Acquire wait, and grants per contender (a low minimum means starvation);
//! the table adds where time goes: the Release round trip, and one Acquire
//! per client on a free resource (same `wait`), timed before the run.
//!
//! With `--dev` it runs two daemon processes over the local masters, one
//! after the other (wake-ups, then polling), and splits the CPU per grant
//! into masters, daemon and client (`crate::proc::CpuMeter`); `--addr` (repeatable) runs
//! against running daemons instead. Holds below 1 ms are rounded up by the
//! tokio timer. `--w2-modes` adds the peers, `redsync` and `etcd`
//! ([`crate::w2_peers`]): the same contenders in a `redlockd-peers`
//! process, each waiting as that peer does by default.

use crate::peers::{Peer, PeerTarget};
use crate::proc::{CpuMeter, CpuSplit};
use crate::setup::{connect, proto_duration, Client};
use crate::stats::{label, ms, pct, sorted, us};
use crate::w2_log::{ContenderLog, Grant};
use crate::{emit, Args, BoxError};
use redlockd_proto::pb::{AcquireRequest, Lock, ReleaseRequest};
use redlockd_testkit::masters::LocalMasters;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::Code;

/// Lease asked for by every W2 Acquire.
const W2_TTL: Duration = Duration::from_secs(10);
/// Longest each W2 Acquire waits for the lock.
const W2_WAIT: Duration = Duration::from_secs(30);

/// What W2 runs (`--w2-modes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum W2Mode {
    /// A daemon with wake-ups (`redlock.wake_on_release = true`), `--dev`.
    Wake,
    /// A daemon with blind polling (`wake_on_release = false`), `--dev`.
    Poll,
    /// go-redsync over the masters, at its own retry settings.
    Redsync,
    /// etcd 3.7's `concurrency.Mutex`, its blocking `Lock`.
    Etcd,
}

impl W2Mode {
    /// The peer this mode runs, if it is one.
    fn peer(self) -> Option<Peer> {
        match self {
            W2Mode::Wake | W2Mode::Poll => None,
            W2Mode::Redsync => Some(Peer::Redsync),
            W2Mode::Etcd => Some(Peer::Etcd),
        }
    }
}

/// Every W2 run, in the order of `--w2-modes` (the daemon's with `--dev`
/// only), then against each `--addr`; prints each JSON line as it ends.
pub(crate) async fn run_all(
    args: &Args,
    masters: Option<&LocalMasters>,
) -> Result<Vec<W2Report>, BoxError> {
    let params = W2Params {
        contenders: args.contenders as usize,
        hold: Duration::from_micros(args.hold_us),
        duration: args.duration,
    };
    let pid = std::process::id();
    let mut reports = Vec::new();
    let mut report = |r: W2Report| {
        emit(&r.json_line());
        reports.push(r);
    };
    for &w2_mode in &args.w2_modes {
        if let Some(peer) = w2_mode.peer() {
            if let Some(outcome) = run_peer(args, masters, peer, params).await {
                report(outcome?);
            }
            continue;
        }
        // The daemon's runs are `--dev`'s; `--addr` runs come after.
        let Some(masters) = masters else { continue };
        let (mode, wake) = match w2_mode {
            W2Mode::Poll => ("poll", false),
            _ => ("wake", true),
        };
        let mut settings = args.daemon_settings.clone();
        settings.push(("redlock.wake_on_release".to_owned(), wake.to_string()));
        let daemon = crate::setup::spawn_daemon(&masters.urls(), &settings)?;
        tracing::info!(mode, addr = %daemon.addr, "W2 for {:?}", params.duration);
        let resource = format!("bench/w2/{mode}/{pid}");
        let meter = CpuMeter {
            masters: crate::master_pids(Some(masters)),
            daemon: Some(daemon.pid),
            client: None,
        };
        let outcome = w2_contended_handoff(daemon.addr, mode, &resource, params, &meter).await;
        crate::setup::stop_process(daemon).await;
        report(outcome?);
    }
    for (i, addr) in args.addr.iter().enumerate() {
        tracing::info!(%addr, "W2 for {:?}", params.duration);
        let (mode, resource) = (format!("addr={addr}"), format!("bench/w2/{i}/{pid}"));
        let meter = CpuMeter::default();
        report(w2_contended_handoff(*addr, &mode, &resource, params, &meter).await?);
    }
    Ok(reports)
}

/// W2 against a peer, unless there is nothing to run it against (a
/// warning says why): the figures, or the error that ended the run.
async fn run_peer(
    args: &Args,
    masters: Option<&LocalMasters>,
    peer: Peer,
    params: W2Params,
) -> Option<Result<W2Report, BoxError>> {
    let nodes = masters.map_or_else(|| args.nodes.clone(), LocalMasters::urls);
    let target = match PeerTarget::open(peer, args, &nodes).await {
        Ok(target) => target,
        Err(reason) => {
            tracing::warn!(mode = peer.name(), "W2 mode skipped: {reason}");
            return None;
        }
    };
    if !params.hold.is_zero() {
        tracing::warn!(
            mode = peer.name(),
            "the peers release at once: --hold-us is the daemon's only"
        );
    }
    tracing::info!(mode = peer.name(), "W2 for {:?}", params.duration);
    let params = W2Params {
        hold: Duration::ZERO,
        ..params
    };
    let meter = target.meter(&crate::master_pids(masters));
    let (contenders, duration) = (params.contenders, params.duration);
    let outcome = crate::w2_peers::run(&target, peer.name(), contenders, duration, &meter).await;
    target.close().await;
    Some(outcome.map(|run| W2Report::new(peer.name(), params, &run.logs, run.free, run.cpu)))
}

/// The knobs of W2.
#[derive(Clone, Copy)]
struct W2Params {
    contenders: usize,
    hold: Duration,
    duration: Duration,
}

/// W2: `contenders` tasks pass one lock around through the daemon at `addr`.
async fn w2_contended_handoff(
    addr: SocketAddr,
    mode: &str,
    resource: &str,
    params: W2Params,
    meter: &CpuMeter,
) -> Result<W2Report, BoxError> {
    let connecting = (0..params.contenders).map(|_| connect(addr));
    let mut clients = futures::future::try_join_all(connecting).await?;
    // Before the clock starts: use every connection once, then time one
    // uncontended Acquire per client: the baseline cost of a grant.
    let (warm, mut uncontended) = (format!("{resource}/warm-up"), Vec::new());
    for round in 0..2 {
        for client in &mut clients {
            let sent = Instant::now();
            let lock = client.acquire(acquire_request(&warm, "warm-up")).await?;
            if round == 1 {
                uncontended.push(sent.elapsed());
            }
            if let Some(lock) = lock.into_inner().lock {
                client.release(release_request(lock)).await?;
            }
        }
    }
    let cpu = meter.start();
    let clock = Instant::now();
    let deadline = tokio::time::Instant::from_std(clock + params.duration);
    let tasks = clients.into_iter().enumerate().map(|(id, client)| {
        let resource = resource.to_owned();
        tokio::spawn(contender(
            id,
            client,
            resource,
            params.hold,
            clock,
            deadline,
        ))
    });
    let logs = futures::future::try_join_all(tasks).await?;
    let grants = logs.iter().map(|log| log.grants.len()).sum();
    let cpu = meter.per_unit(&cpu, grants);
    Ok(W2Report::new(mode, params, &logs, uncontended, cpu))
}

fn acquire_request(resource: &str, owner: &str) -> AcquireRequest {
    AcquireRequest {
        resource: resource.to_owned(),
        ttl: Some(proto_duration(W2_TTL)),
        wait: Some(proto_duration(W2_WAIT)),
        owner: owner.to_owned(),
        request_id: String::new(),
        ..Default::default()
    }
}

fn release_request(lock: Lock) -> ReleaseRequest {
    let (resource, token) = (lock.resource, lock.token);
    ReleaseRequest { resource, token }
}

/// One W2 contender: acquire, hold, release, until `deadline`; an Acquire
/// still waiting then is dropped (the daemon releases a late grant itself).
async fn contender(
    id: usize,
    mut client: Client,
    resource: String,
    hold: Duration,
    clock: Instant,
    deadline: tokio::time::Instant,
) -> ContenderLog {
    let mut log = ContenderLog::default();
    let owner = format!("bench-{id}");
    while tokio::time::Instant::now() < deadline {
        let acquire_sent = clock.elapsed();
        let request = client.acquire(acquire_request(&resource, &owner));
        let lock = match tokio::time::timeout_at(deadline, request).await {
            Ok(Ok(response)) => response.into_inner().lock,
            Ok(Err(status)) => {
                log.errors += 1;
                tracing::warn!(id, code = ?status.code(), "Acquire: {}", status.message());
                match status.code() {
                    Code::Unavailable | Code::Aborted | Code::DeadlineExceeded => continue,
                    _ => break,
                }
            }
            Err(_) => {
                log.cut_wait = Some(clock.elapsed().saturating_sub(acquire_sent));
                break;
            }
        };
        let granted = clock.elapsed();
        let Some(lock) = lock else {
            log.errors += 1;
            tracing::warn!(id, "Acquire answered without a lock");
            break;
        };
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        let release_sent = clock.elapsed();
        let release_done = match client.release(release_request(lock)).await {
            Ok(response) => {
                log.not_held += u64::from(!response.into_inner().was_held);
                Some(clock.elapsed())
            }
            Err(status) => {
                log.errors += 1;
                tracing::warn!(id, code = ?status.code(), "Release: {}", status.message());
                None
            }
        };
        log.grants.push(Grant {
            contender: id,
            acquire_sent,
            granted,
            release_sent,
            release_done,
        });
    }
    log
}

/// The figures of one W2 run. Samples are sorted.
pub(crate) struct W2Report {
    mode: String,
    params: W2Params,
    grants: usize,
    /// Consecutive grants to the same contender: not hand-offs.
    regrants: usize,
    /// Grants that arrived before the previous holder sent its Release:
    /// mutual exclusion broken (never expected).
    overlaps: usize,
    /// Previous holder's Release sent -> next, different, holder's grant.
    handoff: Vec<Duration>,
    /// Release round trips.
    release_rpc: Vec<Duration>,
    /// One Acquire per client on a free resource, before the run.
    uncontended: Vec<Duration>,
    /// Acquire waits (sent to granted) that ended in a grant.
    waits: Vec<Duration>,
    /// Longest Acquire wait cut off at the deadline.
    longest_cut: Option<Duration>,
    grants_min: usize,
    grants_max: usize,
    errors: u64,
    not_held: u64,
    /// CPU per grant, by process kind, over the window.
    cpu: CpuSplit,
}

impl W2Report {
    /// The figures of `logs`, one per contender; `base`: one uncontended
    /// acquisition per contender, timed before the run.
    fn new(
        mode: &str,
        params: W2Params,
        logs: &[ContenderLog],
        base: Vec<Duration>,
        cpu: CpuSplit,
    ) -> Self {
        let mut grants: Vec<&Grant> = logs.iter().flat_map(|l| &l.grants).collect();
        grants.sort_unstable_by_key(|g| g.granted);
        let (mut handoff, mut regrants, mut overlaps) = (Vec::new(), 0, 0);
        for pair in grants.windows(2) {
            let (previous, next) = (pair[0], pair[1]);
            if next.granted < previous.release_sent {
                overlaps += 1;
            } else if next.contender == previous.contender {
                regrants += 1;
            } else {
                handoff.push(next.granted - previous.release_sent);
            }
        }
        if overlaps > 0 {
            tracing::warn!(mode, overlaps, "grants overlapping the previous holder's");
        }
        let release_rpc = grants
            .iter()
            .filter_map(|g| Some(g.release_done? - g.release_sent));
        let per_contender = logs.iter().map(|l| l.grants.len());
        W2Report {
            mode: mode.to_owned(),
            params,
            grants: grants.len(),
            regrants,
            overlaps,
            handoff: sorted(handoff),
            release_rpc: sorted(release_rpc.collect()),
            uncontended: sorted(base),
            waits: sorted(grants.iter().map(|g| g.granted - g.acquire_sent).collect()),
            longest_cut: logs.iter().filter_map(|l| l.cut_wait).max(),
            grants_min: per_contender.clone().min().unwrap_or(0),
            grants_max: per_contender.max().unwrap_or(0),
            errors: logs.iter().map(|l| l.errors).sum(),
            not_held: logs.iter().map(|l| l.not_held).sum(),
            cpu,
        }
    }

    fn handoffs_per_s(&self) -> f64 {
        self.handoff.len() as f64 / self.params.duration.as_secs_f64()
    }

    /// The machine-readable line (written by hand: numbers and one label).
    pub(crate) fn json_line(&self) -> String {
        let longest_ms = self.waits.last().map_or(0.0, |d| d.as_secs_f64() * 1e3);
        format!(
            "{{\"workload\":\"W2\",\"mode\":\"{}\",\"contenders\":{},\"duration_s\":{:.3},\
             \"handoffs\":{},\"handoffs_per_s\":{:.1},\"handoff_p50_us\":{},\"handoff_p99_us\":{},\
             \"longest_wait_ms\":{longest_ms:.1},\"grants_min\":{},\"grants_max\":{},\
             \"grants\":{},\"errors\":{},{}}}",
            label(&self.mode),
            self.params.contenders,
            self.params.duration.as_secs_f64(),
            self.handoff.len(),
            self.handoffs_per_s(),
            us(pct(&self.handoff, 50)),
            us(pct(&self.handoff, 99)),
            self.grants_min,
            self.grants_max,
            self.grants,
            self.errors,
            self.cpu.json_fields(),
        )
    }
}

/// A readable comparison of the runs, one column each.
pub(crate) fn print_table(reports: &[W2Report]) {
    type Row = (&'static str, fn(&W2Report) -> String);
    let rows: &[Row] = &[
        ("contenders", |r| r.params.contenders.to_string()),
        ("hold", |r| ms(Some(r.params.hold))),
        ("duration s", |r| {
            format!("{:.1}", r.params.duration.as_secs_f64())
        }),
        ("grants, all", |r| r.grants.to_string()),
        ("re-grants, same holder", |r| r.regrants.to_string()),
        ("hand-offs", |r| r.handoff.len().to_string()),
        ("hand-offs / s", |r| format!("{:.0}", r.handoffs_per_s())),
        ("hand-off p50", |r| ms(pct(&r.handoff, 50))),
        ("hand-off p99", |r| ms(pct(&r.handoff, 99))),
        ("hand-off max", |r| ms(r.handoff.last().copied())),
        ("  Release RPC p50", |r| ms(pct(&r.release_rpc, 50))),
        ("  free Acquire p50", |r| ms(pct(&r.uncontended, 50))),
        ("longest Acquire wait", |r| ms(r.waits.last().copied())),
        ("  cut at the deadline", |r| ms(r.longest_cut)),
        ("grants/contender min/max", |r| {
            format!("{}/{}", r.grants_min, r.grants_max)
        }),
        ("CPU us/grant m/d/c", |r| r.cpu.cell()),
        ("errors/not held/overlaps", |r| {
            format!("{}/{}/{}", r.errors, r.not_held, r.overlaps)
        }),
    ];
    let width = 2 + reports.iter().map(|r| r.mode.len()).fold(20, usize::max);
    let mut out = format!("\nW2 contended hand-off\n{:<28}", "");
    for r in reports {
        out.push_str(&format!("{:>width$}", r.mode));
    }
    for (name, cell) in rows {
        out.push_str(&format!("\n{name:<28}"));
        for r in reports {
            out.push_str(&format!("{:>width$}", cell(r)));
        }
    }
    println!("{out}");
    println!("CPU us/grant m/d/c: the masters (etcd: the etcd server), the daemon, the client (the bench; redsync, etcd: the redlockd-peers process)");
}
