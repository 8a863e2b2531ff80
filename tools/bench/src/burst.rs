//! Bursts: many callers arriving at the same instant, as a fleet does when
//! it reconnects after a daemon replica restarts. Two runs against one
//! `redlockd` process of their own, at its default settings:
//! - `--burst-calls` Acquire calls (distinct resources, ttl 10 s, no wait,
//!   no deadline) started at once on one HTTP/2 connection, as the threads
//!   of one client process would;
//! - `--burst-sessions` `Hold` sessions opened at once, spread over each of
//!   the `--burst-connections` counts of HTTP/2 connections in turn (1, 4
//!   and 16 by default: one client process, a few, a fleet's sidecars
//!   behind one proxy), each count against a daemon process of its own so
//!   that every peak starts from the same idle daemon.
//!
//! Reported: how many were granted, every other outcome by status code,
//! latency from the start of the burst, and the daemon's peak RSS (sampled
//! every 10 ms while the burst lasts). A healthy daemon grants all of them:
//! the masters are healthy, so overload must be queued, and never answered
//! UNAVAILABLE ("masters unreachable").

use crate::proc::ProcSample;
use crate::setup::{self, connect, proto_duration, Client};
use crate::stats::{label, ms, pct, print_columns, sorted, us};
use crate::{emit, BoxError};
use redlockd_proto::pb::hold_event::Event;
use redlockd_proto::pb::hold_request::{Release, Request};
use redlockd_proto::pb::{AcquireRequest, HoldRequest, ReleaseRequest};
use redlockd_testkit::process::DaemonProcess;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

/// Lease of every lock of a burst: long enough to outlast the burst.
const TTL: Duration = Duration::from_secs(30);
/// Longest a burst may take to be answered in full.
const BURST_LIMIT: Duration = Duration::from_secs(120);
/// How often the daemon's RSS is sampled during a burst.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// The figures of one burst.
pub(crate) struct BurstReport {
    /// `acquire` or `hold`.
    pub kind: &'static str,
    /// Calls (or sessions) started at once.
    pub calls: usize,
    /// HTTP/2 connections they shared.
    pub connections: usize,
    /// Those granted.
    pub granted: usize,
    /// The others, by status code name (or "lost", "ended").
    pub failures: BTreeMap<String, usize>,
    /// Time from the burst's start to each grant, sorted.
    pub latency: Vec<Duration>,
    /// Time until every call was answered.
    pub done: Duration,
    /// The daemon's RSS before the burst, KiB.
    pub rss_idle_kb: u64,
    /// Its largest sampled RSS during the burst, KiB.
    pub rss_peak_kb: u64,
}

impl BurstReport {
    /// The machine-readable line.
    pub(crate) fn json_line(&self) -> String {
        let failures: Vec<String> = self
            .failures
            .iter()
            .map(|(code, n)| format!("\"{}\":{n}", label(code)))
            .collect();
        format!(
            "{{\"workload\":\"burst\",\"kind\":\"{}\",\"calls\":{},\"connections\":{},\
             \"granted\":{},\"failures\":{{{}}},\"p50_us\":{},\"p99_us\":{},\"max_us\":{},\
             \"done_s\":{:.3},\"rss_idle_mb\":{:.1},\"rss_peak_mb\":{:.1}}}",
            self.kind,
            self.calls,
            self.connections,
            self.granted,
            failures.join(","),
            us(pct(&self.latency, 50)),
            us(pct(&self.latency, 99)),
            us(self.latency.last().copied()),
            self.done.as_secs_f64(),
            self.rss_idle_kb as f64 / 1024.0,
            self.rss_peak_kb as f64 / 1024.0,
        )
    }
}

/// The Acquire burst, then a Hold burst per count of `connections`, each
/// against a daemon process of its own over `nodes`.
pub(crate) async fn run_all(
    calls: usize,
    sessions: usize,
    connections: &[usize],
    nodes: &[String],
    settings: &[(String, String)],
) -> Result<Vec<BurstReport>, BoxError> {
    let mut reports = Vec::with_capacity(1 + connections.len());
    let daemon = setup::spawn_process(nodes, sessions.max(100_000), settings)?;
    let acquire = acquire_burst(&daemon, calls).await;
    setup::stop_process(daemon).await;
    reports.push(acquire?);
    for &count in connections {
        let daemon = setup::spawn_process(nodes, sessions.max(100_000), settings)?;
        let hold = hold_burst(&daemon, sessions, count).await;
        setup::stop_process(daemon).await;
        reports.push(hold?);
    }
    for report in &reports {
        emit(&report.json_line());
    }
    Ok(reports)
}

