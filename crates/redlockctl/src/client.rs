//! Reaching the daemon: the address, connecting, and unary calls bounded by
//! a deadline.

use crate::error::{chain, CtlError};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use std::future::Future;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

/// A gRPC client of the daemon.
pub(crate) type Client = LockServiceClient<Channel>;

/// Longest a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon to talk to.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The URL, as connected to and as passed to `run`'s command.
    pub url: String,
    endpoint: Endpoint,
}

impl Target {
    /// Parses `--addr`: `http://HOST:PORT`, or `HOST:PORT` meaning the same.
    pub(crate) fn parse(addr: &str, timeout: Duration) -> Result<Target, CtlError> {
        let url = if addr.contains("://") {
            addr.to_owned()
        } else {
            format!("http://{addr}")
        };
        if !url.starts_with("http://") {
            return Err(CtlError::Usage(format!(
                "--addr {addr}: only http:// is supported (redlockctl has no TLS yet)"
            )));
        }
        let endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| CtlError::Usage(format!("--addr {addr}: {}", chain(&e))))?
            .connect_timeout(timeout.min(CONNECT_TIMEOUT))
            .tcp_nodelay(true);
        Ok(Target { url, endpoint })
    }

    /// A new connection.
    pub(crate) async fn connect(&self) -> Result<Client, CtlError> {
        Ok(LockServiceClient::new(self.channel().await?))
    }

    /// A new HTTP/2 connection, for any service of the daemon.
    pub(crate) async fn channel(&self) -> Result<Channel, CtlError> {
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
            Ok(Ok(channel)) => Ok(LockServiceClient::new(channel)),
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
