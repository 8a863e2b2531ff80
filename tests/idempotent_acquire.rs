//! `AcquireRequest.request_id` against five real masters (issue 22): a
//! retry answers the lock its request id holds, another request id is
//! ABORTED, a malformed one INVALID_ARGUMENT, and a caller that saw
//! DEADLINE_EXCEEDED frees the resource with the token derived from its
//! request id (computed here from the contract's formula, not the daemon's
//! code).

mod common;

use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use sha2::{Digest, Sha256};
use std::time::Duration;
use tonic::Code;

against_both_servers!(
    a_retry_answers_the_same_lock,
    another_request_id_is_aborted,
    a_malformed_request_id_is_invalid,
);

const REQUEST_ID: &str = "Zk3-q_7wLm2Pn9Rt4Vx8Ya";

/// The token the contract derives from a request id (lock.proto).
fn derived(resource: &str, request_id: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"redlockd/v1/token\0");
    hash.update(resource.as_bytes());
    hash.update(b"\0");
    hash.update(request_id.as_bytes());
    hex::encode(hash.finalize())[..32].to_owned()
}

fn request(resource: &str, request_id: &str, ttl_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(ttl_ms),
        wait: ms(0),
        owner: "test".into(),
        request_id: request_id.into(),
    }
}

async fn acquire_as(
    client: &mut client::LockClient,
    resource: &str,
    request_id: &str,
) -> Result<pb::Lock, tonic::Status> {
    let response = client
        .acquire(request(resource, request_id, 10_000))
        .await?;
    Ok(response.into_inner().lock.expect("a lock"))
}

/// Two Acquires with one request id, the second through another daemon
/// replica: the same token (the derived one) and fence.
async fn a_retry_answers_the_same_lock(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    let other = h.start_daemon().await;
    let mut c = h.client().await;
    let first = acquire_as(&mut c, "idem", REQUEST_ID)
        .await
        .expect("granted");
    assert_eq!(first.token, derived("idem", REQUEST_ID));
    let mut c2 = h.client_of(other).await;
    let again = acquire_as(&mut c2, "idem", REQUEST_ID)
        .await
        .expect("the same lock");
    assert_eq!(
        (again.token.as_str(), again.fence),
        (first.token.as_str(), first.fence)
    );
    assert_eq!(h.holders("idem", &first.token).await, 5);
    assert!(release(&mut c, &again).await.expect("release"));
}

/// The resource held under one request id: another request id, and a call
/// without one, are ABORTED; the holder keeps its lock.
async fn another_request_id_is_aborted(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let first = acquire_as(&mut c, "idem", REQUEST_ID)
        .await
        .expect("granted");
    let status = acquire_as(&mut c, "idem", "00112233445566778899aabbccddeeff")
        .await
        .expect_err("held under another request id");
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    let status = acquire(&mut c, "idem", 1_000, 0).await.expect_err("held");
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert_eq!(h.holders("idem", &first.token).await, 5);
}

/// A request id too short, too long or outside the alphabet:
/// INVALID_ARGUMENT naming `request_id`, and nothing written.
async fn a_malformed_request_id_is_invalid(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    for bad in ["tooshort", &"a".repeat(65), "with spaces is not base64url"] {
        let status = acquire_as(&mut c, "idem", bad)
            .await
            .expect_err("malformed");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().starts_with("request_id"), "{status:?}");
    }
    assert!(h.keys("redlock:lock:idem").await.is_empty());
}

/// The masters are 30 ms away (each way) behind proxies, so one Acquire
/// with a request id takes about 180 ms (an Extend round that finds
/// nothing, then the acquire and commit rounds); the caller's deadline is
/// 100 ms. It sees DEADLINE_EXCEEDED, and the grant lands after: the
/// daemon leaves it for the caller, who releases it with the derived token
/// it computes itself, and the resource is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_request_id_after_deadline_exceeded() {
    let h = Harness::start(Flavor::Valkey).await;
    let mut config = h.config();
    config.redlock.node_timeout = Duration::from_millis(500);
    let mut proxies = Vec::new();
    for i in 0..5 {
        let master = std::net::SocketAddr::from(([127, 0, 0, 1], h.masters.port(i)));
        let proxy = proxy::Proxy::start(master).await.expect("proxy");
        config.redlock.nodes[i] = format!("redis://{}", proxy.addr());
        proxies.push(proxy);
    }
    let daemon = daemon::Daemon::start(config.validated().expect("valid"))
        .await
        .expect("daemon");
    let channel = client::endpoint(daemon.addr)
        .expect("endpoint")
        .connect_lazy();
    client::wait_serving(channel, Duration::from_secs(10))
        .await
        .expect("serving");
    for proxy in &proxies {
        proxy.set(proxy::Mode::Slow(Duration::from_millis(30)));
    }
    let mut c = client::connect(daemon.addr).await.expect("client");
    let mut call = tonic::Request::new(request("late", REQUEST_ID, 10_000));
    call.set_timeout(Duration::from_millis(100));
    let status = c.acquire(call).await.expect_err("deadline");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");

    let token = derived("late", REQUEST_ID);
    eventually(Duration::from_secs(5), "the late grant lands", || async {
        h.holders("late", &token).await == 5
    })
    .await;
    let was_held = c
        .release(pb::ReleaseRequest {
            resource: "late".into(),
            token: token.clone(),
        })
        .await
        .expect("release")
        .into_inner()
        .was_held;
    assert!(was_held);
    assert_eq!(h.holders("late", &token).await, 0);
    for proxy in &proxies {
        proxy.set(proxy::Mode::Pass);
    }
    let mut fresh = h.client().await;
    acquire(&mut fresh, "late", 1_000, 0)
        .await
        .expect("the resource is free again");
    daemon.stop(Duration::from_secs(5)).await.expect("stop");
}
