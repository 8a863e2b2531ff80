//! Read-write locks (workload `rw`): Acquire + Release cycles
//! per second through an in-process daemon at C = 64, with the masters'
//! CPU per cycle (read from `/proc` for the five local masters, `--dev`
//! only; their idle CPU, measured over [`IDLE`] before the runs, is taken
//! off), in three runs of `--duration` each:
//! - `plain`: every worker cycles an exclusive lock on a resource of its
//!   own (the plain lock, for comparison);
//! - `shared`: every worker cycles a shared grant of ONE resource (readers
//!   do not serialise: it should run at about the plain rate);
//! - `mixed`: the workers share 8 resources, one worker in 8 exclusive and
//!   the rest shared, waiting up to 10 s (exclusive-on-rw: writers among
//!   readers, writer preference at work); cycles counted per mode.

use crate::proc::ProcSample;
use crate::setup::{self, bench_config, Client, Daemon};
use crate::{emit, Args, BoxError};
use redlockd::pb;
use redlockd_testkit::masters::LocalMasters;
use std::time::{Duration, Instant};

/// Concurrent workers of every run.
const CONCURRENCY: usize = 64;

/// How long the masters' idle CPU is measured before the runs.
const IDLE: Duration = Duration::from_secs(2);

/// Resources of the mixed run.
const MIXED_RESOURCES: usize = 8;

/// What one run measured.
#[derive(Debug, Clone)]
pub(crate) struct RwReport {
    /// `plain`, `shared` or `mixed`.
    pub kind: &'static str,
    /// How long it ran.
    pub duration: Duration,
    /// Completed shared cycles.
    pub shared_cycles: u64,
    /// Completed exclusive cycles.
    pub exclusive_cycles: u64,
    /// Failed cycles (refused or errors).
    pub errors: u64,
    /// The five masters' CPU seconds over the run, less their idle CPU
    /// (None: not local).
    pub master_cpu_s: Option<f64>,
}

impl RwReport {
    fn cycles(&self) -> u64 {
        self.shared_cycles + self.exclusive_cycles
    }

    fn per_s(&self, n: u64) -> f64 {
        n as f64 / self.duration.as_secs_f64()
    }

    /// The masters' CPU per completed cycle, microseconds.
    fn master_us_per_cycle(&self) -> Option<f64> {
        let cycles = self.cycles();
        self.master_cpu_s
            .filter(|_| cycles > 0)
            .map(|cpu| cpu * 1e6 / cycles as f64)
    }

    fn json_line(&self) -> String {
        let cpu = self
            .master_us_per_cycle()
            .map_or_else(|| "null".to_owned(), |us| format!("{us:.1}"));
        format!(
            "{{\"workload\":\"rw\",\"kind\":\"{}\",\"concurrency\":{CONCURRENCY},\
             \"duration_s\":{:.2},\"cycles_per_s\":{:.1},\"shared_cycles_per_s\":{:.1},\
             \"exclusive_cycles_per_s\":{:.1},\"errors\":{},\"master_cpu_us_per_cycle\":{cpu}}}",
            self.kind,
            self.duration.as_secs_f64(),
            self.per_s(self.cycles()),
            self.per_s(self.shared_cycles),
            self.per_s(self.exclusive_cycles),
            self.errors
        )
    }
}

/// The three runs; prints a JSON line per run and a table at the end.
pub(crate) async fn run_all(
    args: &Args,
    masters: Option<&LocalMasters>,
    nodes: &[String],
) -> Result<Vec<RwReport>, BoxError> {
    if nodes.is_empty() {
        tracing::warn!(
            "rw skipped: it starts a daemon over the masters, which needs --dev or --nodes"
        );
        return Ok(Vec::new());
    }
    let daemon = Daemon::start(bench_config(nodes.to_vec())?.validated()?).await?;
    let mut clients = Vec::new();
    for _ in 0..usize::from(args.grpc_connections) {
        clients.push(setup::connect(daemon.addr).await?);
    }
    let idle_before = master_cpu(masters);
    let idle_start = Instant::now();
    tokio::time::sleep(IDLE).await;
    let idle_per_s = idle_before
        .zip(master_cpu(masters))
        .map(|(a, b)| (b - a) / idle_start.elapsed().as_secs_f64());
    let mut reports = Vec::new();
    for kind in ["plain", "shared", "mixed"] {
        tracing::info!(kind, "rw for {:?}", args.duration);
        let report = run(kind, &clients, masters, args.duration, idle_per_s).await;
        let report = match report {
            Ok(report) => report,
            Err(error) => {
                setup::stop(daemon).await;
                return Err(error);
            }
        };
        emit(&report.json_line());
        reports.push(report);
    }
    setup::stop(daemon).await;
    emit("rw: kind     cycles/s  shared/s  exclusive/s  errors  master CPU us/cycle");
    for r in &reports {
        emit(&format!(
            "rw: {:<7} {:>9.0} {:>9.0} {:>12.0} {:>7} {:>19}",
            r.kind,
            r.per_s(r.cycles()),
            r.per_s(r.shared_cycles),
            r.per_s(r.exclusive_cycles),
            r.errors,
            r.master_us_per_cycle()
                .map_or_else(|| "-".to_owned(), |us| format!("{us:.1}"))
        ));
    }
    Ok(reports)
}

