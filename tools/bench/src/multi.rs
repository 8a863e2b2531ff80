//! Locks on several resources at once: C workers (`--concurrency`;
//! the figure is at 64) through an in-process daemon, each looping
//! acquire + release on resources of its own, one run per lock size of
//! `--multi-sizes` (1: the plain lock, on `resource`; 2, 3: that many
//! resources in `resources`), so that the kinds stand side by side. Cycles
//! per second, acquire latency p50/p99, and the five masters' CPU per
//! cycle: each master's `/proc` CPU time ([`ProcSample`]) read before and
//! after the measured window (only with `--dev`, whose masters this
//! process started and knows the pids of).

use crate::proc::ProcSample;
use crate::setup::{self, bench_config, Client, Daemon};
use crate::stats::{permille, print_columns, sorted, us};
use crate::{emit, Args, BoxError};
use redlockd_proto::pb::{AcquireRequest, ReleaseRequest};
use redlockd_testkit::masters::LocalMasters;
use std::time::{Duration, Instant};

/// Lease asked for by every acquisition.
const TTL: Duration = Duration::from_secs(10);

/// The figures of one run.
pub(crate) struct MultiReport {
    /// Resources per lock (1: a plain lock).
    pub size: usize,
    /// Concurrent workers.
    pub concurrency: usize,
    /// Length of the measured window.
    pub duration: Duration,
    /// Acquire + release cycles completed.
    pub cycles: u64,
    /// Failed cycles.
    pub errors: u64,
    /// Acquire latencies, sorted.
    pub acquire: Vec<Duration>,
    /// The masters' CPU seconds in the window, all five together (None:
    /// not measured).
    pub master_cpu_s: Option<f64>,
}

impl MultiReport {
    fn cycles_per_s(&self) -> f64 {
        self.cycles as f64 / self.duration.as_secs_f64()
    }

    fn master_cpu_us_per_cycle(&self) -> Option<f64> {
        let cpu = self.master_cpu_s?;
        (self.cycles > 0).then(|| cpu * 1e6 / self.cycles as f64)
    }

    fn json_line(&self) -> String {
        format!(
            "{{\"workload\":\"multi\",\"resources_per_lock\":{},\"concurrency\":{},\
             \"duration_s\":{:.1},\"cycles\":{},\"errors\":{},\"cycles_per_s\":{:.0},\
             \"acquire_p50_us\":{},\"acquire_p99_us\":{},\"master_cpu_us_per_cycle\":{}}}",
            self.size,
            self.concurrency,
            self.duration.as_secs_f64(),
            self.cycles,
            self.errors,
            self.cycles_per_s(),
            us(permille(&self.acquire, 500)),
            us(permille(&self.acquire, 990)),
            self.master_cpu_us_per_cycle()
                .map_or("null".to_owned(), |c| format!("{c:.1}")),
        )
    }
}

/// Every run: each size of `--multi-sizes` at each `--concurrency`.
pub(crate) async fn run_all(
    args: &Args,
    masters: Option<&LocalMasters>,
    nodes: &[String],
) -> Result<Vec<MultiReport>, BoxError> {
    let (daemon, addr) = match masters {
        Some(_) => {
            let daemon = Daemon::start(bench_config(nodes.to_vec())?.validated()?).await?;
            let addr = daemon.addr;
            (Some(daemon), addr)
        }
        None => (None, *args.addr.first().ok_or("needs --dev or --addr")?),
    };
    let mut clients = Vec::new();
    for _ in 0..args.grpc_connections {
        clients.push(setup::connect(addr).await?);
    }
    let mut reports = Vec::new();
    for &concurrency in &args.concurrency {
        for &size in &args.multi_sizes {
            tracing::info!(size, concurrency, "multi for {:?}", args.duration);
            let report = run(&clients, masters, size, concurrency, args.duration).await;
            let report = match report {
                Ok(report) => report,
                Err(error) => {
                    if let Some(daemon) = daemon {
                        setup::stop(daemon).await;
                    }
                    return Err(error);
                }
            };
            emit(&report.json_line());
            reports.push(report);
        }
    }
    if let Some(daemon) = daemon {
        setup::stop(daemon).await;
    }
    Ok(reports)
}

