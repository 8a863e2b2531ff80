//! W1, uncontended: C workers, each looping acquire + release on a resource
//! of its own (ttl 10 s, no wait), in several modes, so that the cost of
//! each layer shows as a ratio: `grpc` (daemon) vs `engine` (the daemon's
//! engine in-process) vs `raw` (the masters' own commands, no lock logic)
//! vs `library` (rslock in-process). `floor` runs the `grpc` mode's clients
//! and calls against `redlockd-echo-floor` (`src/floor/`), a bare tonic
//! server with canned answers: its CPU per cycle is the gRPC floor under
//! the daemon's. `redsync` and `etcd` run the workload in a
//! `redlockd-peers` process ([`crate::w1_peers`]): go-redsync over the same
//! masters, and etcd 3.7's `concurrency.Mutex`.

use crate::peers::{Peer, PeerTarget};
use crate::proc::{CpuMeter, CpuSplit};
use crate::setup::{self, bench_config, Client};
use crate::stats::{label, permille, sorted, us};
use crate::w1_library::Library;
use crate::{emit, Args, BoxError};
use fred::prelude::{
    Builder, Client as Fred, ClientLike, Config as FredConfig, Expiration, KeysInterface,
    LuaInterface, SetOptions, TcpConfig, Value,
};
use fred::types::{ClusterHash, CustomCommand};
use redlockd::redlock::{Lock, Redlock};
use redlockd::server::{build_engine, Engine};
use redlockd_proto::pb::{AcquireRequest, ReleaseRequest};
use redlockd_testkit::process::DaemonProcess;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lease asked for by every W1 acquisition.
const TTL: Duration = Duration::from_secs(10);

/// The layers W1 can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// Through a daemon's gRPC API.
    Grpc,
    /// The `grpc` mode's calls to a bare tonic server with canned answers
    /// (`redlockd-echo-floor`): the gRPC floor, no masters.
    Floor,
    /// The daemon's engine, in-process.
    Engine,
    /// `SET NX PX` and compare-and-delete on every master, no lock logic.
    Raw,
    /// The `rslock` crate, in-process.
    Library,
    /// go-redsync v4 over the same masters, in a `redlockd-peers` process.
    Redsync,
    /// etcd 3.7's `concurrency.Mutex`, in a `redlockd-peers` process, over
    /// an etcd member of its own.
    Etcd,
}

impl Mode {
    /// The mode's name in output.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Grpc => "grpc",
            Mode::Floor => "floor",
            Mode::Engine => "engine",
            Mode::Raw => "raw",
            Mode::Library => "library",
            Mode::Redsync => Peer::Redsync.name(),
            Mode::Etcd => Peer::Etcd.name(),
        }
    }
}

/// What a mode runs against, shared by its workers.
enum Target {
    /// A gRPC server: a daemon (`grpc`) or the floor (`floor`).
    Grpc {
        /// The server process this run spawned (None: `--addr`).
        daemon: Option<Box<DaemonProcess>>,
        addr: std::net::SocketAddr,
        /// HTTP/2 connections the workers share (`--grpc-connections`).
        connections: usize,
    },
    Engine(Engine),
    Raw(Arc<Raw>),
    Library(Arc<Library>),
    /// A peer: its workers run in a process of their own.
    Peer(Box<PeerTarget>),
}

/// One worker's handle on the target.
enum Worker {
    Grpc(Client),
    Engine(Arc<Redlock>),
    Raw(Arc<Raw>),
    Library(Arc<Library>),
}

/// The `raw` mode: one fred client per master, the two commands only.
pub(crate) struct Raw {
    masters: Vec<Fred>,
    /// `DELIFEQ` is there (Valkey 9); else a Lua compare-and-delete.
    delifeq: bool,
}

/// Lua compare-and-delete, for servers without `DELIFEQ`.
const COMPARE_AND_DELETE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

impl Raw {
    async fn connect(nodes: &[String]) -> Result<Raw, BoxError> {
        let mut masters = Vec::new();
        for url in nodes {
            let mut builder = Builder::from_config(FredConfig::from_url(url)?);
            builder.with_connection_config(|c| {
                c.max_command_attempts = 1;
                c.tcp = TcpConfig {
                    nodelay: Some(true),
                    ..TcpConfig::default()
                };
            });
            builder.with_performance_config(|p| p.default_command_timeout = Duration::from_secs(1));
            let client = builder.build()?;
            client.init().await?;
            masters.push(client);
        }
        let probe = masters.first().ok_or("no masters")?;
        let delifeq = probe
            .custom::<Value, Value>(delifeq(), vec!["bench/probe".into(), "-".into()])
            .await
            .is_ok();
        Ok(Raw { masters, delifeq })
    }

