//! W3, sessions: K `Hold` sessions (ttl 3 s, so the daemon extends each
//! about once a second) kept open for `--w3-duration` against a `redlockd`
//! process of their own. Measured on that process, between the moment all
//! sessions are open and the end: its resident memory (`VmRSS`, sampled each
//! second; the peak is reported too) and CPU time (`utime + stime`), as CPU
//! seconds per session-minute; and the share of extensions that succeeded.

use crate::proc::ProcSample;
use crate::setup::{self, connect, proto_duration, Client};
use crate::stats::label;
use crate::{emit, Args, BoxError};
use redlockd_proto::pb::hold_event::Event;
use redlockd_proto::pb::hold_request::{Release, Request};
use redlockd_proto::pb::{AcquireRequest, HoldRequest};
use redlockd_testkit::process::DaemonProcess;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio_stream::wrappers::ReceiverStream;

/// Lease of every session; the daemon extends at a third of it.
const TTL: Duration = Duration::from_secs(3);
/// Sessions per HTTP/2 connection (the server allows 200 streams on each).
const STREAMS_PER_CONNECTION: usize = 100;
/// Sessions being opened at once (as a crowd of clients would, not all at once).
const OPENING_AT_ONCE: usize = 256;
/// Longest all sessions may take to open.
const OPEN_TIMEOUT: Duration = Duration::from_secs(180);
/// What the sessions saw, all together.
#[derive(Default)]
struct Counters {
    acquired: AtomicU64,
    extended: AtomicU64,
    lost: AtomicU64,
    failed: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> [u64; 3] {
        [&self.extended, &self.lost, &self.failed].map(|c| c.load(Relaxed))
    }
}

/// The figures of one W3 run.
pub(crate) struct W3Report {
    /// Sessions asked for.
    pub sessions: usize,
    /// Sessions that opened (the figures are per open session).
    pub opened: usize,
    /// Sessions whose acquisition failed.
    pub open_failed: u64,
    /// The measured window (all sessions open).
    pub duration: Duration,
    /// How long opening every session took.
    pub open: Duration,
    /// The daemon's RSS before any session, KiB.
    pub rss_idle_kb: u64,
    /// Its RSS at the end of the window, KiB.
    pub rss_kb: u64,
    /// Its largest sampled RSS in the window, KiB.
    pub rss_peak_kb: u64,
    /// Its CPU seconds in the window.
    pub cpu_s: f64,
    /// Extensions that succeeded in the window.
    pub extended: u64,
    /// Sessions that lost their lock, or whose stream failed, in the window.
    pub lost: u64,
}

impl W3Report {
    /// CPU seconds the daemon spent per session and minute.
    pub(crate) fn cpu_per_session_minute(&self) -> f64 {
        self.cpu_s / (self.opened as f64 * self.duration.as_secs_f64() / 60.0)
    }

    /// Succeeded extensions over attempted ones (a lost session is one
    /// failed extension).
    pub(crate) fn success_rate(&self) -> f64 {
        let attempted = self.extended + self.lost;
        match attempted {
            0 => 0.0,
            n => self.extended as f64 / n as f64,
        }
    }

    /// The machine-readable line.
    pub(crate) fn json_line(&self) -> String {
        format!(
            "{{\"workload\":\"W3\",\"mode\":\"{}\",\"sessions\":{},\"opened\":{},\
             \"open_failed\":{},\"duration_s\":{:.3},\
             \"open_s\":{:.3},\"rss_idle_mb\":{:.1},\"rss_mb\":{:.1},\"rss_peak_mb\":{:.1},\
             \"cpu_s\":{:.3},\"cpu_s_per_session_minute\":{:.6},\"extensions\":{},\"lost\":{},\
             \"extension_success_rate\":{:.5}}}",
            label("process"),
            self.sessions,
            self.opened,
            self.open_failed,
            self.duration.as_secs_f64(),
            self.open.as_secs_f64(),
            self.rss_idle_kb as f64 / 1024.0,
            self.rss_kb as f64 / 1024.0,
            self.rss_peak_kb as f64 / 1024.0,
            self.cpu_s,
            self.cpu_per_session_minute(),
            self.extended,
            self.lost,
            self.success_rate(),
        )
    }
}

/// Every W3 run: one daemon process per number of sessions.
pub(crate) async fn run_all(args: &Args, nodes: &[String]) -> Result<Vec<W3Report>, BoxError> {
    let mut reports = Vec::new();
    for &sessions in &args.sessions {
        tracing::info!(sessions, "W3 for {:?}", args.w3_duration);
        let daemon = setup::spawn_process(nodes, sessions.max(100_000), &args.daemon_settings)?;
        let outcome = measure(&daemon, sessions, args.w3_duration).await;
        setup::stop_process(daemon).await;
        let report = outcome?;
        emit(&report.json_line());
        reports.push(report);
    }
    Ok(reports)
}

