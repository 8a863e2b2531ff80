//! `redlockd-bench`: figures for redlockd under load, through its gRPC API.
//!
//! It exists to measure what waiting callers get from the daemon, and to
//! compare the two ways it can make them wait: wake-ups on release
//! (`redlock.wake_on_release = true`, the default: a local FIFO queue woken by
//! releases) and blind Redlock polling (`false`: every waiter retries after a
//! jittered 5-50 ms pause). It prints figures; it is not a test and asserts
//! nothing.
//!
//! Workload W2, "contended hand-off": `--contenders` tasks (16), each with its
//! own gRPC connection, loop on ONE resource: Acquire (ttl 10 s, wait 30 s),
//! hold for `--hold-us`, Release, until `--duration` has passed. At the
//! deadline, acquires still waiting are dropped (the daemon releases anything
//! it grants after that). Reported per run:
//! - hand-offs: grants that went to a *different* contender than the previous
//!   grant, and their rate;
//! - hand-off latency (p50, p99): from the moment the previous holder sent its
//!   Release to the moment the next holder's Acquire response arrived, all on
//!   one `std::time::Instant` clock;
//! - the longest single Acquire wait (sent to granted) of any contender;
//! - grants per contender (min/max): zero or a very low minimum is starvation.
//!
//! With no `--addr` (`--dev`, the default) it starts five Valkey masters
//! (`REDLOCKD_VALKEY_BIN`, else `valkey-server` on `PATH`), then one
//! in-process daemon with wake-ups and afterwards one with polling, over the
//! same masters, on loopback ephemeral ports, with the default configuration
//! otherwise. With `--addr HOST:PORT` (repeatable) it runs W2 against running
//! daemons instead, whatever their mode. Output: one JSON line per run on
//! stdout, then a table comparing the runs; logs go to stderr (`RUST_LOG`).
//!
//! ```sh
//! scripts/setup.sh && source .venv/redlockd-env
//! cargo run --release --bin redlockd-bench -- --duration 10
//! ```
//!
//! The bench, the daemon and the masters share the machine: on few cores the
//! figures include their competition for CPU. Holds shorter than a
//! millisecond are rounded up by the tokio timer.

use clap::Parser;
use redlockd::config::Config;
use redlockd::masters::{find_server, Flavor, LocalMasters};
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd::pb::{AcquireRequest, ReleaseRequest};
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Lease asked for by every W2 Acquire.
const W2_TTL: Duration = Duration::from_secs(10);
/// Longest each W2 Acquire waits for the lock.
const W2_WAIT: Duration = Duration::from_secs(30);
/// Masters started in dev mode.
const DEV_MASTERS: usize = 5;

