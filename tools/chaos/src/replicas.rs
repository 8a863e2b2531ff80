//! The daemon replicas: separate `redlockd` processes configured through
//! environment variables, on fixed loopback ports so that one can be
//! SIGKILLed and started again where the clients expect it, and
//! [`Routes`], which the clients use to reach them.

use crate::cluster::BoxError;
use redlockd_testkit::client::endpoint;
use redlockd_testkit::process::{free_addr as free_port, DaemonCommand};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::process::Child;
use tokio::sync::Mutex;
use tonic::transport::Channel;

/// Longest a replica may take to report SERVING after it was started.
const SERVING_TIMEOUT: Duration = Duration::from_secs(20);

/// The replicas' `server.shutdown_grace`: how long a drained replica keeps
/// its sessions' locks.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Longest a drained replica may take to exit after SIGTERM: its grace, the
/// final release and the exit (the daemon's own hard stop is 5 s later).
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
/// Longest a drain waits for a session holding a lock on its replica
/// before it sends SIGTERM anyway.
const DRAIN_WAITS_FOR_SESSION: Duration = Duration::from_secs(3);

/// How the replicas are configured.
#[derive(Debug, Clone)]
pub(crate) struct ReplicaConfig {
    /// The `redlockd` binary.
    pub binary: PathBuf,
    /// The masters (their proxies).
    pub nodes: Vec<String>,
    /// `redlock.max_ttl`.
    pub max_ttl: Duration,
    /// `redlock.restart_quarantine`.
    pub quarantine: bool,
    /// Where their logs go.
    pub log_dir: PathBuf,
    /// Further settings (`section.key`, value), e.g. for an interleaving.
    pub extra: Vec<(String, String)>,
    /// Defects the daemons re-introduce (`REDLOCKD__TESTING__COUNTERFACTUALS`, comma
    /// separated): none when empty.
    pub counterfactual: Vec<String>,
}

/// One replica process.
struct Replica {
    /// Its gRPC address (fixed).
    grpc: SocketAddr,
    /// Its metrics address (fixed).
    metrics: SocketAddr,
    /// The process while it runs.
    child: Mutex<Option<Child>>,
}

/// The replicas and the way to them.
pub(crate) struct Replicas {
    config: ReplicaConfig,
    replicas: Vec<Replica>,
    /// Shared with the clients.
    routes: std::sync::Arc<Routes>,
}

/// How clients reach the replicas, like a load balancer with health
/// checks: a lazily (re)connecting channel each, and whether it is up.
pub(crate) struct Routes {
    /// One channel per replica.
    channels: Vec<Channel>,
    /// Whether the replica is up (set by the fault injector).
    up: Vec<AtomicBool>,
    /// `Hold` sessions holding a lock through each replica now (kept by the
    /// session clients): a drain waits for one, so that draining a replica
    /// always has sessions to tell, however the load shifts the timing.
    holding: Vec<std::sync::atomic::AtomicUsize>,
}

/// A session holding a lock through a replica; counted until dropped.
pub(crate) struct Holding<'a> {
    routes: &'a Routes,
    replica: usize,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.routes.holding[self.replica].fetch_sub(1, Ordering::SeqCst);
    }
}

impl Routes {
    /// The replica a client whose home is `home` should use now, and its
    /// channel: its home if up, else the next one that is.
    pub(crate) fn pick(&self, home: usize) -> (usize, Channel) {
        let n = self.channels.len();
        let index = (0..n)
            .map(|k| (home + k) % n)
            .find(|&i| self.up[i].load(Ordering::SeqCst))
            .unwrap_or(home % n);
        (index, self.channels[index].clone())
    }

    /// Counts a session holding a lock through `replica` while the guard
    /// lives.
    pub(crate) fn holding(&self, replica: usize) -> Holding<'_> {
        self.holding[replica].fetch_add(1, Ordering::SeqCst);
        Holding {
            routes: self,
            replica,
        }
    }
}

