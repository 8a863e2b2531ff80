//! Calls cancelled in a burst on one connection: a service whose context
//! ends cancels every call it had in flight at once (one RST_STREAM each,
//! often in the same packet as the call's HEADERS when the call was just
//! made). The daemon must not take that for a rapid-reset attack and close
//! the connection: the other calls and the Hold sessions on it would go
//! with it, and a session that vanishes loses its lock.

mod common;

use common::*;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;
use tokio::net::TcpStream;

/// Calls made and cancelled at once: as many as a service might have in
/// flight, far below the per-connection stream limit.
const CANCELLED: usize = 200;

/// A gRPC Validate with an empty message (INVALID_ARGUMENT: no resource).
fn validate(addr: std::net::SocketAddr) -> http::Request<()> {
    http::Request::post(format!("http://{addr}/redlock.v1.LockService/Validate"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("request")
}

/// 200 calls opened and reset in one burst (their frames leave together),
/// then one more call on the same connection: it is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_cancelled_calls_keeps_the_connection() {
    let h = Harness::start(Flavor::Valkey).await;
    let addr = h.daemons[0].addr;
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    let connection = tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    for _ in 0..CANCELLED {
        let (_response, mut body) = client
            .send_request(validate(addr), false)
            .expect("open a call");
        body.send_reset(h2::Reason::CANCEL);
        client = client.ready().await.expect("ready for the next call");
    }
    let (response, mut body) = client
        .send_request(validate(addr), false)
        .expect("open the last call");
    body.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]), true)
        .expect("send its message");
    let response = tokio::time::timeout(Duration::from_secs(20), response)
        .await
        .expect("answered within 20 s")
        .unwrap_or_else(|e| panic!("the connection was closed under the last call: {e}"));
    let status = |headers: &http::HeaderMap| {
        headers
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let mut code = status(response.headers());
    if code.is_none() {
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            chunk.expect("the answer's body");
        }
        let trailers = body.trailers().await.expect("trailers").expect("some");
        code = status(&trailers);
    }
    assert_eq!(code.as_deref(), Some("3"), "INVALID_ARGUMENT: no resource");
    assert!(!connection.is_finished(), "the connection is still open");
}
