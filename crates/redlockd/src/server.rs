//! Wiring: masters -> engine -> gRPC service, served until `shutdown`.
//! The binary and every integration test go through [`run`].

use crate::config::{Config, RestartQuarantine, ValidConfig};
use crate::conn::accept::{incoming, AcceptSettings};
use crate::conn::gate::Gate;
use crate::conn::idle::StreamsLayer;
use crate::metrics::MetricsError;
use crate::pb::lock_admin_service_server::LockAdminServiceServer;
use crate::pb::lock_service_server::LockServiceServer;
use crate::redlock::keys::release_channel;
use crate::redlock::{AdmissionLimits, NoMasters, Node, Redlock, RetryPolicy, Settings};
use crate::service::auth::Gatekeeper;
use crate::service::drain;
use crate::service::hold::Sessions;
use crate::service::rate::ConnectionCalls;
use crate::service::{request::Limits, AdminApi, LockApi};
use crate::valkey::auth::MasterAccess;
use crate::valkey::quarantine::Peers;
use crate::valkey::scripts::BatchScript;
use crate::valkey::subscriber::Subscriptions;
use crate::valkey::{NodeSettings, NodeSetupError, ValkeyMaster};
use crate::{health, metrics_endpoint};
use futures::future::join_all;
use metrics_exporter_prometheus::PrometheusHandle;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// HTTP/2 connection window the daemon grants each client connection.
/// h2 (0.4.20) closes a connection with ENHANCE_YOUR_CALM
/// ("too_many_data_frames", which clients see as RESOURCE_EXHAUSTED and
/// transport errors on every call) once the overhead of small DATA frames
/// it holds unread exceeds half this window: its guard against a flood of
/// tiny frames. Every gRPC request is such a frame, so with hyper's default
/// window (1 MiB) a burst of about 2,700 calls opened at once on one
/// connection, faster than the daemon reads them, lost the whole connection
/// (seen with 3,000 Acquire calls on a debug daemon, `chaos --bursts 3000`).
/// 4 MiB lets about 10,000 wait unread (beyond `max_calls_per_connection`,
/// which bounds them first); the window is a permission, not memory the
/// daemon sets aside.
const CONNECTION_WINDOW: u32 = 4 << 20;

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
    /// The metrics endpoint could not start.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The reflection service could not read the descriptors.
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// TLS material could not be loaded.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The HTTP/JSON gateway could not start.
    #[error(transparent)]
    Gateway(#[from] crate::gateway::GatewayStartError),
    /// A master password could not be read.
    #[error(transparent)]
    Secret(#[from] crate::valkey::auth::SecretError),
}

impl ServeError {
    /// Whether the configuration itself cannot be used (a file it names is
    /// unreadable or malformed, a master URL is unusable): the binary then
    /// exits 2 like any other invalid configuration, with a message naming
    /// the key.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            ServeError::Node(_)
                | ServeError::NoMasters(_)
                | ServeError::Tls(_)
                | ServeError::Secret(_)
        )
    }
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
        admission: AdmissionLimits {
            max_in_flight: config.limits.max_acquisitions_in_flight,
            max_queued: config.limits.max_queued_acquisitions,
        },
    }
}

/// How each master is watched, from the configuration: the blanket
/// restart quarantine lasts the longest lock's ttl plus its drift
/// allowance; under the horizon quarantine (the default) the masters'
/// horizons shorten it (see `crate::valkey::horizon`).
pub fn node_settings(config: &Config) -> NodeSettings {
    let r = &config.redlock;
    let mode = r.quarantine;
    NodeSettings {
        node_timeout: r.node_timeout,
        quarantine: (mode != RestartQuarantine::Off)
            .then(|| r.max_ttl + crate::redlock::validity::drift(r.max_ttl, r.drift_factor)),
        horizon: mode == RestartQuarantine::Horizon,
        drift_factor: r.drift_factor,
        max_clock_offset: r.max_clock_offset,
    }
}

