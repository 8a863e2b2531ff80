//! The daemon's services besides locking: its `LockAdminService`
//! (`admin.rs`), its `ElectionService` (`elect.rs`) and the standard
//! `grpc.health.v1` (`health`), through
//! their generated clients on the client crate's connection
//! (`Client::channel`, which carries the bearer token), each call bounded
//! by `--timeout`.

use crate::error::CtlError;
use redlockd_client::{AuthChannel, Client};
use redlockd_proto::pb::election_service_client::ElectionServiceClient;
use redlockd_proto::pb::lock_admin_service_client::LockAdminServiceClient;
use std::future::Future;
use std::time::Duration;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_client::HealthClient;

/// The admin service on `client`'s connection.
pub(crate) fn admin(client: &Client) -> LockAdminServiceClient<AuthChannel> {
    LockAdminServiceClient::new(client.channel())
}

/// The election service on `client`'s connection.
pub(crate) fn elections(client: &Client) -> ElectionServiceClient<AuthChannel> {
    ElectionServiceClient::new(client.channel())
}

/// The health service on `client`'s connection.
pub(crate) fn health(client: &Client) -> HealthClient<AuthChannel> {
    HealthClient::new(client.channel())
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
