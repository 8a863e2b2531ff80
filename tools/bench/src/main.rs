//! `redlockd-bench`: figures for redlockd under load. Not a test: it asserts
//! nothing, it measures. Stdout: one JSON line per run, then readable tables;
//! logs go to stderr (`RUST_LOG`).
//!
//! Workloads (`--workloads`, all by default):
//! - **W1, uncontended** ([`w1`]): C workers (`--concurrency`, 1,16,64,256),
//!   each acquiring a resource of its own (ttl 10 s, no wait) and releasing
//!   it, for `--duration`, in every mode of `--modes`: `grpc` (through a
//!   daemon), `engine` (the same engine in-process, no gRPC), `raw` (`SET NX
//!   PX` + compare-and-delete on the five masters with fred, no lock logic)
//!   and `library` (the `rslock` crate in-process; built with the
//!   `bench-library` feature), and `floor`: the `grpc` mode's clients and
//!   calls against `redlockd-echo-floor`, a bare tonic server of the lock
//!   service with canned answers and the daemon's HTTP/2 settings
//!   (`src/floor/`, built beside this binary; no masters), whose CPU per
//!   cycle is the gRPC floor the daemon's is held against. Cycles per
//!   second, acquire and release latency p50/p99/p99.9, and CPU per cycle
//!   split into the masters, the daemon (in `floor`: the floor process) and
//!   the client ([`proc::CpuMeter`]; `--dev` runs the `grpc` mode's daemon
//!   as a process of its own, so its CPU is its own). Not in the default
//!   list, the peers ([`peers`]): `redsync` (go-redsync over the same
//!   masters) and `etcd` (etcd 3.7's `concurrency.Mutex`; its server's CPU
//!   in the masters' column), run by `redlockd-peers` (`tools/peers`, Go).
//! - **W2, contended hand-off** ([`w2`]): wake-ups vs blind polling, and
//!   the peers with `--w2-modes`.
//! - **W3, sessions** ([`w3`]): K open `Hold` sessions (`--sessions`, 1,000
//!   and 10,000, ttl 3 s) for `--w3-duration` (30 s) against a `redlockd`
//!   *process* spawned next to this binary: its RSS, CPU seconds per
//!   session-minute, and the extension success rate.
//! - **Bursts** ([`burst`]): `--burst-calls` Acquire calls at once on one
//!   connection and `--burst-sessions` Hold sessions at once over 1, 4 and
//!   16 connections (`--burst-connections`), each against a `redlockd`
//!   process of its own: grants, failures by code, latency and the daemon's
//!   peak RSS.
//! - **Semaphore** ([`semaphore`]): a semaphore's permits at C = 64 beside
//!   the plain lock (own resources and one shared), with the masters' CPU
//!   per cycle (`--dev` only).
//! - **Several resources at once** ([`multi`], not in the default list):
//!   cycles/s of locks on 1 (plain), 2 and 3 resources (`--multi-sizes`)
//!   at each `--concurrency`, through a daemon, with the masters' CPU per
//!   cycle (`--dev`).
//! - **Frozen client** ([`frozen`], not in the default list): a client
//!   process holding a lock through `Hold` with each ttl of `--frozen-ttls`
//!   is SIGSTOPped; the time until a waiting client gets the lock, beside
//!   the daemon's keepalive bound.
//! - **Script cost** ([`script_cost`], not in the default list, `--dev`
//!   only): one master's CPU per plain cycle of the batch script by batch
//!   size (`--script-batches`), without the fence's record, also without
//!   its reads, and of rslock's commands; and, from the master's own
//!   counters, its time inside script calls as the commands they ran and
//!   the Lua around them.
//! - **Read-write locks** ([`rw`], not in the default list): plain,
//!   shared and mixed Acquire + Release cycles at C=64, with the masters'
//!   CPU per cycle.
//!
//! `--dev` (the default without `--addr`/`--nodes`) starts five local Valkey
//! masters (`REDLOCKD_VALKEY_BIN`, else `valkey-server` on `PATH`) and
//! daemon processes over them (`target/<profile>/redlockd`, beside this
//! binary: build it first). Otherwise `--nodes` names the masters
//! (W1 engine/raw/library, W3) and `--addr` running daemons (W1 grpc, W2);
//! W1 `floor` always spawns its own floor process.
//!
//! ```sh
//! bash scripts/setup.sh && source .venv/redlockd-env
//! cargo run --release --features bench-library --bin redlockd-bench -- --dev
//! ```
//!
//! The gRPC floor alone beside the daemon (docs/benchmarks.md, "The gRPC
//! floor"):
//!
//! ```sh
//! cargo build --release -p redlockd -p redlockd-bench --bins
//! target/release/redlockd-bench --dev --workloads w1 --modes grpc,floor --concurrency 1,64
//! ```
//!
//! The peers beside them, in the same run (docs/benchmarks.md, "Peers in
//! the same run"): `bash scripts/bench-peers.sh`.
//!
//! Bench, daemons and masters share the machine's cores.