/// Samples the daemon's RSS until dropped; the peak when stopped.
struct PeakRss {
    stop: Arc<AtomicBool>,
    sampler: tokio::task::JoinHandle<u64>,
}

impl PeakRss {
    fn start(pid: u32) -> PeakRss {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let sampler = tokio::spawn(async move {
            let mut peak = 0;
            while !stopped.load(Relaxed) {
                if let Ok(sample) = ProcSample::read(pid) {
                    peak = peak.max(sample.rss_kb);
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            peak
        });
        PeakRss { stop, sampler }
    }

    async fn peak(self) -> u64 {
        self.stop.store(true, Relaxed);
        self.sampler.await.unwrap_or(0)
    }
}

/// `calls` Acquire calls at once on one connection; then the grants are
/// released.
async fn acquire_burst(daemon: &DaemonProcess, calls: usize) -> Result<BurstReport, BoxError> {
    let client = connect(daemon.addr).await?;
    let rss_idle_kb = ProcSample::read(daemon.pid)?.rss_kb;
    let peak = PeakRss::start(daemon.pid);
    let run = format!("bench/burst/acquire/{}", std::process::id());
    let started = Instant::now();
    let tasks: Vec<_> = (0..calls)
        .map(|i| {
            let mut client = client.clone();
            let resource = format!("{run}/{i}");
            tokio::spawn(async move {
                let request = AcquireRequest {
                    resource: resource.clone(),
                    ttl: Some(proto_duration(TTL)),
                    wait: None,
                    owner: "redlockd-bench".to_owned(),
                    request_id: String::new(),
                    ..Default::default()
                };
                let answer = client.acquire(request).await;
                let at = started.elapsed();
                match answer {
                    Ok(response) => {
                        let token = response.into_inner().lock.map(|l| l.token);
                        Ok((at, resource, token.unwrap_or_default()))
                    }
                    Err(status) => Err(failure(&status)),
                }
            })
        })
        .collect();
    let answers = tokio::time::timeout(BURST_LIMIT, futures::future::join_all(tasks))
        .await
        .map_err(|_| format!("acquire burst: not answered within {BURST_LIMIT:?}"))?;
    let done = started.elapsed();
    let rss_peak_kb = peak.peak().await;
    let mut report = BurstReport {
        kind: "acquire",
        calls,
        connections: 1,
        granted: 0,
        failures: BTreeMap::new(),
        latency: Vec::with_capacity(calls),
        done,
        rss_idle_kb,
        rss_peak_kb,
    };
    let mut grants = Vec::with_capacity(calls);
    for answer in answers {
        match answer {
            Ok(Ok((at, resource, token))) => {
                report.latency.push(at);
                grants.push((resource, token));
            }
            Ok(Err(code)) => *report.failures.entry(code).or_default() += 1,
            Err(_) => *report.failures.entry("task failed".into()).or_default() += 1,
        }
    }
    report.granted = grants.len();
    report.latency = sorted(report.latency);
    release_all(client, grants).await;
    Ok(report)
}

/// Releases the burst's grants, 64 at a time.
async fn release_all(client: Client, grants: Vec<(String, String)>) {
    use futures::StreamExt;
    futures::stream::iter(grants)
        .for_each_concurrent(64, |(resource, token)| {
            let mut client = client.clone();
            async move {
                let _ = client.release(ReleaseRequest { resource, token }).await;
            }
        })
        .await;
}

/// `sessions` Hold sessions opened at once, spread over `connections`
/// connections; once every one is open or failed, all are released.
async fn hold_burst(
    daemon: &DaemonProcess,
    sessions: usize,
    connections: usize,
) -> Result<BurstReport, BoxError> {
    let mut clients = Vec::with_capacity(connections);
    for _ in 0..connections {
        clients.push(connect(daemon.addr).await?);
    }
    let rss_idle_kb = ProcSample::read(daemon.pid)?.rss_kb;
    let peak = PeakRss::start(daemon.pid);
    // Resources of their own per burst: a daemon stopped after a burst
    // leaves its stragglers' keys on the masters until their ttl.
    let run = format!("bench/burst/hold/{}/{connections}", std::process::id());
    let (stop, stopped) = watch::channel(false);
    let (opened, mut outcomes) = mpsc::unbounded_channel();
    let started = Instant::now();
    let tasks: Vec<_> = (0..sessions)
        .map(|i| {
            let client = clients[i % connections].clone();
            let resource = format!("{run}/{i}");
            let (opened, stopped) = (opened.clone(), stopped.clone());
            tokio::spawn(session(client, resource, started, opened, stopped))
        })
        .collect();
    drop(opened);
    let mut report = BurstReport {
        kind: "hold",
        calls: sessions,
        connections,
        granted: 0,
        failures: BTreeMap::new(),
        latency: Vec::with_capacity(sessions),
        done: Duration::ZERO,
        rss_idle_kb,
        rss_peak_kb: 0,
    };
    let collect = async {
        for _ in 0..sessions {
            match outcomes.recv().await {
                Some(Ok(at)) => report.latency.push(at),
                Some(Err(code)) => *report.failures.entry(code).or_default() += 1,
                None => break,
            }
        }
    };
    let answered = tokio::time::timeout(BURST_LIMIT, collect).await;
    report.done = started.elapsed();
    report.rss_peak_kb = peak.peak().await;
    let _ = stop.send(true);
    if answered.is_err() {
        tracing::warn!("hold burst: not every session answered within {BURST_LIMIT:?}");
    }
    let ending = futures::future::join_all(tasks);
    if tokio::time::timeout(Duration::from_secs(60), ending)
        .await
        .is_err()
    {
        tracing::warn!("hold burst: sessions still open 60 s after the end");
    }
    report.granted = report.latency.len();
    report.latency = sorted(report.latency);
    Ok(report)
}

/// One session: opens, reports its first event's time (or failure), holds
/// until `stop`, then releases.
async fn session(
    mut client: Client,
    resource: String,
    started: Instant,
    opened: mpsc::UnboundedSender<Result<Duration, String>>,
    mut stop: watch::Receiver<bool>,
) {
    let (requests, outgoing) = mpsc::channel(2);
    let first = HoldRequest {
        request: Some(Request::Acquire(AcquireRequest {
            resource,
            ttl: Some(proto_duration(TTL)),
            wait: None,
            owner: "redlockd-bench".to_owned(),
            request_id: String::new(),
            ..Default::default()
        })),
    };
    if requests.send(first).await.is_err() {
        return;
    }
    let mut events = match client.hold(ReceiverStream::new(outgoing)).await {
        Ok(response) => response.into_inner(),
        Err(status) => {
            let _ = opened.send(Err(failure(&status)));
            return;
        }
    };
    match events.message().await.map(|e| e.and_then(|e| e.event)) {
        Ok(Some(Event::Acquired(_))) => {
            let _ = opened.send(Ok(started.elapsed()));
        }
        Ok(Some(Event::Lost(_))) => {
            let _ = opened.send(Err("lost".to_owned()));
            return;
        }
        Ok(_) => {
            let _ = opened.send(Err("ended".to_owned()));
            return;
        }
        Err(status) => {
            let _ = opened.send(Err(failure(&status)));
            return;
        }
    }
    let _ = stop.wait_for(|s| *s).await;
    let release = HoldRequest {
        request: Some(Request::Release(Release {})),
    };
    let _ = requests.send(release).await;
    while let Ok(Some(_)) = events.message().await {}
}

/// A failure's name for the report: its status code; the message is
/// logged (at debug) so that its cause can be looked up.
fn failure(status: &tonic::Status) -> String {
    tracing::debug!(code = ?status.code(), "burst call failed: {}", status.message());
    format!("{:?}", status.code())
}

/// The table of the bursts.
pub(crate) fn print_table(reports: &[BurstReport]) {
    let heads: Vec<String> = reports
        .iter()
        .map(|r| format!("{} x{} /{}", r.kind, r.calls, r.connections))
        .collect();
    let column = |f: &dyn Fn(&BurstReport) -> String| reports.iter().map(f).collect::<Vec<_>>();
    let failures = |r: &BurstReport| {
        let listed: Vec<String> = r.failures.iter().map(|(c, n)| format!("{c} {n}")).collect();
        match listed.is_empty() {
            true => "none".to_owned(),
            false => listed.join(", "),
        }
    };
    let rows = vec![
        ("connections", column(&|r| r.connections.to_string())),
        ("granted", column(&|r| r.granted.to_string())),
        ("failed", column(&failures)),
        ("grant p50", column(&|r| ms(pct(&r.latency, 50)))),
        ("grant p99", column(&|r| ms(pct(&r.latency, 99)))),
        ("all answered", column(&|r| ms(Some(r.done)))),
        (
            "daemon RSS idle / peak",
            column(&|r| {
                format!(
                    "{:.1} / {:.1} MB",
                    r.rss_idle_kb as f64 / 1024.0,
                    r.rss_peak_kb as f64 / 1024.0
                )
            }),
        ),
    ];
    print_columns("Bursts: callers arriving at once", &heads, &rows);
}
