//! `AcquireRequest.request_id` against five real masters: a
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
    a_hold_retried_on_a_new_connection_keeps_the_lock,
    a_hold_moved_to_another_replica_keeps_the_lock,
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
    // An answer stands on a quorum; the last masters' writes follow it.
    h.held_everywhere("idem", &first.token).await;
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
    // The grant's last masters may answer after it; the refusals removed
    // nothing.
    h.held_everywhere("idem", &first.token).await;
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

/// How the first session of a retried Hold ends.
#[derive(Debug, Clone, Copy)]
enum FirstEnds {
    /// Its client sends `release` (then half-closes).
    Released,
    /// Its stream is dropped (the connection is gone).
    Dropped,
}

/// Opens a Hold with `request_id` on `resource` (ttl 1 s) and waits for
/// `acquired`.
async fn hold_as(
    client: &mut client::LockClient,
    resource: &str,
    request_id: &str,
) -> (
    tokio::sync::mpsc::Sender<pb::HoldRequest>,
    tonic::Streaming<pb::HoldEvent>,
    pb::Lock,
) {
    hold_asking(client, request(resource, request_id, 1_000)).await
}

/// A Hold with a request id holds; the client retries the Hold with the
/// same request id on a new connection while the first stream lingers,
/// and is told `acquired` with the same lock; then the first stream ends.
/// The retry keeps the lock: the first session's end deletes nothing of it
/// (its release answers `was_held = false`), another client is refused for
/// as long as the retry holds, the retry is never told `lost`, and its own
/// release finds the lock held. Before the fix the first session's
/// end-of-stream release deleted the lock under the retry, and a third
/// client was granted it at once.
async fn a_hold_retried_on_a_new_connection_keeps_the_lock(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    retried_hold(&h, 0, FirstEnds::Released).await;
    retried_hold(&h, 0, FirstEnds::Dropped).await;
}

/// The same, with the retry sent through another daemon replica (a client
/// moving its session after `draining`): the first replica knows nothing
/// of the retry, and still deletes nothing of it.
async fn a_hold_moved_to_another_replica_keeps_the_lock(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    let other = h.start_daemon().await;
    retried_hold(&h, other, FirstEnds::Released).await;
    retried_hold(&h, other, FirstEnds::Dropped).await;
}

/// The retried-Hold steps, the retry through daemon `retry_via`.
async fn retried_hold(h: &Harness, retry_via: usize, first_ends: FirstEnds) {
    let resource = format!("moved-{retry_via}-{first_ends:?}");
    let id = "Mv7-q_7wLm2Pn9Rt4Vx8Yb";
    let mut first_client = h.client_of(0).await;
    let (first_requests, mut first_events, first) = hold_as(&mut first_client, &resource, id).await;
    let mut retry_client = h.client_of(retry_via).await;
    let (retry_requests, mut retry_events, retried) =
        hold_as(&mut retry_client, &resource, id).await;
    assert_eq!(retried.token, first.token, "the same lock");
    assert_eq!(retried.fence, first.fence, "with its own fence");
    match first_ends {
        FirstEnds::Released => {
            first_requests
                .send(release_message())
                .await
                .expect("the first session's release");
            drop(first_requests);
            // The first session deleted nothing: the retry holds it now.
            loop {
                match first_events.message().await {
                    Ok(Some(pb::HoldEvent {
                        event: Some(pb::hold_event::Event::Released(released)),
                    })) => {
                        assert!(!released.was_held, "the first session no longer held it");
                        break;
                    }
                    Ok(Some(pb::HoldEvent {
                        event: Some(pb::hold_event::Event::Extended(_)),
                    })) => continue,
                    // Told `lost` (taken over) before its release: fine too.
                    Ok(Some(pb::HoldEvent {
                        event: Some(pb::hold_event::Event::Lost(_)),
                    })) => break,
                    other => panic!("the first session ended with {other:?}"),
                }
            }
        }
        FirstEnds::Dropped => {
            drop(first_requests);
            drop(first_events);
            drop(first_client);
        }
    }
    // For a few of the retry's extensions: nobody else gets the lock, and
    // the retry is never told `lost`.
    let mut third = h.client_of(0).await;
    let watch_until = tokio::time::Instant::now() + Duration::from_millis(1_500);
    while tokio::time::Instant::now() < watch_until {
        match acquire(&mut third, &resource, 1_000, 0).await {
            Ok(lock) => panic!("a third holder while the retry holds: {lock:?}"),
            Err(status) => assert_eq!(status.code(), Code::Aborted, "{status:?}"),
        }
        if let Ok(event) =
            tokio::time::timeout(Duration::from_millis(100), retry_events.message()).await
        {
            match event {
                Ok(Some(pb::HoldEvent {
                    event: Some(pb::hold_event::Event::Extended(_)),
                })) => {}
                other => panic!("the retry was told {other:?}"),
            }
        }
    }
    retry_requests
        .send(release_message())
        .await
        .expect("the retry's release");
    loop {
        match retry_events.message().await {
            Ok(Some(pb::HoldEvent {
                event: Some(pb::hold_event::Event::Released(released)),
            })) => {
                assert!(released.was_held, "the retry held the lock to the end");
                break;
            }
            Ok(Some(pb::HoldEvent {
                event: Some(pb::hold_event::Event::Extended(_)),
            })) => continue,
            other => panic!("the retry ended with {other:?}"),
        }
    }
}
