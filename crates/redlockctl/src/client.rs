//! Reaching the daemon: the address, connecting, and unary calls bounded by
//! a deadline.

use crate::args::SecurityArgs;
use crate::error::{chain, CtlError};
use crate::security::{self, Auth};
use redlockd_proto::pb::lock_admin_service_client::LockAdminServiceClient;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use std::future::Future;
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};
use tonic_health::pb::health_client::HealthClient;

/// A connection that carries the bearer token (if any) on every call.
pub(crate) type Connection = InterceptedService<Channel, Auth>;

/// A gRPC client of the daemon.
pub(crate) type Client = LockServiceClient<Connection>;

/// A gRPC client of the daemon's `LockAdminService`.
pub(crate) type AdminClient = LockAdminServiceClient<Connection>;

/// Longest a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon to talk to, and how (TLS, token).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The URL, as connected to and as passed to `run`'s command.
    pub url: String,
    /// The TLS and token-file settings as environment variables, so that
    /// `run`'s command can call redlockctl the same way.
    pub env: Vec<(&'static str, String)>,
    endpoint: Endpoint,
    auth: Auth,
}

impl Target {
    /// Parses `--addr`: `http://HOST:PORT`, or `HOST:PORT` meaning the same,
    /// or `https://HOST:PORT` with the TLS flags; reads the token.
    pub(crate) fn parse(
        addr: &str,
        timeout: Duration,
        security: &SecurityArgs,
    ) -> Result<Target, CtlError> {
        let url = if addr.contains("://") {
            addr.to_owned()
        } else {
            format!("http://{addr}")
        };
        let https = url.starts_with("https://");
        if !https && !url.starts_with("http://") {
            return Err(CtlError::Usage(format!(
                "--addr {addr}: give http://HOST:PORT or https://HOST:PORT"
            )));
        }
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| CtlError::Usage(format!("--addr {addr}: {}", chain(&e))))?
            .connect_timeout(timeout.min(CONNECT_TIMEOUT))
            .tcp_nodelay(true);
        if let Some(tls) = security::tls(https, security)? {
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|e| CtlError::Usage(format!("TLS for {addr}: {}", chain(&e))))?;
        }
        let auth = Auth::from_args(security)?;
        let host = endpoint.uri().host().unwrap_or_default();
        if auth.has_token() && !https && !security::is_loopback(host) {
            eprintln!(
                "redlockctl: warning: sending the bearer token to {host} over plaintext \
                 http:// (use https:// so that it cannot be read on the way)"
            );
        }
        Ok(Target {
            url,
            env: security::env(security),
            endpoint,
            auth,
        })
    }

    /// A new connection.
    pub(crate) async fn connect(&self) -> Result<Client, CtlError> {
        Ok(LockServiceClient::with_interceptor(
            self.channel().await?,
            self.auth.clone(),
        ))
    }

    /// A new connection to the daemon's admin service.
    pub(crate) async fn admin(&self) -> Result<AdminClient, CtlError> {
        Ok(LockAdminServiceClient::with_interceptor(
            self.channel().await?,
            self.auth.clone(),
        ))
    }

    /// A new connection to the daemon's health service.
    pub(crate) async fn health(&self) -> Result<HealthClient<Connection>, CtlError> {
        Ok(HealthClient::with_interceptor(
            self.channel().await?,
            self.auth.clone(),
        ))
    }

    /// A new HTTP/2 connection, for any service of the daemon.
    async fn channel(&self) -> Result<Channel, CtlError> {
        self.endpoint
            .connect()
            .await
            .map_err(|error| CtlError::Connect {
                addr: self.url.clone(),
                reason: chain(&error),
            })
    }

    /// A new connection, as a string error (for retries that only report).
    pub(crate) async fn connect_quietly(&self, limit: Duration) -> Result<Client, String> {
        match tokio::time::timeout(limit, self.endpoint.connect()).await {
            Ok(Ok(channel)) => Ok(LockServiceClient::with_interceptor(
                channel,
                self.auth.clone(),
            )),
            Ok(Err(error)) => Err(format!("cannot connect: {}", chain(&error))),
            Err(_) => Err(format!("cannot connect within {limit:?}")),
        }
    }
}

/// Sends `message` with a gRPC deadline of `limit`, and gives up locally
/// at the same moment should the answer not come.
pub(crate) async fn call<M, T, F, Fut>(
    what: &str,
    limit: Duration,
    message: M,
    f: F,
) -> Result<T, CtlError>
where
    F: FnOnce(Request<M>) -> Fut,
    Fut: Future<Output = Result<Response<T>, Status>>,
{
    let mut request = Request::new(message);
    request.set_timeout(limit);
    match tokio::time::timeout(limit, f(request)).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(CtlError::status(what, status)),
        Err(_) => Err(CtlError::TimedOut {
            what: what.to_owned(),
            limit,
        }),
    }
}

/// A protobuf duration (saturating: durations from the command line fit).
pub(crate) fn proto_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration::try_from(d).unwrap_or(prost_types::Duration {
        seconds: i64::MAX,
        nanos: 0,
    })
}

/// A std duration from the daemon's (zero when absent or negative).
pub(crate) fn std_duration(d: Option<prost_types::Duration>) -> Duration {
    d.and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}