impl Replicas {
    /// Starts `count` replicas and waits until each reports SERVING.
    ///
    /// Each one's ports are picked free here and kept for the run. Another
    /// program on the machine may take a port between the pick and the
    /// replica's bind: a replica that exits at once saying its address is
    /// in use gets new ports, [`PORT_ATTEMPTS`] times at most.
    pub(crate) async fn start(config: ReplicaConfig, count: usize) -> Result<Replicas, BoxError> {
        let mut replicas = Vec::with_capacity(count);
        let mut channels = Vec::with_capacity(count);
        for i in 0..count {
            let (replica, channel) = first_start(&config, i).await?;
            replicas.push(replica);
            channels.push(channel);
        }
        let up = (0..count).map(|_| AtomicBool::new(true)).collect();
        let holding = (0..count)
            .map(|_| std::sync::atomic::AtomicUsize::new(0))
            .collect();
        let routes = std::sync::Arc::new(Routes {
            channels,
            up,
            holding,
        });
        Ok(Replicas {
            config,
            replicas,
            routes,
        })
    }

    /// Replica `i`'s gRPC and metrics addresses (fixed for the run).
    pub(crate) fn addrs(&self, i: usize) -> Option<(SocketAddr, SocketAddr)> {
        self.replicas.get(i).map(|r| (r.grpc, r.metrics))
    }

    /// The replicas' gRPC addresses, for clients in processes of their own
    /// (`crate::frozen`).
    pub(crate) fn grpc_addrs(&self) -> Vec<SocketAddr> {
        self.replicas.iter().map(|r| r.grpc).collect()
    }

    /// The clients' view.
    pub(crate) fn routes(&self) -> std::sync::Arc<Routes> {
        std::sync::Arc::clone(&self.routes)
    }

    /// Spawns replica `i` and waits until it is SERVING; then routes to it.
    pub(crate) async fn start_one(&self, i: usize) -> Result<(), BoxError> {
        let replica = self.replicas.get(i).ok_or("no such replica")?;
        let child = spawn(&self.config, replica, i)?;
        *replica.child.lock().await = Some(child);
        let channel = self.routes.channels[i].clone();
        if let Err(error) = redlockd_testkit::client::wait_serving(channel, SERVING_TIMEOUT).await {
            let log = log_path(&self.config.log_dir, i);
            return Err(format!(
                "replica {i} at {}: {error}; log: {}",
                replica.grpc,
                log.display()
            )
            .into());
        }
        self.routes.up[i].store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Stops routing to replica `i`, SIGKILLs it and reaps it.
    pub(crate) async fn kill(&self, i: usize) -> Result<(), BoxError> {
        let replica = self.replicas.get(i).ok_or("no such replica")?;
        // A drain is meant to meet sessions holding locks: wait (bounded)
        // for one on this replica, so the check that they were told does
        // not depend on the timing of a loaded machine.
        let waited = tokio::time::Instant::now();
        while self.routes.holding[i].load(Ordering::SeqCst) == 0
            && waited.elapsed() < DRAIN_WAITS_FOR_SESSION
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.routes.up[i].store(false, Ordering::SeqCst);
        if let Some(mut child) = replica.child.lock().await.take() {
            child.kill().await?;
        }
        Ok(())
    }

    /// Stops routing to replica `i`, sends it SIGTERM (a draining stop) and
    /// waits for it to exit 0 on its own.
    pub(crate) async fn drain(&self, i: usize) -> Result<(), BoxError> {
        let replica = self.replicas.get(i).ok_or("no such replica")?;
        self.routes.up[i].store(false, Ordering::SeqCst);
        let Some(mut child) = replica.child.lock().await.take() else {
            return Ok(());
        };
        let pid = child.id().ok_or("the replica had exited")?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid)?),
            nix::sys::signal::Signal::SIGTERM,
        )?;
        match tokio::time::timeout(DRAIN_LIMIT, child.wait()).await {
            Ok(status) if status.as_ref().is_ok_and(|s| s.success()) => Ok(()),
            Ok(status) => Err(format!("replica {i} exited with {status:?} after SIGTERM").into()),
            Err(_) => {
                child.kill().await?;
                Err(format!("replica {i} did not exit within {DRAIN_LIMIT:?} of SIGTERM").into())
            }
        }
    }

    /// Kills every replica (the end of the run).
    pub(crate) async fn stop_all(&self) {
        for i in 0..self.replicas.len() {
            if let Err(error) = self.kill(i).await {
                tracing::warn!(replica = i, %error, "could not stop a replica");
            }
        }
    }

    /// Replicas that exited on their own (not killed by a fault): a daemon
    /// crash, reported as an error of the run.
    pub(crate) async fn crashed(&self) -> Vec<String> {
        let mut crashed = Vec::new();
        for (i, replica) in self.replicas.iter().enumerate() {
            if let Some(child) = replica.child.lock().await.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = log_path(&self.config.log_dir, i);
                    crashed.push(format!(
                        "replica {i} exited on its own ({status}); log: {}",
                        log.display()
                    ));
                }
            }
        }
        crashed
    }
}