/// The masters' CPU seconds so far, all together.
fn masters_cpu(masters: Option<&LocalMasters>) -> Option<f64> {
    let masters = masters?;
    let mut total = 0.0;
    for i in 0..masters.len() {
        total += ProcSample::read(masters.pid(i)?).ok()?.cpu_s;
    }
    Some(total)
}

async fn run(
    clients: &[Client],
    masters: Option<&LocalMasters>,
    size: usize,
    concurrency: usize,
    duration: Duration,
) -> Result<MultiReport, BoxError> {
    let cpu_before = masters_cpu(masters);
    let started = Instant::now();
    let end = started + duration;
    let mut workers = Vec::with_capacity(concurrency);
    for w in 0..concurrency {
        let mut client = clients[w % clients.len()].clone();
        let names: Vec<String> = (0..size)
            .map(|i| format!("bench/multi/{size}/{w}/{i}"))
            .collect();
        workers.push(tokio::spawn(async move {
            let (mut acquire, mut errors) = (Vec::new(), 0u64);
            while Instant::now() < end {
                let request = match names.len() {
                    1 => AcquireRequest {
                        resource: names[0].clone(),
                        ttl: Some(setup::proto_duration(TTL)),
                        ..Default::default()
                    },
                    _ => AcquireRequest {
                        resources: names.clone(),
                        ttl: Some(setup::proto_duration(TTL)),
                        ..Default::default()
                    },
                };
                let start = Instant::now();
                let lock = match client.acquire(request).await {
                    Ok(response) => response.into_inner().lock,
                    Err(_) => None,
                };
                let Some(lock) = lock else {
                    errors += 1;
                    continue;
                };
                acquire.push(start.elapsed());
                let release = ReleaseRequest {
                    resource: lock.resource,
                    token: lock.token,
                };
                if client.release(release).await.is_err() {
                    errors += 1;
                }
            }
            (acquire, errors)
        }));
    }
    let (mut acquire, mut errors) = (Vec::new(), 0);
    for worker in workers {
        let (latencies, failed) = worker.await?;
        acquire.extend(latencies);
        errors += failed;
    }
    let duration = started.elapsed();
    let cpu_after = masters_cpu(masters);
    Ok(MultiReport {
        size,
        concurrency,
        duration,
        cycles: acquire.len() as u64,
        errors,
        acquire: sorted(acquire),
        master_cpu_s: cpu_before.zip(cpu_after).map(|(b, a)| a - b),
    })
}

/// The table: one column per run, one row per figure.
pub(crate) fn print_table(reports: &[MultiReport]) {
    let heads: Vec<String> = reports
        .iter()
        .map(|r| match r.size {
            1 => format!("plain C={}", r.concurrency),
            n => format!("{n} res. C={}", r.concurrency),
        })
        .collect();
    let column = |f: &dyn Fn(&MultiReport) -> String| reports.iter().map(f).collect::<Vec<_>>();
    let rows: Vec<(&str, Vec<String>)> = vec![
        ("cycles/s", column(&|r| format!("{:.0}", r.cycles_per_s()))),
        (
            "acquire p50 (us)",
            column(&|r| us(permille(&r.acquire, 500))),
        ),
        (
            "acquire p99 (us)",
            column(&|r| us(permille(&r.acquire, 990))),
        ),
        (
            "master CPU/cycle (us)",
            column(&|r| {
                r.master_cpu_us_per_cycle()
                    .map_or("-".to_owned(), |c| format!("{c:.0}"))
            }),
        ),
        ("errors", column(&|r| r.errors.to_string())),
    ];
    print_columns("Several resources at once (grpc)", &heads, &rows);
}
