//! `redlockd-bench`: figures for redlockd under load, through its gRPC API.
//! Not a test: it asserts nothing, it measures.
//!
//! It exists to show what waiting callers get, and to compare the two ways
//! the daemon makes them wait: wake-ups (`redlock.wake_on_release = true`,
//! the default: a local FIFO queue woken by releases) and blind Redlock
//! polling (`false`: each waiter retries after a jittered 5-50 ms pause).
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
//! With no `--addr` (`--dev`), it starts five Valkey masters
//! (`REDLOCKD_VALKEY_BIN`, else `valkey-server` on `PATH`), then two daemons
//! in-process over them, one after the other on loopback ephemeral ports,
//! default configuration but for `wake_on_release`. `--addr HOST:PORT`
//! (repeatable) runs against running daemons instead. Stdout: one JSON line
//! per run, then a table comparing the runs. Logs go to stderr (`RUST_LOG`).
//!
//! ```sh
//! scripts/setup.sh && source .venv/redlockd-env
//! cargo run --release --bin redlockd-bench -- --duration 10
//! ```
//!
//! Bench, daemon and masters share the machine's cores. Holds below 1 ms are
//! rounded up by the tokio timer.

use clap::Parser;
use redlockd::config::Config;
use redlockd::masters::{find_server, Flavor, LocalMasters};
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd::pb::{AcquireRequest, Lock, ReleaseRequest};
use redlockd::server::ServeError;
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
type Client = LockServiceClient<Channel>;

/// Lease asked for by every W2 Acquire.
const W2_TTL: Duration = Duration::from_secs(10);
/// Longest each W2 Acquire waits for the lock.
const W2_WAIT: Duration = Duration::from_secs(30);

