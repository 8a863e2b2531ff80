//! `AcquireRequest.request_id` against five real masters (issue 22): a
//! retry answers the lock its request id holds, another request id is
//! ABORTED, a malformed one INVALID_ARGUMENT; after DEADLINE_EXCEEDED the
//! late grant is released with a request id too, and a retry right after
//! it keeps the lock it gets (tokens computed here from the contract's
//! formula, not the daemon's code).

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
    extend_after_expiry_on_the_masters_is_refused,
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
        ..Default::default()
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

/// A lock acquired with a request id expires on every master (observed on
/// the masters themselves, not through Validate): its Extend is refused
/// (FAILED_PRECONDITION), Validate says not held, and a retry with the
/// same request id acquires anew, the same derived token but a new,
/// higher fence (a new grant, not the expired one brought back).
async fn extend_after_expiry_on_the_masters_is_refused(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let first = c
        .acquire(request("expiring", REQUEST_ID, 300))
        .await
        .expect("granted")
        .into_inner()
        .lock
        .expect("a lock");
    eventually(
        Duration::from_secs(10),
        "the keys expire on every master",
        || async { h.holders("expiring", &first.token).await == 0 },
    )
    .await;
    let status = extend(&mut c, &first, 10_000)
        .await
        .expect_err("expired on every master");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(!validate(&mut c, &first).await.expect("validate").held);
    let again = acquire_as(&mut c, "expiring", REQUEST_ID)
        .await
        .expect("granted anew");
    assert_eq!(again.token, first.token);
    assert!(
        again.fence > first.fence,
        "{} <= {}",
        again.fence,
        first.fence
    );
    assert!(release(&mut c, &again).await.expect("release"));
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

/// A daemon whose masters are 30 ms away (each way) behind proxies, so one
/// Acquire with a request id takes about 180 ms (an Extend round that
/// finds nothing, then the acquire and commit rounds); an Acquire with a
/// 100 ms deadline sees DEADLINE_EXCEEDED while its grant is still
/// completing. Returns the harness, the daemon, its proxies and a client.
async fn slow_daemon() -> (
    Harness,
    daemon::Daemon,
    Vec<proxy::Proxy>,
    client::LockClient,
) {
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
    let c = client::connect(daemon.addr).await.expect("client");
    (h, daemon, proxies, c)
}

/// An Acquire (ttl 10 s, request id) whose 100 ms deadline passes while
/// its grant completes.
async fn acquire_too_late(c: &mut client::LockClient) {
    let mut call = tonic::Request::new(request("late", REQUEST_ID, 10_000));
    call.set_timeout(Duration::from_millis(100));
    let status = c.acquire(call).await.expect_err("deadline");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
}

/// After DEADLINE_EXCEEDED nothing is left locked, with a request id too:
/// the late grant (ttl 10 s) is released, so another caller waiting at most
/// 3 s gets the resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_grant_is_released_with_a_request_id_too() {
    let (h, daemon, proxies, mut c) = slow_daemon().await;
    acquire_too_late(&mut c).await;
    for proxy in &proxies {
        proxy.set(proxy::Mode::Pass);
    }
    let mut other = h.client().await;
    let lock = acquire(&mut other, "late", 1_000, 3_000)
        .await
        .expect("the late grant was released");
    assert_ne!(lock.token, derived("late", REQUEST_ID));
    daemon.stop(Duration::from_secs(5)).await.expect("stop");
}

/// A retry with the same request id through the same daemon, sent the
/// moment DEADLINE_EXCEEDED arrives (the late grant still completing, then
/// released): it waits for that release and acquires anew, and its lock
/// stays held on every master while the first call's task has long ended
/// (observed for 1 s). Before the turns, the retry could be answered the
/// late grant that was then deleted under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_right_after_deadline_exceeded_keeps_its_lock() {
    let (h, daemon, _proxies, mut c) = slow_daemon().await;
    acquire_too_late(&mut c).await;
    let retry = c
        .acquire(request("late", REQUEST_ID, 10_000))
        .await
        .expect("the retry is granted")
        .into_inner()
        .lock
        .expect("a lock");
    let token = derived("late", REQUEST_ID);
    assert_eq!(retry.token, token);
    let observe_until = tokio::time::Instant::now() + Duration::from_secs(1);
    while tokio::time::Instant::now() < observe_until {
        assert_eq!(
            h.holders("late", &token).await,
            5,
            "the retry's lock was deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(release(&mut c, &retry).await.expect("release"));
    daemon.stop(Duration::from_secs(5)).await.expect("stop");
}
