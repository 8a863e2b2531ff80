//! What the workloads run against: local masters, in-process engines and
//! daemon processes (all from the test kit), and gRPC clients.

use crate::BoxError;
use redlockd::config::Config;
use redlockd_testkit::masters::{find_server, Flavor, LocalMasters};
use redlockd_testkit::process::{DaemonCommand, DaemonProcess};
use std::net::SocketAddr;
use std::time::Duration;

pub(crate) use redlockd_testkit::client::{proto_duration, LockClient as Client};
pub(crate) use redlockd_testkit::daemon::Daemon;

/// Five Valkey masters on loopback, no persistence.
pub(crate) fn start_masters() -> Result<LocalMasters, BoxError> {
    let masters = LocalMasters::start(&find_server(Flavor::Valkey)?, 5)?;
    tracing::info!(server = masters.version(), urls = ?masters.urls(), "masters started");
    Ok(masters)
}

/// The default configuration over `nodes`, as the bench's engines and
/// in-process daemons use it (checked; workloads may change it and seal it with
/// [`Config::validated`]).
pub(crate) fn bench_config(nodes: Vec<String>) -> Result<Config, BoxError> {
    let mut config = Config::default();
    config.redlock.nodes = nodes;
    // The default restart quarantine, as users run it. Each workload builds
    // new engines and daemons against masters younger than max_ttl that
    // still hold the horizons of the previous workload's locks; the boot
    // certificates the earlier daemons wrote (`redlockd::valkey::boot`) let
    // the newcomers trust them at once.
    config.metrics.enabled = false;
    config.validate()?;
    Ok(config)
}

/// Stops an in-process daemon (the kinds' workloads: multi, rw,
/// semaphore), waiting at most 10 s; a failure is a warning.
pub(crate) async fn stop(daemon: Daemon) {
    if let Err(error) = daemon.stop(Duration::from_secs(10)).await {
        tracing::warn!("daemon ended: {error}");
    }
}

/// Spawns `redlockd` (the binary next to this one) over `nodes` on a free
/// loopback port, so that its memory and CPU are its own.
/// `settings` (dotted keys) go on top.
pub(crate) fn spawn_process(
    nodes: &[String],
    max_sessions: usize,
    settings: &[(String, String)],
) -> Result<DaemonProcess, BoxError> {
    let mut settings = settings.to_vec();
    settings.insert(
        0,
        ("limits.max_sessions".to_owned(), max_sessions.to_string()),
    );
    spawn_daemon(nodes, &settings)
}

/// Spawns a daemon process with the default configuration (W1 `grpc`,
/// W2), `settings` on top.
pub(crate) fn spawn_daemon(
    nodes: &[String],
    settings: &[(String, String)],
) -> Result<DaemonProcess, BoxError> {
    with_settings(DaemonCommand::workspace(nodes)?, settings).spawn()
}

/// Spawns the gRPC floor (`redlockd-echo-floor`, next to this binary) on a
/// free loopback port: started as a daemon is, since it reads the daemon's
/// `server.listen` variable and stops on SIGTERM ([`stop_process`]).
/// `settings` are set as for a daemon; it reads `server.worker_threads`.
pub(crate) fn spawn_floor(settings: &[(String, String)]) -> Result<DaemonProcess, BoxError> {
    let binary = redlockd_testkit::bin::path("redlockd-echo-floor")?;
    with_settings(DaemonCommand::new(binary, &[]), settings).spawn()
}

/// `command` with each of `settings` (dotted keys) set.
fn with_settings(command: DaemonCommand, settings: &[(String, String)]) -> DaemonCommand {
    settings
        .iter()
        .fold(command, |command, (key, value)| command.set(key, value))
}

/// Stops a daemon process (SIGTERM, 15 s); a failure is a warning.
pub(crate) async fn stop_process(daemon: DaemonProcess) {
    match daemon.stop(Duration::from_secs(15)).await {
        Ok(status) if status.success() => {}
        Ok(status) => tracing::warn!("daemon process ended: {status}"),
        Err(error) => tracing::warn!("daemon process: {error}"),
    }
}

/// A client on its own HTTP/2 connection, retried while the daemon starts.
pub(crate) async fn connect(addr: SocketAddr) -> Result<Client, BoxError> {
    redlockd_testkit::client::connect(addr).await
}