/// Benchmarks redlockd through its gRPC API (workload W2: contended hand-off,
/// wake-ups vs blind polling).
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// How long each run lasts: seconds ("10") or a humantime duration ("1m").
    #[arg(long, default_value = "10", value_parser = parse_duration)]
    duration: Duration,
    /// Tasks contending for the one resource.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(2..=1000))]
    contenders: u32,
    /// How long each grant is held before its Release, in microseconds
    /// (0: release at once; below 1000 the tokio timer rounds up to ~1 ms).
    #[arg(long, default_value_t = 0)]
    hold_us: u64,
    /// Start five local Valkey masters and two in-process daemons (wake-ups,
    /// then polling). The default when no --addr is given.
    #[arg(long, conflicts_with = "addr")]
    dev: bool,
    /// A running daemon to benchmark instead (repeatable: one run each).
    #[arg(long, value_name = "HOST:PORT")]
    addr: Vec<SocketAddr>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed = match text.parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?,
        Err(_) => humantime::parse_duration(text).map_err(|e| e.to_string())?,
    };
    if parsed.is_zero() {
        return Err("must be longer than zero".to_owned());
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,redlockd_bench=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let masters = if args.addr.is_empty() {
        let started = find_server(Flavor::Valkey)
            .map_err(BoxError::from)
            .and_then(|binary| Ok(LocalMasters::start(&binary, DEV_MASTERS)?));
        match started {
            Ok(masters) => {
                tracing::info!(
                    server = masters.version(),
                    "started {DEV_MASTERS} local masters"
                );
                Some(masters)
            }
            Err(error) => {
                eprintln!("redlockd-bench: cannot start masters: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let result = tokio::runtime::Runtime::new()
        .map_err(BoxError::from)
        .and_then(|runtime| runtime.block_on(run_all(&args, masters.as_ref())));
    // Stops the masters, after every daemon is gone.
    drop(masters);
    match result {
        Ok(reports) => {
            print_table(&reports);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("redlockd-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Every run of this invocation, in order; prints each JSON line as it ends.
async fn run_all(args: &Args, masters: Option<&LocalMasters>) -> Result<Vec<W2Report>, BoxError> {
    let params = W2Params {
        contenders: args.contenders as usize,
        hold: Duration::from_micros(args.hold_us),
        duration: args.duration,
    };
    let pid = std::process::id();
    let mut reports = Vec::new();
    let mut report = |r: W2Report| {
        println!("{}", r.json_line());
        let _ = std::io::stdout().flush();
        reports.push(r);
    };
    match masters {
        Some(masters) => {
            for (mode, wake) in [("wake", true), ("poll", false)] {
                let daemon = Daemon::start(masters.urls(), wake).await?;
                tracing::info!(mode, addr = %daemon.addr, "W2 for {:?}", params.duration);
                let resource = format!("bench/w2/{mode}/{pid}");
                let outcome = w2_contended_handoff(daemon.addr, mode, &resource, &params).await;
                daemon.stop().await;
                report(outcome?);
            }
        }
        None => {
            for (i, addr) in args.addr.iter().enumerate() {
                tracing::info!(%addr, "W2 for {:?}", params.duration);
                let resource = format!("bench/w2/addr{i}/{pid}");
                let mode = format!("addr={addr}");
                report(w2_contended_handoff(*addr, &mode, &resource, &params).await?);
            }
        }
    }
    Ok(reports)
}

/// One daemon served in-process by `redlockd::run`.
struct Daemon {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), redlockd::server::ServeError>>,
}

impl Daemon {
    /// Serves the default configuration over `nodes` on a loopback ephemeral port.
    async fn start(nodes: Vec<String>, wake_on_release: bool) -> Result<Daemon, BoxError> {
        let mut config = Config::default();
        config.redlock.nodes = nodes;
        config.redlock.wake_on_release = wake_on_release;
        config.validate()?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(redlockd::run(config, listener, async {
            let _ = stopped.await;
        }));
        Ok(Daemon { addr, stop, task })
    }

    /// Asks it to stop and waits (boundedly) until it has.
    async fn stop(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        match tokio::time::timeout(Duration::from_secs(10), &mut task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "daemon failed"),
            Ok(Err(error)) => tracing::warn!(%error, "daemon task"),
            Err(_) => {
                tracing::warn!("daemon did not stop within 10 s; aborting it");
                task.abort();
            }
        }
    }
}

/// A client on its own HTTP/2 connection to `addr`, retried while the
/// daemon is still starting.
async fn connect(addr: SocketAddr) -> Result<LockServiceClient<Channel>, BoxError> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(1));
    let mut last = None;
    for _ in 0..150 {
        match endpoint.connect().await {
            Ok(channel) => return Ok(LockServiceClient::new(channel)),
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("daemon at {addr} never accepted a connection: {last:?}").into())
}

/// The knobs of W2.
struct W2Params {
    contenders: usize,
    hold: Duration,
    duration: Duration,
}

/// One grant, times on the run's clock.
struct Grant {
    contender: usize,
    acquire_sent: Duration,
    granted: Duration,
    release_sent: Duration,
    /// When the Release answered (None: it failed).
    release_done: Option<Duration>,
}

/// What one contender saw.
#[derive(Default)]
struct ContenderLog {
    grants: Vec<Grant>,
    errors: u64,
    released_not_held: u64,
    /// How long the Acquire dropped at the deadline had waited.
    abandoned_wait: Option<Duration>,
}

/// W2: `contenders` tasks pass one lock around through the daemon at `addr`.
async fn w2_contended_handoff(
    addr: SocketAddr,
    mode: &str,
    resource: &str,
    params: &W2Params,
) -> Result<W2Report, BoxError> {
    let mut clients =
        futures::future::try_join_all((0..params.contenders).map(|_| connect(addr))).await?;
    // Warm-up outside the measurement: scripts loaded, connections used.
    let warm = format!("{resource}/warm-up");
    for client in &mut clients {
        let lock = client
            .acquire(acquire_request(&warm, "bench-warm-up"))
            .await?;
        if let Some(lock) = lock.into_inner().lock {
            client
                .release(ReleaseRequest {
                    resource: lock.resource,
                    token: lock.token,
                })
                .await?;
        }
    }
    let clock = Instant::now();
    let deadline = tokio::time::Instant::from_std(clock + params.duration);
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(id, client)| {
            let resource = resource.to_owned();
            tokio::spawn(contender(
                id,
                client,
                resource,
                params.hold,
                clock,
                deadline,
            ))
        })
        .collect();
    let mut logs = Vec::with_capacity(tasks.len());
    for task in tasks {
        logs.push(task.await?);
    }
    Ok(W2Report::from_logs(mode, params, &logs))
}

fn acquire_request(resource: &str, owner: &str) -> AcquireRequest {
    let proto = |d: Duration| prost_types::Duration::try_from(d).expect("a few seconds convert");
    AcquireRequest {
        resource: resource.to_owned(),
        ttl: Some(proto(W2_TTL)),
        wait: Some(proto(W2_WAIT)),
        owner: owner.to_owned(),
    }
}

/// One W2 contender: acquire, hold, release, until `deadline`.
async fn contender(
    id: usize,
    mut client: LockServiceClient<Channel>,
    resource: String,
    hold: Duration,
    clock: Instant,
    deadline: tokio::time::Instant,
) -> ContenderLog {
    let mut log = ContenderLog::default();
    let owner = format!("bench-{id}");
    while tokio::time::Instant::now() < deadline {
        let acquire_sent = clock.elapsed();
        let answer =
            tokio::time::timeout_at(deadline, client.acquire(acquire_request(&resource, &owner)));
        let lock = match answer.await {
            Err(_) => {
                log.abandoned_wait = Some(clock.elapsed().saturating_sub(acquire_sent));
                break;
            }
            Ok(Ok(response)) => response.into_inner().lock,
            Ok(Err(status)) => {
                log.errors += 1;
                tracing::warn!(contender = id, code = ?status.code(), message = status.message(), "Acquire");
                match status.code() {
                    Code::Unavailable | Code::Aborted | Code::DeadlineExceeded => continue,
                    _ => break,
                }
            }
        };
        let granted = clock.elapsed();
        let Some(lock) = lock else {
            log.errors += 1;
            tracing::warn!(contender = id, "Acquire answered without a lock");
            break;
        };
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        let release_sent = clock.elapsed();
        let released = client
            .release(ReleaseRequest {
                resource: lock.resource,
                token: lock.token,
            })
            .await;
        let release_done = match released {
            Ok(response) => {
                if !response.into_inner().was_held {
                    log.released_not_held += 1;
                }
                Some(clock.elapsed())
            }
            Err(status) => {
                log.errors += 1;
                tracing::warn!(contender = id, code = ?status.code(), message = status.message(), "Release");
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

/// The figures of one W2 run.
struct W2Report {
    mode: String,
    contenders: usize,
    duration: Duration,
    grants: usize,
    handoffs: usize,
    /// Consecutive grants to the same contender (not hand-offs).
    regrants: usize,
    /// A grant that arrived before the previous holder sent its Release:
    /// should never happen.
    overlaps: usize,
    handoff: Percentiles,
    release_rpc: Percentiles,
    longest_wait: Duration,
    longest_abandoned: Duration,
    grants_min: usize,
    grants_max: usize,
    errors: u64,
    released_not_held: u64,
}

/// p50, p99 and max of a sample (None: empty).
#[derive(Clone, Copy)]
struct Percentiles {
    p50: Option<Duration>,
    p99: Option<Duration>,
    max: Option<Duration>,
}

impl Percentiles {
    /// Nearest-rank percentiles.
    fn of(mut sample: Vec<Duration>) -> Percentiles {
        sample.sort_unstable();
        let rank = |p: usize| {
            let n = sample.len();
            sample.get((n * p).div_ceil(100).max(1) - 1).copied()
        };
        Percentiles {
            p50: rank(50),
            p99: rank(99),
            max: sample.last().copied(),
        }
    }
}

impl W2Report {
    fn from_logs(mode: &str, params: &W2Params, logs: &[ContenderLog]) -> W2Report {
        let mut grants: Vec<&Grant> = logs.iter().flat_map(|l| &l.grants).collect();
        grants.sort_unstable_by_key(|g| g.granted);
        let (mut latencies, mut regrants, mut overlaps) = (Vec::new(), 0, 0);
        for pair in grants.windows(2) {
            let (previous, next) = (pair[0], pair[1]);
            if next.granted < previous.release_sent {
                overlaps += 1;
            } else if next.contender == previous.contender {
                regrants += 1;
            } else {
                latencies.push(next.granted - previous.release_sent);
            }
        }
        if overlaps > 0 {
            tracing::warn!(mode, overlaps, "grants overlapping the previous holder");
        }
        let per_contender = logs.iter().map(|l| l.grants.len());
        let max_of = |d: &mut dyn Iterator<Item = Duration>| d.max().unwrap_or_default();
        W2Report {
            mode: mode.to_owned(),
            contenders: params.contenders,
            duration: params.duration,
            grants: grants.len(),
            handoffs: latencies.len(),
            regrants,
            overlaps,
            handoff: Percentiles::of(latencies),
            release_rpc: Percentiles::of(
                grants
                    .iter()
                    .filter_map(|g| Some(g.release_done? - g.release_sent))
                    .collect(),
            ),
            longest_wait: max_of(&mut grants.iter().map(|g| g.granted - g.acquire_sent)),
            longest_abandoned: max_of(&mut logs.iter().filter_map(|l| l.abandoned_wait)),
            grants_min: per_contender.clone().min().unwrap_or(0),
            grants_max: per_contender.max().unwrap_or(0),
            errors: logs.iter().map(|l| l.errors).sum(),
            released_not_held: logs.iter().map(|l| l.released_not_held).sum(),
        }
    }

    fn handoffs_per_s(&self) -> f64 {
        self.handoffs as f64 / self.duration.as_secs_f64()
    }

    /// The machine-readable line (hand-written: every value is a number or
    /// a plain label).
    fn json_line(&self) -> String {
        let us = |d: Option<Duration>| d.map_or("null".to_owned(), |d| d.as_micros().to_string());
        format!(
            "{{\"workload\":\"W2\",\"mode\":\"{}\",\"contenders\":{},\"duration_s\":{:.3},\
             \"handoffs\":{},\"handoffs_per_s\":{:.1},\"handoff_p50_us\":{},\"handoff_p99_us\":{},\
             \"longest_wait_ms\":{:.1},\"grants_min\":{},\"grants_max\":{},\"grants\":{},\"errors\":{}}}",
            self.mode.replace(['"', '\\'], "_"),
            self.contenders,
            self.duration.as_secs_f64(),
            self.handoffs,
            self.handoffs_per_s(),
            us(self.handoff.p50),
            us(self.handoff.p99),
            self.longest_wait.as_secs_f64() * 1e3,
            self.grants_min,
            self.grants_max,
            self.grants,
            self.errors,
        )
    }
}

/// A human-readable comparison of the runs, one column per run.
fn print_table(reports: &[W2Report]) {
    type Row = (&'static str, fn(&W2Report) -> String);
    let rows: [Row; 14] = [
        ("contenders", |r| r.contenders.to_string()),
        ("duration", |r| format!("{:.1} s", r.duration.as_secs_f64())),
        ("grants (all)", |r| r.grants.to_string()),
        ("hand-offs (different holder)", |r| r.handoffs.to_string()),
        ("hand-offs / s", |r| format!("{:.0}", r.handoffs_per_s())),
        ("re-grants to same holder", |r| r.regrants.to_string()),
        ("hand-off p50", |r| ms_of(r.handoff.p50)),
        ("hand-off p99", |r| ms_of(r.handoff.p99)),
        ("hand-off max", |r| ms_of(r.handoff.max)),
        ("Release RPC p50", |r| ms_of(r.release_rpc.p50)),
        ("longest Acquire wait (granted)", |r| {
            ms_of(Some(r.longest_wait))
        }),
        ("longest wait cut at deadline", |r| {
            ms_of(Some(r.longest_abandoned))
        }),
        ("grants per contender min/max", |r| {
            format!("{}/{}", r.grants_min, r.grants_max)
        }),
        ("errors / not held / overlaps", |r| {
            format!("{}/{}/{}", r.errors, r.released_not_held, r.overlaps)
        }),
    ];
    let width = reports
        .iter()
        .map(|r| r.mode.len())
        .max()
        .unwrap_or(0)
        .max(12)
        + 2;
    let mut out = format!("\nW2 contended hand-off\n{:<32}", "");
    for r in reports {
        out.push_str(&format!("{:>width$}", r.mode));
    }
    out.push('\n');
    for (name, cell) in rows {
        out.push_str(&format!("{name:<32}"));
        for r in reports {
            out.push_str(&format!("{:>width$}", cell(r)));
        }
        out.push('\n');
    }
    print!("{out}");
}

fn ms_of(d: Option<Duration>) -> String {
    d.map_or("-".to_owned(), |d| {
        format!("{:.3} ms", d.as_secs_f64() * 1e3)
    })
}
