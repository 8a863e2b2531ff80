//! **Semaphore**: cycles per second of a semaphore's permits at
//! C = 64 (`--concurrency` values other than 64 are ignored here) beside
//! the plain lock, through one in-process daemon over the `--dev` masters,
//! with the masters' CPU per cycle: the five master processes' CPU time
//! (`/proc`, [`ProcSample`]) over the measuring window, divided by the
//! cycles made in it.
//!
//! Four runs, each `--duration`, one cycle = Acquire (ttl 10 s) + Release:
//! - `plain own`: every worker its own plain lock (W1's grpc case);
//! - `limit 4 own`: every worker its own semaphore of limit 4, so each
//!   grant is uncontended: the cost of a permit's grant against a plain
//!   grant's (the target: at most 2x the master CPU);
//! - `plain one`: all workers on one plain lock, waiting (hand-off);
//! - `limit 8 one`: all workers on one semaphore of limit 8, waiting:
//!   permits are contended, and a failed attempt tries every permit.

use crate::proc::ProcSample;
use crate::setup::{self, bench_config, Client, Daemon};
use crate::stats::{ms, permille, print_columns, sorted, us};
use crate::{Args, BoxError};
use redlockd_proto::pb::{AcquireRequest, ReleaseRequest};
use redlockd_testkit::masters::LocalMasters;
use std::time::Duration;
use tokio::time::Instant;

/// The workers of every run.
const CONCURRENCY: usize = 64;
/// Every grant's ttl.
const TTL: Duration = Duration::from_secs(10);
/// How long a worker waits for a contended resource.
const WAIT: Duration = Duration::from_secs(5);

/// One run's figures.
pub(crate) struct SemReport {
    /// `plain` or `limit N`.
    pub kind: String,
    /// `own` (a resource per worker) or `one` (all on one).
    pub resources: &'static str,
    /// The measuring window.
    pub duration: Duration,
    /// Acquire latencies of the completed cycles, sorted.
    pub acquire: Vec<Duration>,
    /// Failed cycles.
    pub errors: usize,
    /// The five masters' CPU seconds over the window.
    pub master_cpu_s: f64,
}

impl SemReport {
    /// Completed cycles per second.
    pub(crate) fn cycles_per_s(&self) -> f64 {
        self.acquire.len() as f64 / self.duration.as_secs_f64()
    }

    /// The masters' CPU per completed cycle, in microseconds.
    pub(crate) fn master_cpu_us_per_cycle(&self) -> f64 {
        self.master_cpu_s * 1e6 / (self.acquire.len().max(1) as f64)
    }

    fn json_line(&self) -> String {
        format!(
            "{{\"workload\":\"semaphore\",\"kind\":\"{}\",\"resources\":\"{}\",\
             \"concurrency\":{CONCURRENCY},\"duration_s\":{:.3},\"cycles\":{},\
             \"cycles_per_s\":{:.1},\"master_cpu_us_per_cycle\":{:.1},\
             \"acquire_p50_us\":{},\"acquire_p99_us\":{},\"errors\":{}}}",
            self.kind,
            self.resources,
            self.duration.as_secs_f64(),
            self.acquire.len(),
            self.cycles_per_s(),
            self.master_cpu_us_per_cycle(),
            us(permille(&self.acquire, 500)),
            us(permille(&self.acquire, 990)),
            self.errors
        )
    }
}

/// The four runs (see the module doc); needs the `--dev` masters.
pub(crate) async fn run_all(
    args: &Args,
    masters: Option<&LocalMasters>,
) -> Result<Vec<SemReport>, BoxError> {
    let Some(masters) = masters else {
        tracing::warn!("semaphore skipped: it reads the masters' CPU, which needs --dev");
        return Ok(Vec::new());
    };
    let daemon = Daemon::start(bench_config(masters.urls())?.validated()?).await?;
    let mut clients = Vec::new();
    for _ in 0..args.grpc_connections {
        clients.push(setup::connect(daemon.addr).await?);
    }
    let mut reports = Vec::new();
    for (limit, one) in [(0, false), (4, false), (0, true), (8, true)] {
        let report = run(&clients, masters, limit, one, args.duration).await?;
        crate::emit(&report.json_line());
        reports.push(report);
    }
    setup::stop(daemon).await;
    Ok(reports)
}