/// Opens the sessions, measures the daemon for `duration`, ends them.
async fn measure(
    daemon: &DaemonProcess,
    sessions: usize,
    duration: Duration,
) -> Result<W3Report, BoxError> {
    let mut clients = Vec::new();
    for _ in 0..sessions.div_ceil(STREAMS_PER_CONNECTION) {
        clients.push(connect(daemon.addr).await?);
    }
    let idle = ProcSample::read(daemon.pid)?;
    let counters = Arc::new(Counters::default());
    let opening = Arc::new(Semaphore::new(OPENING_AT_ONCE));
    let (stop, stopped) = watch::channel(false);
    let started = Instant::now();
    let run_id = format!("bench/w3/{sessions}/{}", std::process::id());
    let tasks: Vec<_> = (0..sessions)
        .map(|i| {
            let client = clients[i / STREAMS_PER_CONNECTION].clone();
            let resource = format!("{run_id}/{i}");
            let (counters, opening) = (Arc::clone(&counters), Arc::clone(&opening));
            tokio::spawn(session(
                client,
                resource,
                counters,
                opening,
                stopped.clone(),
            ))
        })
        .collect();
    // Every session either open or failed; those that failed (no quorum in
    // time: the masters or the daemon saturated) are counted, not retried.
    loop {
        let opened = counters.acquired.load(Relaxed);
        let ended = counters.lost.load(Relaxed) + counters.failed.load(Relaxed);
        if opened + ended >= sessions as u64 {
            break;
        }
        if started.elapsed() > OPEN_TIMEOUT {
            let _ = stop.send(true);
            return Err(
                format!("W3: {opened} of {sessions} sessions opened in {OPEN_TIMEOUT:?}").into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let opened = counters.acquired.load(Relaxed) as usize;
    let open_failed = counters.lost.load(Relaxed) + counters.failed.load(Relaxed);
    if opened == 0 {
        let _ = stop.send(true);
        return Err(format!("W3: none of {sessions} sessions opened").into());
    }
    let open = started.elapsed();
    let (first, before) = (ProcSample::read(daemon.pid)?, counters.snapshot());
    let window = Instant::now();
    let mut peak = first.rss_kb;
    while window.elapsed() < duration {
        let left = duration.saturating_sub(window.elapsed());
        tokio::time::sleep(left.min(Duration::from_secs(1))).await;
        peak = peak.max(ProcSample::read(daemon.pid)?.rss_kb);
    }
    let (last, after) = (ProcSample::read(daemon.pid)?, counters.snapshot());
    let elapsed = window.elapsed();
    let _ = stop.send(true);
    let ending = futures::future::join_all(tasks);
    if tokio::time::timeout(Duration::from_secs(30), ending)
        .await
        .is_err()
    {
        tracing::warn!("W3: sessions still open 30 s after the end");
    }
    Ok(W3Report {
        sessions,
        opened,
        open_failed,
        duration: elapsed,
        open,
        rss_idle_kb: idle.rss_kb,
        rss_kb: last.rss_kb,
        rss_peak_kb: peak.max(last.rss_kb),
        cpu_s: last.cpu_s - first.cpu_s,
        extended: after[0] - before[0],
        lost: (after[1] - before[1]) + (after[2] - before[2]),
    })
}

/// One session: acquire (at most [`OPENING_AT_ONCE`] together), count the
/// daemon's events until `stop`, then release and read to the end.
async fn session(
    mut client: Client,
    resource: String,
    counters: Arc<Counters>,
    opening: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
) {
    let mut permit = opening.acquire_owned().await.ok();
    let (requests, outgoing) = mpsc::channel(2);
    let acquire = AcquireRequest {
        resource,
        ttl: Some(proto_duration(TTL)),
        wait: None,
        owner: "redlockd-bench".to_owned(),
        request_id: String::new(),
        ..Default::default()
    };
    let first = HoldRequest {
        request: Some(Request::Acquire(acquire)),
    };
    if requests.send(first).await.is_err() {
        return;
    }
    let mut events = match client.hold(ReceiverStream::new(outgoing)).await {
        Ok(response) => response.into_inner(),
        Err(status) => {
            counters.failed.fetch_add(1, Relaxed);
            tracing::warn!(code = ?status.code(), "Hold: {}", status.message());
            return;
        }
    };
    let mut stopping = false;
    loop {
        let event = tokio::select! {
            event = events.message() => event,
            _ = stopped_signal(&mut stop), if !stopping => {
                stopping = true;
                let release = HoldRequest { request: Some(Request::Release(Release {})) };
                let _ = requests.send(release).await;
                continue;
            }
        };
        match event.map(|e| e.and_then(|e| e.event)) {
            Ok(Some(Event::Acquired(_))) => {
                counters.acquired.fetch_add(1, Relaxed);
                permit = None;
            }
            Ok(Some(Event::Extended(_))) => {
                counters.extended.fetch_add(1, Relaxed);
            }
            Ok(Some(Event::Lost(lost))) => {
                counters.lost.fetch_add(1, Relaxed);
                tracing::warn!("Hold lost: {}", lost.reason);
                break;
            }
            // The daemon is stopping; it keeps the lock until we release.
            Ok(Some(Event::Draining(_))) => {}
            Ok(Some(Event::Released(_))) | Ok(None) => break,
            Err(status) => {
                if !stopping {
                    counters.failed.fetch_add(1, Relaxed);
                    tracing::warn!(code = ?status.code(), "Hold: {}", status.message());
                }
                break;
            }
        }
    }
    drop(permit);
}

/// Completes once `stop` is true (or its sender is gone).
async fn stopped_signal(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}
