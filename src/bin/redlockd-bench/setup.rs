//! What the workloads run against: local masters, in-process daemons, a
//! daemon process, and gRPC clients.

use crate::BoxError;
use redlockd::config::Config;
use redlockd::masters::{find_server, Flavor, LocalMasters};
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd::server::ServeError;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};

/// A gRPC client of the lock service.
pub type Client = LockServiceClient<Channel>;

/// Five Valkey masters on loopback, no persistence.
pub fn start_masters() -> Result<LocalMasters, BoxError> {
    let masters = LocalMasters::start(&find_server(Flavor::Valkey)?, 5)?;
    tracing::info!(server = masters.version(), urls = ?masters.urls(), "masters started");
    Ok(masters)
}

/// The default configuration over `nodes`, as the bench's daemons and
/// engines use it.
pub fn bench_config(nodes: Vec<String>) -> Result<Config, BoxError> {
    let mut config = Config::default();
    config.redlock.nodes = nodes;
    // The bench's masters are fresh or shared with nothing that could have
    // held a lock before: a restart quarantine would only keep them out.
    config.redlock.restart_quarantine = false;
    config.metrics.enabled = false;
    config.validate()?;
    Ok(config)
}

/// One daemon served in-process by `redlockd::run`.
pub struct Daemon {
    /// Where it listens (loopback, ephemeral port).
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl Daemon {
    /// Serves `config` on a loopback ephemeral port.
    pub async fn start(config: Config) -> Result<Daemon, BoxError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(redlockd::run(config, listener, async {
            let _ = stopped.await;
        }));
        Ok(Daemon { addr, stop, task })
    }

    /// Asks it to stop and waits (boundedly) until it has.
    pub async fn stop(self) {
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

/// A `redlockd` process (the binary next to this one), configured through
/// `REDLOCKD__*` variables, so that its memory and CPU are its own.
pub struct DaemonProcess {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its process id, for `/proc/<pid>/`.
    pub pid: u32,
    child: tokio::process::Child,
}

impl DaemonProcess {
    /// Spawns `redlockd` over `nodes` on a free loopback port.
    pub fn spawn(nodes: &[String], max_sessions: usize) -> Result<DaemonProcess, BoxError> {
        let binary = daemon_binary()?;
        // A free port, released just before the daemon binds it.
        let addr = StdListener::bind("127.0.0.1:0")?.local_addr()?;
        let child = tokio::process::Command::new(&binary)
            .env("REDLOCKD__REDLOCK__NODES", nodes.join(","))
            .env("REDLOCKD__SERVER__LISTEN", addr.to_string())
            .env("REDLOCKD__REDLOCK__RESTART_QUARANTINE", "false")
            .env("REDLOCKD__METRICS__ENABLED", "false")
            .env("REDLOCKD__LIMITS__MAX_SESSIONS", max_sessions.to_string())
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let pid = child.id().ok_or("the daemon process exited at once")?;
        Ok(DaemonProcess { addr, pid, child })
    }

    /// SIGTERM, then waits (boundedly) for it to exit; SIGKILL after 15 s.
    pub async fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        if let Err(error) = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM) {
            tracing::warn!(%error, "cannot signal the daemon process");
        }
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(outcome) => tracing::warn!("daemon process ended: {outcome:?}"),
            Err(_) => {
                tracing::warn!("daemon process did not stop within 15 s; killing it");
                let _ = self.child.kill().await;
            }
        }
    }
}

/// `redlockd` in the directory of this binary (cargo builds both there).
fn daemon_binary() -> Result<PathBuf, BoxError> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or("the bench binary has no directory")?;
    let binary = dir.join("redlockd");
    match binary.is_file() {
        true => Ok(binary),
        false => Err(format!(
            "{} not found: build it (cargo build --bins)",
            binary.display()
        )
        .into()),
    }
}

/// A client on its own HTTP/2 connection, retried while the daemon starts.
pub async fn connect(addr: SocketAddr) -> Result<Client, BoxError> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(1));
    let mut last = None;
    for _ in 0..250 {
        match endpoint.connect().await {
            Ok(channel) => return Ok(LockServiceClient::new(channel)),
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("daemon at {addr} never accepted a connection: {last:?}").into())
}

/// `d` as a protobuf duration (the bench's durations are all small).
pub fn proto_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}
