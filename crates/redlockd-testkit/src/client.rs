//! gRPC clients of a daemon that may still be starting: connect with a
//! bounded retry, and wait until its health says SERVING.

use crate::BoxError;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use std::net::SocketAddr;
use std::time::Duration;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// A gRPC client of the lock service.
pub type LockClient = LockServiceClient<Channel>;

/// The health service name that is SERVING while a quorum is trusted.
pub const LOCK_SERVICE: &str = "redlock.v1.LockService";

/// Attempts of [`connect`], 20 ms apart: five seconds in all.
const CONNECT_ATTEMPTS: u32 = 250;

/// An endpoint as the tests and tools use it: no Nagle, a short connect
/// timeout.
pub fn endpoint(addr: SocketAddr) -> Result<Endpoint, BoxError> {
    Ok(tuned(Endpoint::from_shared(format!("http://{addr}"))?))
}

/// Like [`endpoint`], over TLS with `tls` (tonic speaks TLS only to an
/// `https://` address).
pub fn tls_endpoint(addr: SocketAddr, tls: ClientTlsConfig) -> Result<Endpoint, BoxError> {
    Ok(tuned(
        Endpoint::from_shared(format!("https://{addr}"))?.tls_config(tls)?,
    ))
}

/// The settings every endpoint of [`endpoint`] and [`tls_endpoint`] has.
fn tuned(endpoint: Endpoint) -> Endpoint {
    endpoint
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(1))
}

/// A client on its own HTTP/2 connection, retried (boundedly) while the
/// daemon starts.
pub async fn connect(addr: SocketAddr) -> Result<LockClient, BoxError> {
    let endpoint = endpoint(addr)?;
    let mut last = None;
    for _ in 0..CONNECT_ATTEMPTS {
        match endpoint.connect().await {
            Ok(channel) => return Ok(LockServiceClient::new(channel)),
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("daemon at {addr} never accepted a connection: {last:?}").into())
}

/// Whether `service`'s health on `channel` is SERVING now.
pub async fn serving(channel: Channel, service: &str) -> bool {
    let asked = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await;
    matches!(asked, Ok(answer) if answer.get_ref().status == ServingStatus::Serving as i32)
}

/// Polls the lock service's health on `channel` every 20 ms until it is
/// SERVING; an error after `limit`.
pub async fn wait_serving(channel: Channel, limit: Duration) -> Result<(), BoxError> {
    let polling = async {
        while !serving(channel.clone(), LOCK_SERVICE).await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(limit, polling)
        .await
        .map_err(|_| format!("not SERVING within {limit:?}").into())
}

/// `d` as a protobuf duration (saturating; the suites' durations are small).
pub fn proto_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}