    /// `SET key token NX PX ttl` on every master at once: how many said OK.
    async fn acquire(&self, key: &str, token: &str) -> Result<usize, BoxError> {
        let sets = self.masters.iter().map(|m| {
            let expiry = Some(Expiration::PX(TTL.as_millis() as i64));
            m.set::<Value, _, _>(key, token, expiry, Some(SetOptions::NX), false)
        });
        let replies = futures::future::join_all(sets).await;
        let mut ok = 0;
        for reply in replies {
            ok += usize::from(!reply?.is_null());
        }
        Ok(ok)
    }

    /// Compare-and-delete on every master at once.
    async fn release(&self, key: &str, token: &str) -> Result<(), BoxError> {
        let deletes = self.masters.iter().map(|m| async move {
            match self.delifeq {
                true => {
                    m.custom::<i64, Value>(delifeq(), vec![key.into(), token.into()])
                        .await
                }
                false => m.eval::<i64, _, _, _>(COMPARE_AND_DELETE, key, token).await,
            }
        });
        for reply in futures::future::join_all(deletes).await {
            reply?;
        }
        Ok(())
    }

    async fn close(&self) {
        for master in &self.masters {
            let _ = master.quit().await;
        }
    }
}

fn delifeq() -> CustomCommand {
    CustomCommand::new_static("DELIFEQ", ClusterHash::FirstKey, false)
}

impl Worker {
    /// One acquire + release of `resource`: their latencies.
    async fn cycle(&mut self, resource: &str) -> Result<(Duration, Duration), BoxError> {
        let start = Instant::now();
        match self {
            Worker::Grpc(client) => {
                let request = AcquireRequest {
                    resource: resource.to_owned(),
                    ttl: Some(setup::proto_duration(TTL)),
                    wait: None,
                    owner: String::new(),
                    request_id: String::new(),
                    ..Default::default()
                };
                let lock = client.acquire(request).await?.into_inner().lock;
                let acquired = start.elapsed();
                let lock = lock.ok_or("Acquire answered without a lock")?;
                let (resource, token) = (lock.resource, lock.token);
                client.release(ReleaseRequest { resource, token }).await?;
                Ok((acquired, start.elapsed() - acquired))
            }
            Worker::Engine(engine) => {
                let Lock { token, .. } = engine.acquire(resource, TTL, Duration::ZERO).await?;
                let acquired = start.elapsed();
                engine.release(resource, &token).await?;
                Ok((acquired, start.elapsed() - acquired))
            }
            Worker::Raw(raw) => {
                let token = format!("{:032x}", rand::random::<u128>());
                let granted = raw.acquire(resource, &token).await?;
                let acquired = start.elapsed();
                raw.release(resource, &token).await?;
                match granted > raw.masters.len() / 2 {
                    true => Ok((acquired, start.elapsed() - acquired)),
                    false => Err(format!("SET NX on {granted} masters only").into()),
                }
            }
            Worker::Library(library) => library.cycle(resource, TTL).await,
        }
    }
}

/// What one worker saw in the measured window.
#[derive(Default)]
struct WorkerLog {
    acquire: Vec<Duration>,
    release: Vec<Duration>,
    errors: u64,
}

/// The figures of one W1 run.
pub(crate) struct W1Report {
    /// The mode's name.
    pub mode: &'static str,
    /// Concurrent workers.
    pub concurrency: usize,
    /// The measured window.
    pub duration: Duration,
    /// Acquire latencies of completed cycles, sorted.
    pub acquire: Vec<Duration>,
    /// Release latencies of completed cycles, sorted.
    pub release: Vec<Duration>,
    /// Cycles that failed.
    pub errors: u64,
    /// CPU per completed cycle, by process kind, over the window.
    pub cpu: CpuSplit,
}

impl W1Report {
    /// Completed cycles per second.
    pub(crate) fn cycles_per_s(&self) -> f64 {
        self.acquire.len() as f64 / self.duration.as_secs_f64()
    }