/// The five masters' CPU seconds so far.
fn masters_cpu(masters: &LocalMasters) -> Result<f64, BoxError> {
    let mut total = 0.0;
    for i in 0..masters.len() {
        let pid = masters.pid(i).ok_or("a master is not running")?;
        total += ProcSample::read(pid)?.cpu_s;
    }
    Ok(total)
}

async fn run(
    clients: &[Client],
    masters: &LocalMasters,
    limit: u32,
    one: bool,
    duration: Duration,
) -> Result<SemReport, BoxError> {
    let tag = format!("bench/semaphore/{limit}/{one}/{}", std::process::id());
    let cpu_before = masters_cpu(masters)?;
    let start = Instant::now();
    let deadline = start + duration;
    let tasks = (0..CONCURRENCY).map(|i| {
        let mut client = clients[i % clients.len()].clone();
        let resource = match one {
            true => tag.clone(),
            false => format!("{tag}/{i}"),
        };
        tokio::spawn(async move {
            let (mut acquire, mut errors) = (Vec::new(), 0);
            while Instant::now() < deadline {
                let began = Instant::now();
                let request = AcquireRequest {
                    resource: resource.clone(),
                    ttl: Some(setup::proto_duration(TTL)),
                    wait: one.then(|| setup::proto_duration(WAIT)),
                    limit,
                    ..Default::default()
                };
                let lock = match client.acquire(request).await {
                    Ok(answer) => answer.into_inner().lock,
                    Err(_) => None,
                };
                let Some(lock) = lock else {
                    errors += 1;
                    continue;
                };
                acquire.push(began.elapsed());
                let release = ReleaseRequest {
                    resource: lock.resource,
                    token: lock.token,
                };
                if client.release(release).await.is_err() {
                    errors += 1;
                }
            }
            (acquire, errors)
        })
    });
    let outcomes = futures::future::try_join_all(tasks).await?;
    let elapsed = start.elapsed();
    let master_cpu_s = masters_cpu(masters)? - cpu_before;
    let (mut acquire, mut errors) = (Vec::new(), 0);
    for (sample, failed) in outcomes {
        acquire.extend(sample);
        errors += failed;
    }
    Ok(SemReport {
        kind: match limit {
            0 => "plain".to_owned(),
            n => format!("limit {n}"),
        },
        resources: if one { "one" } else { "own" },
        duration: elapsed,
        acquire: sorted(acquire),
        errors,
        master_cpu_s,
    })
}

/// The table, and the ratio the issue sets a target for.
pub(crate) fn print_table(reports: &[SemReport]) {
    let heads: Vec<String> = reports
        .iter()
        .map(|r| format!("{} {}", r.kind, r.resources))
        .collect();
    let column = |f: &dyn Fn(&SemReport) -> String| reports.iter().map(f).collect::<Vec<_>>();
    let rows = vec![
        (
            "cycles / s",
            column(&|r| format!("{:.0}", r.cycles_per_s())),
        ),
        (
            "master CPU us / cycle",
            column(&|r| format!("{:.1}", r.master_cpu_us_per_cycle())),
        ),
        ("acquire p50", column(&|r| ms(permille(&r.acquire, 500)))),
        ("acquire p99", column(&|r| ms(permille(&r.acquire, 990)))),
        ("errors", column(&|r| r.errors.to_string())),
    ];
    print_columns(
        &format!("Semaphore vs plain lock, C={CONCURRENCY} (acquire + release)"),
        &heads,
        &rows,
    );
    let find = |kind: &str, resources: &str| {
        reports
            .iter()
            .find(|r| r.kind == kind && r.resources == resources)
    };
    if let (Some(plain), Some(sem)) = (find("plain", "own"), find("limit 4", "own")) {
        let ratio = sem.master_cpu_us_per_cycle() / plain.master_cpu_us_per_cycle().max(1e-9);
        println!("semaphore grant / plain grant, master CPU per cycle: {ratio:.2} (target <= 2)");
    }
}
