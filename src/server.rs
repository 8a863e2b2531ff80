//! Wiring: masters -> engine -> gRPC service, served until `shutdown`.
//! The binary and every integration test go through [`run`].

use crate::config::Config;
use crate::node::scripts::Scripts;
use crate::node::{FredNode, NodeSetupError};
use crate::pb::lock_service_server::LockServiceServer;
use crate::redlock::{NoMasters, Node, Redlock, RetryPolicy, Settings};
use crate::service::{request::Limits, LockApi};
use futures::future::join_all;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;

/// How long start-up waits for the masters' first connections before
/// serving anyway (a master that is down is retried in the background).
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(2);

/// Why the daemon could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A master's URL could not be used.
    #[error(transparent)]
    Node(#[from] NodeSetupError),
    /// No masters configured.
    #[error(transparent)]
    NoMasters(#[from] NoMasters),
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The engine's settings from the configuration.
pub fn engine_settings(config: &Config) -> Settings {
    let r = &config.redlock;
    Settings {
        key_prefix: r.key_prefix.clone(),
        node_timeout: r.node_timeout,
        drift_factor: r.drift_factor,
        retry: RetryPolicy {
            min: r.retry_delay_min,
            max: r.retry_delay_max,
        },
        fence_ttl: r.fence_ttl,
    }
}

/// Connects to the configured masters and returns the engine over them,
/// plus the nodes themselves (to close them at shutdown).
pub async fn build_engine(
    config: &Config,
) -> Result<(Arc<Redlock>, Vec<Arc<FredNode>>), ServeError> {
    let scripts = Arc::new(Scripts::new());
    let nodes = config
        .redlock
        .nodes
        .iter()
        .map(|url| {
            FredNode::connect(url, config.redlock.node_timeout, scripts.clone()).map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let connected = join_all(nodes.iter().map(|n| n.wait_connected(FIRST_CONNECT_WAIT))).await;
    for (node, up) in nodes.iter().zip(connected) {
        if !up {
            tracing::warn!(
                node = node.name(),
                "master not reachable at start-up; retrying in the background"
            );
        }
    }
    let as_nodes = nodes
        .iter()
        .map(|n| Arc::clone(n) as Arc<dyn Node>)
        .collect();
    let engine = Arc::new(Redlock::new(as_nodes, engine_settings(config))?);
    Ok((engine, nodes))
}

/// Serves the lock service on `listener` until `shutdown` completes, then
/// lets in-flight calls finish and closes the master connections.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let (engine, nodes) = build_engine(&config).await?;
    let api = LockApi::new(engine, Limits::from(&config.redlock));
    tracing::info!(
        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        masters = nodes.len(),
        "serving redlock.v1.LockService"
    );
    let served = tonic::transport::Server::builder()
        .add_service(LockServiceServer::new(api))
        // `Server::tcp_nodelay` only applies to listeners tonic binds itself;
        // without TCP_NODELAY on accepted sockets, Nagle's algorithm and the
        // client's delayed ACK hold a response back by ~40 ms, which the
        // caller would wrongly count against the lock's validity.
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await;
    join_all(nodes.iter().map(|n| n.close())).await;
    Ok(served?)
}