/// The engine and everything it holds open: master connections and, when
/// waiters are woken by releases, the release-notice subscriptions.
pub struct Engine {
    /// The engine itself.
    pub redlock: Arc<Redlock>,
    /// The master connections.
    pub nodes: Vec<Arc<ValkeyMaster>>,
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
    let r = &config.redlock;
    // Horizons outlast each lock by the fences' clock allowance (see
    // `redlock::fence`): a master that lost its counters sits out until
    // the clock alone orders fences again.
    let allowance = crate::redlock::clock_allowance(r.node_timeout, r.max_clock_offset);
    let script = Arc::new(BatchScript::with(config.testing.counterfactuals, allowance));
    let access = MasterAccess::load(&config.masters)?;
    let peers = Peers::new(
        r.nodes.len(),
        &r.key_prefix,
        (r.max_ttl, allowance),
        r.drift_factor,
    );
    let nodes = r
        .nodes
        .iter()
        .map(|url| {
            ValkeyMaster::connect(url, node_settings(config), script.clone(), &access, &peers)
                .map(Arc::new)
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
    // A master first seen young sits out until the other masters' horizons
    // are read (`node::quarantine`); on a new cluster that takes a round
    // trip or two and ends with no quarantine. Serve once it is settled, so
    // that the first call after start-up meets masters whose trust is
    // known, not UNAVAILABLE (bounded: a master that never answers is
    // settled in the background).
    let settled = async {
        while nodes.iter().any(|n| n.state().unsettled().is_some()) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    if tokio::time::timeout(FIRST_CONNECT_WAIT, settled)
        .await
        .is_err()
    {
        tracing::warn!("restart quarantines not settled at start-up; serving anyway");
    }
    let as_nodes = nodes
        .iter()
        .map(|n| Arc::clone(n) as Arc<dyn Node>)
        .collect();
    let redlock = Arc::new(Redlock::new(as_nodes, engine_settings(config))?);
    redlock.watch_for_suspend();
    let subscriptions = r.wake_on_release.then(|| {
        let engine = Arc::downgrade(&redlock);
        Subscriptions::start(
            &r.nodes,
            &access,
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

/// The encoded descriptors of `proto/`, for gRPC server reflection.
const DESCRIPTORS: &[u8] = redlockd_proto::FILE_DESCRIPTOR_SET;

/// Serves the lock service on `listener` until `shutdown` completes, then
/// drains and stops as [`run_draining`] does (with no early stop).
pub async fn run(
    config: ValidConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    run_draining(config, listener, shutdown, std::future::pending()).await
}

/// Serves the lock service on `listener` until `shutdown` completes. Then
/// it drains (`crate::service::drain`): health turns NOT_SERVING, new
/// Acquire and Hold calls and waiting acquisitions get UNAVAILABLE, and
/// open `Hold` sessions are told `draining` and keep their locks until they
/// end or `server.shutdown_grace` runs out (or `stop_now` completes). Then
/// it releases what is left (telling each session), stops accepting, lets
/// in-flight calls finish, and closes the master connections. Alongside:
/// the standard gRPC health service (SERVING for `redlock.v1.LockService`
/// only while a quorum of masters is up and the daemon is not draining),
/// server reflection, and the Prometheus endpoint on `metrics.listen`.
pub async fn run_draining(
    config: ValidConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
    stop_now: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    // TLS material first: an unusable file is a configuration error, told
    // before anything else starts.
    // rustls refuses a key that does not match the certificate here too.
    let tls = crate::tls::server_config(&config.server.tls, b"h2")?;
    crate::fd_limit::raise(config.limits.max_connections);
    let metrics = start_metrics(&config).await?;
    let engine = build_engine(&config).await?;
    let (control, phase) = drain::channel();
    let (reporter, health_service) = tonic_health::server::health_reporter();
    // Known from the start, NOT_SERVING until the watcher has seen a quorum.
    reporter
        .set_service_status(
            health::LOCK_SERVICE,
            tonic_health::ServingStatus::NotServing,
        )
        .await;
    tokio::spawn(health::watch(
        engine.redlock.clone(),
        engine.nodes.clone(),
        reporter,
        metrics.as_ref().map(|(handle, _)| handle.clone()),
        // NOT_SERVING as soon as the drain starts: load balancers move away.
        {
            let phase = phase.clone();
            async move { phase.started().await }
        },
    ));
    if let Some((handle, metrics_listener)) = metrics {
        let phase = phase.clone();
        tokio::spawn(metrics_endpoint::serve(
            metrics_listener,
            handle,
            async move { phase.stopping().await },
        ));
    }
    // Both reflection versions: older grpcurl and IDEs only speak v1alpha.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(DESCRIPTORS)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;
    // The gateway keeps serving while the daemon drains (Extend and Release
    // still work; new acquisitions are refused by the handlers), and stops
    // with the rest.
    let http_stopped = {
        let phase = phase.clone();
        async move { phase.stopping().await }
    };
    let sessions = Sessions::new(&config, phase);
    let mut open_sessions = sessions.open();
    let gate = Gatekeeper::new(&config.auth, &config.limits);
    let admin_service = LockAdminServiceServer::new(AdminApi::new(
        engine.redlock.clone(),
        Limits::from(&config.redlock),
        gate.clone(),
        sessions.registry(),
    ))
    .max_decoding_message_size(config.server.max_request_bytes);
    let admin_service = {
        let gate = gate.clone();
        tonic::service::interceptor::InterceptedService::new(admin_service, move |request| {
            gate.check(request)
        })
    };
    let api = Arc::new(LockApi::new(
        engine.redlock.clone(),
        Limits::from(&config.redlock),
        sessions,
        gate.clone(),
        ConnectionCalls::new(config.limits.max_calls_per_connection),
        config.server.deadline_reserve,
    ));
    // The HTTP/JSON gateway, when configured: the same handlers and gate.
    crate::gateway::start(&config, api.clone(), gate.clone(), http_stopped).await?;
    // Bigger messages are refused before they are decoded; callers are
    // authenticated and rate-limited from their headers alone.
    let lock_service =
        LockServiceServer::from_arc(api).max_decoding_message_size(config.server.max_request_bytes);
    let lock_service =
        tonic::service::interceptor::InterceptedService::new(lock_service, move |request| {
            gate.check(request)
        });
    tracing::info!(
        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        masters = config.redlock.nodes.len(),
        "serving redlock.v1.LockService"
    );
    let grace = config.server.shutdown_grace;
    let shutdown = async move {
        shutdown.await;
        let until = control.start(grace);
        tracing::info!(
            ?grace,
            "draining: refusing new work, keeping open sessions' locks"
        );
        tokio::select! {
            () = open_sessions.all_ended() => tracing::info!("every session has ended"),
            () = tokio::time::sleep_until(until) => {
                tracing::warn!("shutdown grace over: releasing the open sessions' locks");
            }
            () = stop_now => tracing::warn!("stopping now: releasing the open sessions' locks"),
        }
        control.stop();
    };
    // Liveness of clients: a connection whose peer stops answering PINGs
    // is closed, which ends its Hold sessions and releases their locks.
    // The per-connection call limit is announced as HTTP/2's stream limit:
    // a gRPC client then queues further calls on its side instead of
    // having them refused.
    let streams = u32::try_from(config.limits.max_calls_per_connection)
        .ok()
        .filter(|&n| n > 0);
    let gate = Gate::new(
        config.limits.max_connections,
        config.limits.max_connections_per_peer,
    );
    let server = tonic::transport::Server::builder()
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_concurrent_streams(streams)
        .http2_keepalive_interval(Some(config.server.keepalive_interval))
        .http2_keepalive_timeout(Some(config.server.keepalive_timeout));
    if tls.is_none() {
        warn_if_exposed(&listener);
    }
    let router = server
        // Streams of every service count toward their connection's
        // activity: the idle timeout never cuts an open stream.
        .layer(StreamsLayer::new(
            gate.clone(),
            config.limits.max_unauthenticated_calls,
        ))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(lock_service)
        .add_service(admin_service);
    // Our own accept loop (`conn::accept`): the connection caps, a paused
    // accept on EMFILE instead of a spinning one, the idle timeout, and
    // TCP_NODELAY + keepalive on every accepted socket. Under TLS our own
    // handshakes (`conn::handshake`): a deadline, and failures logged and
    // counted. Connections report the socket's own `TcpConnectInfo`, and
    // under TLS tonic puts `TlsConnectInfo<TcpConnectInfo>` in each
    // request's extensions, which `Request::peer_certs` (certificate
    // identities, see `service::auth`) reads.
    let incoming = incoming(
        listener,
        gate,
        AcceptSettings {
            keepalive: config.server.keepalive_interval,
            keepalive_timeout: config.server.keepalive_timeout,
            idle_timeout: config.server.idle_timeout,
        },
    );
    let served = match tls {
        Some(tls) => {
            let incoming = crate::conn::handshake::tls(
                incoming,
                tls,
                config.server.tls_handshake_timeout,
                "grpc",
            );
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
        }
        None => {
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
        }
    };
    engine.close().await;
    Ok(served?)
}

/// Plaintext is meant for loopback only: anywhere else, tokens and lock
/// tokens cross the network in clear.
fn warn_if_exposed(listener: &TcpListener) {
    if let Ok(addr) = listener.local_addr() {
        if !addr.ip().is_loopback() {
            tracing::warn!(
                listen = %addr,
                "serving gRPC in plaintext on a non-loopback address: set server.tls.cert \
                 and server.tls.key"
            );
        }
    }
}

/// Installs the metrics recorder and binds `metrics.listen`, when enabled.
async fn start_metrics(
    config: &Config,
) -> Result<Option<(PrometheusHandle, TcpListener)>, MetricsError> {
    if !config.metrics.enabled {
        return Ok(None);
    }
    let handle = crate::metrics::install()?;
    let listener = TcpListener::bind(config.metrics.listen).await?;
    tracing::info!(
        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        "serving Prometheus metrics at /metrics"
    );
    Ok(Some((handle, listener)))
}