    /// The machine-readable line.
    pub(crate) fn json_line(&self) -> String {
        let (a, r) = (&self.acquire, &self.release);
        format!(
            "{{\"workload\":\"W1\",\"mode\":\"{}\",\"concurrency\":{},\"duration_s\":{:.3},\
             \"cycles\":{},\"cycles_per_s\":{:.1},\"acquire_p50_us\":{},\"acquire_p99_us\":{},\
             \"acquire_p999_us\":{},\"release_p50_us\":{},\"release_p99_us\":{},\
             \"release_p999_us\":{},\"errors\":{},{}}}",
            label(self.mode),
            self.concurrency,
            self.duration.as_secs_f64(),
            a.len(),
            self.cycles_per_s(),
            us(permille(a, 500)),
            us(permille(a, 990)),
            us(permille(a, 999)),
            us(permille(r, 500)),
            us(permille(r, 990)),
            us(permille(r, 999)),
            self.errors,
            self.cpu.json_fields(),
        )
    }
}

/// Every W1 run: each mode at each concurrency; skips (with a warning) the
/// modes this invocation has nothing to run against.
/// `master_pids`: the local masters' processes (empty: not ours).
pub(crate) async fn run_all(
    args: &Args,
    dev: bool,
    nodes: &[String],
    master_pids: &[u32],
) -> Result<Vec<W1Report>, BoxError> {
    let mut reports = Vec::new();
    for &mode in &args.modes {
        let target = match open(mode, args, dev, nodes).await {
            Ok(target) => target,
            Err(reason) => {
                tracing::warn!(mode = mode.name(), "W1 mode skipped: {reason}");
                continue;
            }
        };
        for &concurrency in &args.concurrency {
            tracing::info!(
                mode = mode.name(),
                concurrency,
                "W1 for {:?}",
                args.duration
            );
            // The floor never calls the masters: their idle CPU is no part
            // of its cycles.
            let meter = match &target {
                Target::Peer(peer) => peer.meter(master_pids),
                _ => CpuMeter {
                    masters: match mode {
                        Mode::Floor => Vec::new(),
                        _ => master_pids.to_vec(),
                    },
                    daemon: match &target {
                        Target::Grpc { daemon, .. } => daemon.as_deref().map(|d| d.pid),
                        _ => None,
                    },
                    client: None,
                },
            };
            let outcome = match &target {
                Target::Peer(peer) => {
                    run_peer(peer, mode, concurrency, args.duration, &meter).await
                }
                _ => run(&target, mode, concurrency, args.duration, &meter).await,
            };
            if outcome.is_err() {
                close(target).await;
                return outcome.map(|_| reports);
            }
            let report = outcome?;
            emit(&report.json_line());
            reports.push(report);
        }
        close(target).await;
    }
    Ok(reports)
}

async fn open(mode: Mode, args: &Args, dev: bool, nodes: &[String]) -> Result<Target, BoxError> {
    let nodes_needed = || match nodes.is_empty() {
        true => Err::<(), BoxError>("needs --dev or --nodes".into()),
        false => Ok(()),
    };
    Ok(match mode {
        Mode::Grpc if dev => {
            // A process of its own, so that its CPU is its own.
            let daemon = setup::spawn_daemon(nodes, &args.daemon_settings)?;
            let addr = daemon.addr;
            Target::Grpc {
                daemon: Some(Box::new(daemon)),
                addr,
                connections: usize::from(args.grpc_connections),
            }
        }
        Mode::Floor => {
            // Whatever the masters: the floor needs none.
            let floor = setup::spawn_floor(&args.daemon_settings)?;
            let addr = floor.addr;
            Target::Grpc {
                daemon: Some(Box::new(floor)),
                addr,
                connections: usize::from(args.grpc_connections),
            }
        }
        Mode::Grpc => {
            let addr = *args.addr.first().ok_or("needs --dev or --addr")?;
            Target::Grpc {
                daemon: None,
                addr,
                connections: usize::from(args.grpc_connections),
            }
        }
        Mode::Engine => {
            nodes_needed()?;
            Target::Engine(build_engine(&bench_config(nodes.to_vec())?).await?)
        }
        Mode::Raw => {
            nodes_needed()?;
            Target::Raw(Arc::new(Raw::connect(nodes).await?))
        }
        Mode::Library => {
            nodes_needed()?;
            Target::Library(Arc::new(Library::new(nodes)?))
        }
        Mode::Redsync => Target::Peer(Box::new(
            PeerTarget::open(Peer::Redsync, args, nodes).await?,
        )),
        Mode::Etcd => Target::Peer(Box::new(PeerTarget::open(Peer::Etcd, args, nodes).await?)),
    })
}

