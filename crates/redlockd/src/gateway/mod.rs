//! The HTTP/JSON gateway (`[http] listen`): `POST /v1/locks:acquire`,
//! `:extend`, `:release` and `:validate` over HTTP/1.1, for callers without
//! a gRPC stack (PHP, shell scripts with curl).
//!
//! Each body is the request message in the canonical proto3 JSON mapping
//! ([`json`]); each answer is the response message in the same mapping, or
//! an error ([`errors`]). A call goes through the very path a gRPC call
//! takes: the `Authorization` header and the others (`grpc-timeout`
//! included) become the call's metadata, the [`Gatekeeper`] authenticates
//! and rate-limits it from them (and from the connection's client
//! certificate under mTLS) before the body is read, and the same
//! [`LockApi`] handler validates, checks namespaces, calls the engine and
//! counts the metrics. `Hold` is gRPC only: an HTTP caller keeps its lock
//! with `:extend` calls well inside the lock's validity. `GET
//! /v1/elections/{name}` answers an election's current leader
//! (`LeaderResponse`), for a sidecar's neighbours without a gRPC client;
//! `?after=TERM&wait=30s` long-polls it, answering once the leader has
//! moved on from that term (`Observe` without a stream).

mod errors;
mod json;
mod routes;

use crate::config::Config;
use crate::conn::accept::{incoming, AcceptSettings};
use crate::conn::gate::{Activity, Gate};
use crate::pb;
use crate::pb::election_service_server::ElectionService;
use crate::pb::lock_service_server::LockService;
use crate::service::auth::Gatekeeper;
use crate::service::LockApi;
use errors::GatewayError;
use futures::{Stream, StreamExt};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{header, Request, Response};
use hyper_util::rt::TokioIo;
use json::Codec;
use routes::{route, Rpc};
use rustls::pki_types::CertificateDer;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpConnectInfo;

/// The gateway could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GatewayStartError {
    /// `http.listen` could not be bound.
    #[error("http.listen {addr}: {source}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS material could not be loaded.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The built-in descriptors do not decode (a build defect).
    #[error("HTTP gateway descriptors: {0}")]
    Descriptors(#[from] prost_reflect::DescriptorError),
}

/// What every connection of the gateway shares.
pub(crate) struct Gateway {
    api: Arc<LockApi>,
    gate: Gatekeeper,
    codec: Codec,
    /// `server.max_request_bytes`: the largest body read.
    max_body: usize,
}

/// One accepted connection, as the handlers see it.
struct Connection {
    local: Option<SocketAddr>,
    remote: SocketAddr,
    /// The verified client certificates (mTLS), end-entity first.
    certs: Option<Vec<CertificateDer<'static>>>,
}

/// A `200 OK` (or, changed by the caller, any) answer with a JSON body.
fn json_response(body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

impl Gateway {
    /// Serves `api` behind `gate`, reading bodies of at most `max_body`
    /// bytes.
    pub(crate) fn new(
        api: Arc<LockApi>,
        gate: Gatekeeper,
        max_body: usize,
    ) -> Result<Gateway, GatewayStartError> {
        Ok(Gateway {
            api,
            gate,
            codec: Codec::new()?,
            max_body,
        })
    }

    /// One call, answered.
    async fn answer(&self, conn: &Connection, request: Request<Incoming>) -> Response<Full<Bytes>> {
        match self.call(conn, request).await {
            Ok(body) => json_response(body),
            Err(error) => error.response(),
        }
    }

    /// Routes, authenticates (before the body is read, as the gRPC
    /// interceptor does before decoding), reads and decodes the body, and
    /// calls the handler.
    async fn call(
        &self,
        conn: &Connection,
        request: Request<Incoming>,
    ) -> Result<Vec<u8>, GatewayError> {
        let rpc = route(
            request.method(),
            request.uri().path(),
            request.uri().query(),
        )?;
        let (parts, body) = request.into_parts();
        let metadata = MetadataMap::from_headers(parts.headers);
        let mut extensions = tonic::Extensions::new();
        // Where `Request::remote_addr` looks: the rate limit without
        // authentication and the per-connection call cap key on it.
        extensions.insert(TcpConnectInfo {
            local_addr: conn.local,
            remote_addr: Some(conn.remote),
        });
        let checked = self.gate.check_with_certs(
            tonic::Request::from_parts(metadata, extensions, ()),
            conn.certs.as_deref(),
        )?;
        let body = self
            .read_body(&metadata_length(checked.metadata()), body)
            .await?;
        let (metadata, extensions, ()) = checked.into_parts();
        let api = &*self.api;
        let codec = &self.codec;
        Ok(match rpc {
            Rpc::Acquire => {
                let message =
                    codec.decode::<pb::AcquireRequest>("redlock.v1.AcquireRequest", &body)?;
                let response = api
                    .acquire(tonic::Request::from_parts(metadata, extensions, message))
                    .await?;
                codec.encode("redlock.v1.AcquireResponse", response.get_ref())?
            }
            Rpc::Extend => {
                let message =
                    codec.decode::<pb::ExtendRequest>("redlock.v1.ExtendRequest", &body)?;
                let response = api
                    .extend(tonic::Request::from_parts(metadata, extensions, message))
                    .await?;
                codec.encode("redlock.v1.ExtendResponse", response.get_ref())?
            }
            Rpc::Release => {
                let message =
                    codec.decode::<pb::ReleaseRequest>("redlock.v1.ReleaseRequest", &body)?;
                let response = api
                    .release(tonic::Request::from_parts(metadata, extensions, message))
                    .await?;
                codec.encode("redlock.v1.ReleaseResponse", response.get_ref())?
            }
            Rpc::Validate => {
                let message =
                    codec.decode::<pb::ValidateRequest>("redlock.v1.ValidateRequest", &body)?;
                let response = api
                    .validate(tonic::Request::from_parts(metadata, extensions, message))
                    .await?;
                codec.encode("redlock.v1.ValidateResponse", response.get_ref())?
            }
            Rpc::Leader { name, poll } => {
                let message = pb::LeaderRequest { name };
                let request = tonic::Request::from_parts(metadata, extensions, message);
                let response = match poll {
                    None => ElectionService::leader(api, request).await?.into_inner(),
                    Some(poll) => api.leader_after(request, poll.after, poll.wait).await?,
                };
                codec.encode("redlock.v1.LeaderResponse", &response)?
            }
        })
    }

    /// The whole body, refused (413) past `max_body` bytes, whether the
    /// `content-length` announces it or the bytes show it.
    async fn read_body(&self, length: &Option<u64>, body: Incoming) -> Result<Bytes, GatewayError> {
        let max = self.max_body;
        if length.is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX)) {
            return Err(GatewayError::too_large(max));
        }
        match Limited::new(body, max).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => {
                Err(GatewayError::too_large(max))
            }
            Err(error) => Err(GatewayError::unreadable(&error)),
        }
    }
}