/// The daemon's allocator (see `src/main.rs`), so that the in-process modes
/// (`grpc`, `engine`, `raw`, `library`) are measured with the allocator the
/// daemon ships with, all alike.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod burst;
mod commandstats;
mod frozen;
mod multi;
mod peers;
mod proc;
mod report;
mod resp;
mod rw;
mod script_cost;
mod semaphore;
mod setup;
mod stats;
mod w1;
mod w1_library;
mod w1_peers;
mod w2;
mod w2_log;
mod w2_peers;
mod w3;

use clap::Parser;
use redlockd_testkit::masters::LocalMasters;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Errors of the bench: reported, never recovered from.
pub use redlockd_testkit::BoxError;

/// Benchmarks redlockd: W1 uncontended throughput and latency per layer
/// (and the gRPC floor: `--modes grpc,floor`), W2 contended hand-off, W3
/// open sessions.
#[derive(Debug, Parser)]
#[command(about)]
pub struct Args {
    /// Workloads to run, in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "w1,w2,w3,burst,semaphore"
    )]
    workloads: Vec<Workload>,
    /// How long each W1 and W2 run lasts: seconds ("10") or humantime ("1m").
    #[arg(long, default_value = "10", value_parser = parse_duration)]
    duration: Duration,
    /// W1: numbers of concurrent workers, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    concurrency: Vec<usize>,
    /// Several resources at once (`multi`): resources per lock, one run
    /// each per concurrency (1: the plain lock, beside).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    multi_sizes: Vec<usize>,
    /// W1: modes, one run each per concurrency. `floor`: the `grpc` calls
    /// to a bare tonic server (`redlockd-echo-floor`), the gRPC floor under
    /// the daemon's CPU per cycle. `redsync`, `etcd`: the peers, run by
    /// `redlockd-peers` (`--peers-bin`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "grpc,floor,engine,raw,library"
    )]
    modes: Vec<w1::Mode>,
    /// W1 `grpc` and `floor`: HTTP/2 connections the workers share, as the workers of a
    /// few client processes share their channels. At C = 64, 64 connections
    /// made 3,655 cycles/s and 4 made 5,499 (16: 4,539; 1: 5,695): frames of
    /// many calls share a system call on both sides.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    grpc_connections: u16,
    /// W2: what runs, in this order: the daemon with wake-ups and with
    /// polling (`--dev`), and the peers `redsync` and `etcd`
    /// (`redlockd-peers`).
    #[arg(long, value_delimiter = ',', default_value = "wake,poll")]
    w2_modes: Vec<w2::W2Mode>,
    /// The `redlockd-peers` binary (`tools/peers`, Go) for the `redsync`
    /// and `etcd` modes; default: next to this binary, where
    /// scripts/bench-peers.sh builds it.
    #[arg(long, value_name = "PATH")]
    peers_bin: Option<PathBuf>,
    /// W2: tasks contending for the one resource.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(2..=1000))]
    contenders: u32,
    /// W2: how long each grant is held before its Release, in microseconds.
    #[arg(long, default_value_t = 0)]
    hold_us: u64,
    /// W3: numbers of open Hold sessions, one daemon process each.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    sessions: Vec<usize>,
    /// W3: how long the sessions are measured once all are open.
    #[arg(long, default_value = "30", value_parser = parse_duration)]
    w3_duration: Duration,
    /// Bursts: Acquire calls started at once on one connection.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    burst_calls: u32,
    /// Bursts: Hold sessions opened at once, spread over each of
    /// `--burst-connections` in turn.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    burst_sessions: u32,
    /// Bursts: the counts of HTTP/2 connections the Hold burst is spread
    /// over, one daemon process each.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16", value_parser = clap::value_parser!(u16).range(1..=1000))]
    burst_connections: Vec<u16>,
    /// A setting of the daemon processes (W1 grpc, W2, W3, bursts) as `key=value` in the
    /// configuration's dotted names, e.g. `limits.max_acquisitions_in_flight=32`
    /// (repeatable); the rest are the defaults.
    #[arg(long = "daemon-set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    daemon_settings: Vec<(String, String)>,
    /// Script cost: operations per script call, one run each per variant.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64", value_parser = clap::value_parser!(u16).range(1..=128))]
    script_batches: Vec<u16>,
    /// Frozen client: the session ttls, one frozen holder each.
    #[arg(long, value_delimiter = ',', default_value = "1s,2s,5s", value_parser = parse_duration)]
    frozen_ttls: Vec<Duration>,
    /// Start five local Valkey masters and daemon processes. The default
    /// when neither --addr nor --nodes is given.
    #[arg(long, conflicts_with_all = ["addr", "nodes"])]
    dev: bool,
    /// A running daemon (repeatable): W2 runs against each, W1 grpc against
    /// the first.
    #[arg(long, value_name = "HOST:PORT")]
    addr: Vec<SocketAddr>,
    /// Running masters (comma-separated URLs) for W1 engine/raw/library and
    /// for the W3 daemon process.
    #[arg(long, value_delimiter = ',', value_name = "URL")]
    nodes: Vec<String>,
}