async fn close(target: Target) {
    match target {
        Target::Grpc { daemon, .. } => {
            if let Some(daemon) = daemon {
                setup::stop_process(*daemon).await;
            }
        }
        Target::Engine(engine) => engine.close().await,
        Target::Raw(raw) => raw.close().await,
        Target::Library(_) => {}
        Target::Peer(peer) => peer.close().await,
    }
}

/// One run of a peer, in a `redlockd-peers` process.
async fn run_peer(
    target: &PeerTarget,
    mode: Mode,
    concurrency: usize,
    duration: Duration,
    meter: &CpuMeter,
) -> Result<W1Report, BoxError> {
    let cycles = crate::w1_peers::run(target, mode.name(), concurrency, duration, meter).await?;
    Ok(W1Report {
        mode: mode.name(),
        concurrency,
        duration: cycles.window,
        acquire: sorted(cycles.acquire),
        release: sorted(cycles.release),
        errors: cycles.errors,
        cpu: cycles.cpu,
    })
}

/// One run: `concurrency` workers for `duration`, after one warm-up cycle each.
async fn run(
    target: &Target,
    mode: Mode,
    concurrency: usize,
    duration: Duration,
    meter: &CpuMeter,
) -> Result<W1Report, BoxError> {
    let mut workers = Vec::with_capacity(concurrency);
    let mut clients = Vec::new();
    for i in 0..concurrency {
        workers.push(match target {
            Target::Grpc {
                addr, connections, ..
            } => {
                if clients.len() < *connections {
                    clients.push(setup::connect(*addr).await?);
                }
                Worker::Grpc(clients[i % clients.len()].clone())
            }
            Target::Engine(engine) => Worker::Engine(Arc::clone(&engine.redlock)),
            Target::Raw(raw) => Worker::Raw(Arc::clone(raw)),
            Target::Library(library) => Worker::Library(Arc::clone(library)),
            Target::Peer(_) => return Err("a peer's workers run in redlockd-peers".into()),
        });
    }
    let run_id = format!(
        "bench/w1/{}/{concurrency}/{}",
        mode.name(),
        std::process::id()
    );
    let resources: Vec<String> = (0..concurrency).map(|i| format!("{run_id}/{i}")).collect();
    let warm = workers.iter_mut().zip(&resources).map(|(w, r)| w.cycle(r));
    // A failed warm-up cycle (a master too slow to answer on a loaded
    // machine) is not fatal: the measured cycles count their own errors.
    for outcome in futures::future::join_all(warm).await {
        if let Err(error) = outcome {
            tracing::warn!(mode = mode.name(), %error, "W1 warm-up cycle failed");
        }
    }
    let cpu = meter.start();
    let start = Instant::now();
    let deadline = start + duration;
    let tasks = workers
        .into_iter()
        .zip(resources)
        .map(|(mut worker, resource)| {
            tokio::spawn(async move {
                let mut log = WorkerLog::default();
                while Instant::now() < deadline {
                    match worker.cycle(&resource).await {
                        Ok((acquire, release)) => {
                            log.acquire.push(acquire);
                            log.release.push(release);
                        }
                        Err(error) => {
                            log.errors += 1;
                            tracing::debug!(%error, "W1 cycle failed");
                            // A lock left by a failed cycle expires with its ttl;
                            // do not spin on it meanwhile.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
                log
            })
        });
    let logs = futures::future::try_join_all(tasks).await?;
    let elapsed = start.elapsed();
    let cycles: usize = logs.iter().map(|log| log.acquire.len()).sum();
    let cpu = meter.per_unit(&cpu, cycles);
    let (mut acquire, mut release, mut errors) = (Vec::new(), Vec::new(), 0);
    for log in logs {
        acquire.extend(log.acquire);
        release.extend(log.release);
        errors += log.errors;
    }
    Ok(W1Report {
        mode: mode.name(),
        concurrency,
        duration: elapsed,
        acquire: sorted(acquire),
        release: sorted(release),
        errors,
        cpu,
    })
}