/// The announced `content-length`, if any.
fn metadata_length(metadata: &MetadataMap) -> Option<u64> {
    metadata
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Binds `http.listen`, when set, and serves the gateway there (with the
/// gRPC port's TLS) until `shutdown` completes.
pub(crate) async fn start(
    config: &Config,
    api: Arc<LockApi>,
    gate: Gatekeeper,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayStartError> {
    let Some(addr) = config.http.listen else {
        return Ok(());
    };
    let tls = crate::tls::server_config(&config.server.tls, b"http/1.1")?;
    let gateway = Arc::new(Gateway::new(api, gate, config.server.max_request_bytes)?);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| GatewayStartError::Bind { addr, source })?;
    let bound = listener.local_addr().map_or(addr, |a| a);
    if tls.is_none() && !bound.ip().is_loopback() {
        tracing::warn!(
            listen = %bound,
            "serving the HTTP gateway in plaintext on a non-loopback address: set \
             server.tls.cert and server.tls.key"
        );
    }
    tracing::info!(listen = %bound, tls = tls.is_some(), "serving the HTTP/JSON gateway");
    // The gRPC port's connection limits, idle timeout and handshake
    // deadline apply here too, with places of their own: a flood on one
    // port does not take the other's.
    let incoming = incoming(
        listener,
        Gate::new(
            config.limits.max_connections,
            config.limits.max_connections_per_peer,
        ),
        AcceptSettings {
            keepalive: config.server.keepalive_interval,
            keepalive_timeout: config.server.keepalive_timeout,
            idle_timeout: config.server.idle_timeout,
        },
    );
    match tls {
        None => {
            let plain = incoming.map(|conn| {
                conn.map(|conn| {
                    let info = Connection {
                        local: conn.local(),
                        remote: conn.peer(),
                        certs: None,
                    };
                    let activity = conn.activity();
                    (conn, info, activity)
                })
            });
            tokio::spawn(serve(plain, gateway, shutdown));
        }
        Some(tls) => {
            let secure = crate::conn::handshake::tls(
                incoming,
                tls,
                config.server.tls_handshake_timeout,
                "http",
            )
            .map(|stream| {
                stream.map(|stream| {
                    let (conn, session) = stream.get_ref();
                    let info = Connection {
                        local: conn.local(),
                        remote: conn.peer(),
                        certs: session
                            .peer_certificates()
                            .map(|certs| certs.iter().map(|c| c.clone().into_owned()).collect()),
                    };
                    let activity = conn.activity();
                    (stream, info, activity)
                })
            });
            tokio::spawn(serve(secure, gateway, shutdown));
        }
    }
    Ok(())
}

/// Serves `gateway` on the admitted (and, under TLS, handshaken)
/// connections of `incoming` until `shutdown` completes; connections then
/// open finish their call in progress.
async fn serve<S, IO>(incoming: S, gateway: Arc<Gateway>, shutdown: impl Future<Output = ()>)
where
    S: Stream<Item = Result<(IO, Connection, Arc<Activity>), std::io::Error>>,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::pin!(shutdown);
    tokio::pin!(incoming);
    loop {
        let (stream, conn, activity) = tokio::select! {
            next = incoming.next() => match next {
                Some(Ok(next)) => next,
                // The accept loop pauses and logs failed accepts itself.
                Some(Err(_)) => continue,
                None => return,
            },
            () = &mut shutdown => return,
        };
        tokio::spawn(serve_connection(stream, conn, activity, gateway.clone()));
    }
}

/// HTTP/1.1 on one connection.
async fn serve_connection<S>(
    stream: S,
    conn: Connection,
    activity: Arc<Activity>,
    gateway: Arc<Gateway>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = Arc::new(conn);
    let service = hyper::service::service_fn(move |request| {
        let gateway = gateway.clone();
        let conn = conn.clone();
        // Keeps the connection from counting as idle until answered,
        // however long the request's `wait`.
        let in_progress = activity.open_stream();
        async move {
            let answer = gateway.answer(&conn, request).await;
            drop(in_progress);
            Ok::<_, Infallible>(answer)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}
