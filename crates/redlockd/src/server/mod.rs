//! Wiring: masters -> engine -> gRPC service, served until `shutdown`.
//! The binary and every integration test go through [`run`].
//!
//! [`run_draining`] reads as its steps: TLS material, [`start_metrics`],
//! [`build_engine`] (`engine.rs`), [`start_health`], [`build_services`],
//! [`drain_on`] (the draining stop) and [`serve_until_drained`]; the master
//! connections are closed on every return once the engine is built.

pub(crate) mod engine;
mod error;
mod window;

pub use crate::conn::accept::probes as keepalive_probes;
pub use engine::{build_engine, Engine};
pub use error::ServeError;
pub use window::connection_window;

use crate::config::{Config, ValidConfig};
use crate::conn::accept::{incoming, AcceptSettings};
use crate::conn::gate::Gate;
use crate::conn::streams::StreamsLayer;
use crate::conn::write_turn::TakingTurns;
use crate::metrics::MetricsError;
use crate::pb::election_service_server::ElectionServiceServer;
use crate::pb::lock_admin_service_server::LockAdminServiceServer;
use crate::pb::lock_service_server::LockServiceServer;
use crate::service::auth::Gatekeeper;
use crate::service::drain::{self, Drain, DrainControl};
use crate::service::hold::{OpenSessions, Sessions};
use crate::service::rate::ConnectionCalls;
use crate::service::{request::RequestBounds, AdminApi, LockApi};
use crate::{health, metrics_endpoint};
use futures::TryStreamExt;
use metrics_exporter_prometheus::PrometheusHandle;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tonic::service::Routes;

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
/// it stops extending what is left (telling each session `lost`: the locks
/// expire with their ttl, so no validity a client was told is cut short),
/// stops accepting, lets
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
    // Every return from here closes the master connections, an error
    // before serving as well as the end of a drain.
    let served = serve_engine(&config, listener, &engine, metrics, tls, shutdown, stop_now).await;
    engine.close().await;
    served
}

/// The steps of [`run_draining`] that run over a built engine.
async fn serve_engine(
    config: &ValidConfig,
    listener: TcpListener,
    engine: &Engine,
    metrics: Option<(PrometheusHandle, TcpListener)>,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send,
    stop_now: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let (control, phase) = drain::channel();
    let campaigns = crate::campaigns::Campaigns::start(
        &engine.redlock,
        &config.elections,
        config.session.extend_at,
        config.redlock.max_wait,
        &phase,
    );
    let health_service = start_health(engine, metrics, campaigns, &phase).await;
    let (services, open_sessions) = build_services(config, engine, phase).await?;
    tracing::info!(
        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        masters = config.redlock.nodes.len(),
        "serving redlock.v1.LockService"
    );
    let shutdown = drain_on(
        shutdown,
        control,
        config.server.shutdown_grace,
        open_sessions,
        stop_now,
    );
    let services = services.add_service(health_service);
    serve_until_drained(config, listener, tls, services, shutdown).await
}

/// The standard gRPC health service, NOT_SERVING until its watcher has
/// seen a quorum (and again from the start of a drain), and the Prometheus
/// endpoint, when enabled, until the daemon stops.
async fn start_health(
    engine: &Engine,
    metrics: Option<(PrometheusHandle, TcpListener)>,
    campaigns: crate::campaigns::Campaigns,
    phase: &Drain,
) -> tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health> {
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
            campaigns,
            async move { phase.stopping().await },
        ));
    }
    health_service
}