/// Benchmarks redlockd through its gRPC API (W2: contended hand-off,
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
    /// How long each grant is held before its Release, in microseconds (0:
    /// release at once; below 1000 the tokio timer rounds up to ~1 ms).
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
    match parsed.is_zero() {
        true => Err("must be longer than zero".to_owned()),
        false => Ok(parsed),
    }
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
    // Started before the runtime (it blocks); stopped when dropped, at the end.
    let masters = match args.addr.is_empty().then(start_masters).transpose() {
        Ok(masters) => masters,
        Err(error) => {
            eprintln!("redlockd-bench: cannot start the masters: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = tokio::runtime::Runtime::new()
        .map_err(BoxError::from)
        .and_then(|runtime| runtime.block_on(run_all(&args, masters.as_ref())));
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

/// Five Valkey masters on loopback, no persistence.
fn start_masters() -> Result<LocalMasters, BoxError> {
    let masters = LocalMasters::start(&find_server(Flavor::Valkey)?, 5)?;
    tracing::info!(server = masters.version(), urls = ?masters.urls(), "masters started");
    Ok(masters)
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
    if let Some(masters) = masters {
        for (mode, wake) in [("wake", true), ("poll", false)] {
            let daemon = Daemon::start(masters.urls(), wake).await?;
            tracing::info!(mode, addr = %daemon.addr, "W2 for {:?}", params.duration);
            let resource = format!("bench/w2/{mode}/{pid}");
            let outcome = w2_contended_handoff(daemon.addr, mode, &resource, params).await;
            daemon.stop().await;
            report(outcome?);
        }
    }
    for (i, addr) in args.addr.iter().enumerate() {
        tracing::info!(%addr, "W2 for {:?}", params.duration);
        let (mode, resource) = (format!("addr={addr}"), format!("bench/w2/{i}/{pid}"));
        report(w2_contended_handoff(*addr, &mode, &resource, params).await?);
    }
    Ok(reports)
}

/// One daemon served in-process by `redlockd::run`.
struct Daemon {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl Daemon {
    /// Serves the default configuration over `nodes` on a loopback ephemeral port.
    async fn start(nodes: Vec<String>, wake_on_release: bool) -> Result<Daemon, BoxError> {
        let mut config = Config::default();
        config.redlock.nodes = nodes;
        config.redlock.wake_on_release = wake_on_release;
        // The bench starts its masters fresh: nothing could have been locked
        // on them, so there is nothing for a restart quarantine to protect.
        config.redlock.restart_quarantine = false;
        config.metrics.enabled = false;
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
            Ok(outcome) => tracing::warn!("daemon ended: {outcome:?}"),
            Err(_) => {
                tracing::warn!("daemon did not stop within 10 s; aborting it");
                task.abort();
            }
        }
    }
}

/// A client on its own HTTP/2 connection, retried while the daemon starts.
async fn connect(addr: SocketAddr) -> Result<Client, BoxError> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(1));
    let mut last = None;
    for _ in 0..100 {
        match endpoint.connect().await {
            Ok(channel) => return Ok(LockServiceClient::new(channel)),
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("daemon at {addr} never accepted a connection: {last:?}").into())
}

/// The knobs of W2.
#[derive(Clone, Copy)]
struct W2Params {
    contenders: usize,
    hold: Duration,
    duration: Duration,
}

/// One grant, its times on the run's clock.
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
    /// Failed calls.
    errors: u64,
    /// Releases that found the lock no longer held on a majority.
    not_held: u64,
    /// How long the Acquire dropped at the deadline had waited.
    cut_wait: Option<Duration>,
}

/// W2: `contenders` tasks pass one lock around through the daemon at `addr`.
async fn w2_contended_handoff(
    addr: SocketAddr,
    mode: &str,
    resource: &str,
    params: W2Params,
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
    Ok(W2Report::new(mode, params, &logs, uncontended))
}

fn acquire_request(resource: &str, owner: &str) -> AcquireRequest {
    let proto = |d: Duration| prost_types::Duration::try_from(d).expect("seconds convert");
    AcquireRequest {
        resource: resource.to_owned(),
        ttl: Some(proto(W2_TTL)),
        wait: Some(proto(W2_WAIT)),
        owner: owner.to_owned(),
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
struct W2Report {
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
}

/// Nearest-rank percentile `p` of a sorted sample (None: empty).
fn pct(sorted: &[Duration], p: usize) -> Option<Duration> {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

fn sorted(mut sample: Vec<Duration>) -> Vec<Duration> {
    sample.sort_unstable();
    sample
}

impl W2Report {
    fn new(mode: &str, params: W2Params, logs: &[ContenderLog], base: Vec<Duration>) -> Self {
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
        }
    }

    fn handoffs_per_s(&self) -> f64 {
        self.handoff.len() as f64 / self.params.duration.as_secs_f64()
    }

    /// The machine-readable line (written by hand: numbers and one label).
    fn json_line(&self) -> String {
        let us = |d: Option<Duration>| d.map_or("null".to_owned(), |d| d.as_micros().to_string());
        let longest_ms = self.waits.last().map_or(0.0, |d| d.as_secs_f64() * 1e3);
        format!(
            "{{\"workload\":\"W2\",\"mode\":\"{}\",\"contenders\":{},\"duration_s\":{:.3},\
             \"handoffs\":{},\"handoffs_per_s\":{:.1},\"handoff_p50_us\":{},\"handoff_p99_us\":{},\
             \"longest_wait_ms\":{longest_ms:.1},\"grants_min\":{},\"grants_max\":{},\
             \"grants\":{},\"errors\":{}}}",
            self.mode.replace(['"', '\\'], "_"),
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
        )
    }
}

/// A readable comparison of the runs, one column each.
fn print_table(reports: &[W2Report]) {
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
        ("errors/not held/overlaps", |r| {
            format!("{}/{}/{}", r.errors, r.not_held, r.overlaps)
        }),
    ];
    let width = 2 + reports.iter().map(|r| r.mode.len()).fold(12, usize::max);
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
}

/// Milliseconds to the microsecond ("-": no value).
fn ms(d: Option<Duration>) -> String {
    d.map_or("-".to_owned(), |d| {
        format!("{:.3} ms", d.as_secs_f64() * 1e3)
    })
}