/// How many times a replica's first start picks new ports when its address
/// was taken.
const PORT_ATTEMPTS: usize = 5;

/// Replica `i` on free ports, SERVING, with its channel; new ports when the
/// ones picked were taken before it could listen on them.
async fn first_start(config: &ReplicaConfig, i: usize) -> Result<(Replica, Channel), BoxError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let (grpc, metrics) = (free_port()?, free_port()?);
        let channel = endpoint(grpc)?.connect_lazy();
        let replica = Replica {
            grpc,
            metrics,
            child: Mutex::new(None),
        };
        let mut child = spawn(config, &replica, i)?;
        let serving = redlockd_testkit::client::wait_serving(channel.clone(), SERVING_TIMEOUT);
        let failure = tokio::select! {
            served = serving => match served {
                Ok(()) => {
                    *replica.child.lock().await = Some(child);
                    return Ok((replica, channel));
                }
                Err(error) => error.to_string(),
            },
            exited = child.wait() => format!("exited at start ({exited:?})"),
        };
        let _ = child.kill().await;
        let log = log_path(&config.log_dir, i);
        let taken =
            std::fs::read_to_string(&log).is_ok_and(|text| text.contains("Address already in use"));
        if !taken || attempt == PORT_ATTEMPTS {
            return Err(format!("replica {i} at {grpc}: {failure}; log: {}", log.display()).into());
        }
        tracing::warn!(replica = i, %grpc, %metrics, attempt, "a port picked for the replica was taken; picking new ones");
        // The next attempt's log starts empty, so that this one's "in use"
        // is not read again.
        let _ = std::fs::remove_file(&log);
    }
}

fn log_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("replica-{i}.log"))
}

/// Spawns one `redlockd`, its output appended to its log.
fn spawn(config: &ReplicaConfig, replica: &Replica, i: usize) -> Result<Child, BoxError> {
    let log = std::env::var("CHAOS_DAEMON_LOG").unwrap_or_else(|_| "info".into());
    let mut command = DaemonCommand::new(config.binary.clone(), &config.nodes)
        .set("server.listen", replica.grpc)
        .set("metrics.enabled", "true")
        .set("metrics.listen", replica.metrics)
        .set(
            "redlock.max_ttl",
            humantime::format_duration(config.max_ttl),
        )
        .set("redlock.restart_quarantine", config.quarantine)
        .set(
            "server.shutdown_grace",
            humantime::format_duration(SHUTDOWN_GRACE),
        )
        .log_to(&log_path(&config.log_dir, i));
    // Every other replica serves on the single-threaded runtime (the
    // sidecar manifests' setting), the others at the default, so that the
    // mixed runs cover both. It also closes a silent client's connection
    // sooner (PINGs each 500 ms, 1.5 s to answer, where the default is
    // 1 s and 2 s): then a frozen child's 3 s lease (`crate::frozen_child`)
    // is still within the validity the child read when its connection is
    // closed, so a daemon that released the lock then would be caught.
    if i % 2 == 1 {
        command = command
            .set("server.worker_threads", 1)
            .set("server.keepalive_interval", "500ms")
            .set("server.keepalive_timeout", "1500ms");
    }
    for (key, value) in &config.extra {
        command = command.set(key, value);
    }
    let mut command = command.command()?;
    command.env("RUST_LOG", log);
    if !config.counterfactual.is_empty() {
        command.env(
            "REDLOCKD__TESTING__COUNTERFACTUALS",
            config.counterfactual.join(","),
        );
    }
    command.spawn().map_err(|error| {
        format!(
            "cannot start {} (build it first: cargo build --workspace --bins): {error}",
            config.binary.display()
        )
        .into()
    })
}
