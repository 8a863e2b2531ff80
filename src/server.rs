//! Wiring: masters -> engine -> gRPC service, served until `shutdown`.
//! The binary and every integration test go through [`run`].

use crate::config::Config;
use crate::node::scripts::Scripts;
use crate::node::subscriber::Subscriptions;
use crate::node::{FredNode, NodeSetupError};
use crate::pb::lock_service_server::LockServiceServer;
use crate::redlock::keys::release_channel;
use crate::redlock::{NoMasters, Node, Redlock, RetryPolicy, Settings};
use crate::service::hold::Sessions;
use crate::service::{request::Limits, LockApi};
use futures::future::join_all;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
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
        wake_on_release: r.wake_on_release,
        wait_fallback: r.wait_fallback,
        max_waiters_per_resource: config.limits.max_waiters_per_resource,
        max_waiters: config.limits.max_waiters,
    }
}

/// The engine and everything it holds open: master connections and, when
/// waiters are woken by releases, the release-notice subscriptions.
pub struct Engine {
    /// The engine itself.
    pub redlock: Arc<Redlock>,
    nodes: Vec<Arc<FredNode>>,
    subscriptions: Option<Subscriptions>,
}

impl Engine {
    /// Closes every connection to the masters.
    pub async fn close(&self) {
        if let Some(subscriptions) = &self.subscriptions {
            subscriptions.close().await;
        }
        join_all(self.nodes.iter().map(|n| n.close())).await;
    }
}

/// Connects to the configured masters and builds the engine over them.
pub async fn build_engine(config: &Config) -> Result<Engine, ServeError> {
    let scripts = Arc::new(Scripts::new());
    let r = &config.redlock;
    let nodes = r
        .nodes
        .iter()
        .map(|url| FredNode::connect(url, r.node_timeout, scripts.clone()).map(Arc::new))
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
    let redlock = Arc::new(Redlock::new(as_nodes, engine_settings(config))?);
    let subscriptions = r.wake_on_release.then(|| {
        let engine = Arc::downgrade(&redlock);
        Subscriptions::start(
            &r.nodes,
            &release_channel(&r.key_prefix),
            Arc::new(move |message: &str| {
                if let Some(engine) = engine.upgrade() {
                    engine.notice_received(message);
                }
            }),
        )
    });
    Ok(Engine {
        redlock,
        nodes,
        subscriptions,
    })
}

/// Serves the lock service on `listener` until `shutdown` completes. Then
/// it stops accepting, ends every `Hold` session (releasing its lock and
/// telling the client), lets in-flight calls finish, and closes the master
/// connections.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let engine = build_engine(&config).await?;
    let (stopping, stop_sessions) = watch::channel(false);
    let sessions = Sessions::new(&config, stop_sessions);
    let api = LockApi::new(
        engine.redlock.clone(),
        Limits::from(&config.redlock),
        sessions,
    );
    tracing::info!(
        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        masters = config.redlock.nodes.len(),
        "serving redlock.v1.LockService"
    );
    let shutdown = async move {
        shutdown.await;
        let _ = stopping.send(true);
    };
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
    engine.close().await;
    Ok(served?)
}