/// The five masters' CPU seconds so far, if they are local and readable.
fn master_cpu(masters: Option<&LocalMasters>) -> Option<f64> {
    let masters = masters?;
    let mut total = 0.0;
    for i in 0..masters.len() {
        total += ProcSample::read(masters.pid(i)?).ok()?.cpu_s;
    }
    Some(total)
}

/// Worker `i`'s resource and mode in run `kind`.
fn plan(kind: &str, run: &str, i: usize) -> (String, pb::LockMode, Duration) {
    match kind {
        "plain" => (
            format!("{run}/{i}"),
            pb::LockMode::Exclusive,
            Duration::ZERO,
        ),
        "shared" => (format!("{run}/one"), pb::LockMode::Shared, Duration::ZERO),
        _ => {
            let mode = match i % MIXED_RESOURCES {
                0 => pb::LockMode::Exclusive,
                _ => pb::LockMode::Shared,
            };
            let resource = format!("{run}/{}", (i / MIXED_RESOURCES) % MIXED_RESOURCES);
            (resource, mode, Duration::from_secs(10))
        }
    }
}

/// One Acquire + Release; whether it completed.
async fn cycle(
    client: &mut Client,
    resource: &str,
    mode: pb::LockMode,
    wait: Duration,
) -> Result<(), BoxError> {
    let lock = client
        .acquire(pb::AcquireRequest {
            resource: resource.to_owned(),
            ttl: Some(setup::proto_duration(Duration::from_secs(10))),
            wait: Some(setup::proto_duration(wait)),
            owner: "bench-rw".to_owned(),
            mode: mode as i32,
            ..Default::default()
        })
        .await?
        .into_inner()
        .lock
        .ok_or("no lock in the answer")?;
    client
        .release(pb::ReleaseRequest {
            resource: lock.resource,
            token: lock.token,
        })
        .await?;
    Ok(())
}

async fn run(
    kind: &'static str,
    clients: &[Client],
    masters: Option<&LocalMasters>,
    duration: Duration,
    idle_per_s: Option<f64>,
) -> Result<RwReport, BoxError> {
    let run_id = format!("bench/rw/{kind}/{}", std::process::id());
    let cpu_before = master_cpu(masters);
    let start = Instant::now();
    let deadline = start + duration;
    let tasks = (0..CONCURRENCY).map(|i| {
        let mut client = clients[i % clients.len()].clone();
        let (resource, mode, wait) = plan(kind, &run_id, i);
        tokio::spawn(async move {
            let (mut done, mut errors) = (0u64, 0u64);
            while Instant::now() < deadline {
                match cycle(&mut client, &resource, mode, wait).await {
                    Ok(()) => done += 1,
                    Err(error) => {
                        errors += 1;
                        tracing::debug!(%error, "rw cycle failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            (mode, done, errors)
        })
    });
    let outcomes = futures::future::try_join_all(tasks).await?;
    let elapsed = start.elapsed();
    let cpu_after = master_cpu(masters);
    let mut report = RwReport {
        kind,
        duration: elapsed,
        shared_cycles: 0,
        exclusive_cycles: 0,
        errors: 0,
        master_cpu_s: cpu_before
            .zip(cpu_after)
            .map(|(a, b)| b - a - idle_per_s.unwrap_or(0.0) * elapsed.as_secs_f64()),
    };
    for (mode, done, errors) in outcomes {
        match mode {
            pb::LockMode::Shared => report.shared_cycles += done,
            pb::LockMode::Exclusive => report.exclusive_cycles += done,
        }
        report.errors += errors;
    }
    Ok(report)
}