/// Reflection, `LockService` and `LockAdminService` behind the gate (and
/// the HTTP/JSON gateway when configured, over the same handlers), and the
/// count of open sessions the drain waits for.
async fn build_services(
    config: &ValidConfig,
    engine: &Engine,
    phase: Drain,
) -> Result<(Routes, OpenSessions), ServeError> {
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
    let sessions = Sessions::new(config, phase);
    let open_sessions = sessions.open();
    let gate = Gatekeeper::new(&config.auth, &config.limits);
    let admin_service = LockAdminServiceServer::new(AdminApi::new(
        engine.redlock.clone(),
        RequestBounds::from(&config.redlock),
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
    let api = Arc::new(
        LockApi::new(
            engine.redlock.clone(),
            RequestBounds::from(&config.redlock),
            sessions,
            gate.clone(),
            ConnectionCalls::new(config.limits.max_calls_per_connection),
            config.server.deadline_reserve,
        )
        .with_counterfactuals(config.testing.counterfactuals),
    );
    // The HTTP/JSON gateway, when configured: the same handlers and gate.
    crate::gateway::start(config, api.clone(), gate.clone(), http_stopped).await?;
    // Bigger messages are refused before they are decoded; callers are
    // authenticated and rate-limited from their headers alone.
    let election_service = ElectionServiceServer::from_arc(api.clone())
        .max_decoding_message_size(config.server.max_request_bytes);
    let election_service = {
        let gate = gate.clone();
        tonic::service::interceptor::InterceptedService::new(election_service, move |request| {
            gate.check(request)
        })
    };
    let lock_service =
        LockServiceServer::from_arc(api).max_decoding_message_size(config.server.max_request_bytes);
    let lock_service =
        tonic::service::interceptor::InterceptedService::new(lock_service, move |request| {
            gate.check(request)
        });
    let services = Routes::new(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(lock_service)
        .add_service(election_service)
        .add_service(admin_service);
    Ok((services, open_sessions))
}

/// The draining stop, as the server's shutdown signal: once `shutdown`
/// completes, drain for `grace`, until every session has ended or
/// `stop_now` completes, then stop (what is left is left to expire).
async fn drain_on(
    shutdown: impl Future<Output = ()>,
    control: DrainControl,
    grace: std::time::Duration,
    mut open_sessions: OpenSessions,
    stop_now: impl Future<Output = ()>,
) {
    shutdown.await;
    let until = control.start(grace);
    tracing::info!(
        ?grace,
        "draining: refusing new work, keeping open sessions' locks"
    );
    tokio::select! {
        () = open_sessions.all_ended() => tracing::info!("every session has ended"),
        () = tokio::time::sleep_until(until) => {
            tracing::warn!("shutdown grace over: the open sessions' locks are left to expire");
        }
        () = stop_now => tracing::warn!("stopping now: the open sessions' locks are left to expire"),
    }
    control.stop();
}

/// Serves `services` on `listener` (under TLS when configured) through our
/// own accept loop until `shutdown` completes and the calls in flight
/// have finished.
async fn serve_until_drained(
    config: &Config,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    services: Routes,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
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
        .initial_connection_window_size(window::connection_window(
            config.limits.max_calls_per_connection,
        ))
        .max_concurrent_streams(streams)
        // A client cancelling the calls it had in flight (a service's
        // context ended) resets them all at once, often before the server
        // has taken them up. hyper's default, 20 such resets pending, then
        // GOAWAY (its guard against "rapid reset" floods), closed the
        // connection under every other call and Hold session on it. As
        // many as the calls a connection may have open (the default's when
        // that is unlimited): still bounded.
        .http2_max_pending_accept_reset_streams(Some(
            match config.limits.max_calls_per_connection {
                0 => crate::config::LimitsConfig::default().max_calls_per_connection,
                calls => calls,
            },
        ))
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
        .add_routes(services);
    // Our own accept loop (`conn::accept`): the connection caps, a paused
    // accept on EMFILE instead of a spinning one, the idle timeout, and
    // TCP_NODELAY + keepalive on every accepted socket. Under TLS our own
    // handshakes (`conn::handshake`): a deadline, and failures logged and
    // counted. Connections report the socket's own `TcpConnectInfo`, and
    // under TLS tonic puts `TlsConnectInfo<TcpConnectInfo>` in each
    // request's extensions, which `Request::peer_certs` (certificate
    // identities, see `service::auth`) reads. Each connection, above its
    // TLS, gives way once before it writes (`conn::write_turn`).
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
            )
            .map_ok(TakingTurns::new);
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
        }
        None => {
            router
                .serve_with_incoming_shutdown(incoming.map_ok(TakingTurns::new), shutdown)
                .await
        }
    };
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