/// The workloads this tool knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Uncontended acquire + release.
    W1,
    /// Contended hand-off.
    W2,
    /// Open Hold sessions.
    W3,
    /// Callers arriving at once.
    Burst,
    /// A Hold client process frozen with SIGSTOP.
    Frozen,
    /// Read-write locks: shared and exclusive-among-readers cycles at
    /// C=64 beside the plain lock, with the masters' CPU per cycle (`rw.rs`).
    Rw,
    /// A semaphore's permits beside the plain lock, C = 64.
    Semaphore,
    /// One master's CPU per cycle of the batch script, by batch size,
    /// with and without the fence's record and reads, beside rslock's commands.
    Script,
    /// Locks on several resources at once beside the plain lock.
    Multi,
}

fn parse_setting(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or("expected KEY=VALUE, e.g. redlock.node_timeout=100ms")?;
    Ok((key.trim().to_owned(), value.trim().to_owned()))
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
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(frozen::HOLDER_FLAG) {
        return match frozen::holder_main(&argv[2..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("redlockd-bench {}: {error}", frozen::HOLDER_FLAG);
                ExitCode::FAILURE
            }
        };
    }
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,redlockd_bench=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    if args.concurrency.contains(&0) || args.sessions.contains(&0) {
        eprintln!("redlockd-bench: --concurrency and --sessions must be above zero");
        return ExitCode::FAILURE;
    }
    let dev = args.dev || (args.addr.is_empty() && args.nodes.is_empty());
    // Started before the runtime (it blocks); stopped when dropped, at the end.
    let masters = match dev.then(setup::start_masters).transpose() {
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
            reports.print_tables();
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("redlockd-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Prints one JSON line now (runs are long: a line per finished run).
pub fn emit(line: &str) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

/// The local masters' process ids (none without `--dev`).
pub(crate) fn master_pids(masters: Option<&LocalMasters>) -> Vec<u32> {
    masters.map_or_else(Vec::new, |m| {
        (0..m.len()).filter_map(|i| m.pid(i)).collect()
    })
}

/// Every run of this invocation, in the order of `--workloads`.
async fn run_all(args: &Args, masters: Option<&LocalMasters>) -> Result<report::Reports, BoxError> {
    let nodes = masters.map_or_else(|| args.nodes.clone(), LocalMasters::urls);
    let mut reports = report::Reports::default();
    for workload in &args.workloads {
        match workload {
            Workload::W1 => {
                let pids = master_pids(masters);
                reports.w1 = w1::run_all(args, masters.is_some(), &nodes, &pids).await?;
            }
            Workload::W2 => reports.w2 = w2::run_all(args, masters).await?,
            Workload::W3 if nodes.is_empty() => {
                tracing::warn!("W3 skipped: it spawns a daemon, which needs --dev or --nodes");
            }
            Workload::W3 => reports.w3 = w3::run_all(args, &nodes).await?,
            Workload::Burst if nodes.is_empty() => {
                tracing::warn!("bursts skipped: they spawn a daemon, which needs --dev or --nodes");
            }
            Workload::Burst => {
                let (calls, sessions) = (args.burst_calls as usize, args.burst_sessions as usize);
                let connections: Vec<usize> =
                    args.burst_connections.iter().map(|&n| n as usize).collect();
                let settings = &args.daemon_settings;
                reports.burst =
                    burst::run_all(calls, sessions, &connections, &nodes, settings).await?;
            }
            Workload::Frozen if nodes.is_empty() => {
                tracing::warn!("frozen skipped: it spawns a daemon, which needs --dev or --nodes");
            }
            Workload::Frozen => {
                let settings = &args.daemon_settings;
                reports.frozen = frozen::run_all(&args.frozen_ttls, &nodes, settings).await?;
            }
            Workload::Rw => {
                rw::run_all(args, masters, &nodes).await?;
            }
            Workload::Semaphore => reports.semaphore = semaphore::run_all(args, masters).await?,
            Workload::Script => {
                let batches: Vec<usize> = args.script_batches.iter().map(|&b| b.into()).collect();
                script_cost::run_all(&batches, args.duration, masters).await?;
            }
            Workload::Multi => reports.multi = multi::run_all(args, masters, &nodes).await?,
        }
    }
    Ok(reports)
}
