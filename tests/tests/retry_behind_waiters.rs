//! A retry with its request id while other callers wait for the lock its
//! earlier call got (the answer was lost, or the client thought its Hold
//! stream broken), against five real masters: the retry is answered at
//! once with that lock, the same token and fence. The waiters ahead of it
//! wait for that very lock, so a retry queued behind them would wait out
//! its own `wait` and be told ABORTED about a lock it holds, and the lock
//! would then pass to them when the first call's session ended.

mod common;

use common::process::DaemonProcess;
use common::*;
use redlockd::pb;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd_testkit::masters::Flavor;
use std::net::SocketAddr;
use std::time::Duration;

against_both_servers!(
    an_acquire_retried_behind_a_waiter_gets_its_lock,
    a_hold_retried_behind_a_waiter_gets_its_lock,
);

const REQUEST_ID: &str = "Qw8-r_3zLm2Pn9Rt4Vx8Yc";
/// The retry's wait: shorter than the first lock's ttl, so a retry that
/// waited for its turn would be answered ABORTED.
const RETRY_WAIT_MS: u64 = 3_000;
/// The first lock's ttl.
const TTL_MS: u64 = 10_000;

fn request(resource: &str, ttl_ms: u64, wait_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(ttl_ms),
        wait: ms(wait_ms),
        owner: "retrying".into(),
        request_id: REQUEST_ID.into(),
        ..Default::default()
    }
}

/// A daemon process with metrics on (the waiters' gauge says when the
/// other caller queues), and a client of it.
async fn replica(h: &Harness) -> (DaemonProcess, SocketAddr, LockClient) {
    let (daemon, metrics, channel) = h.metered_daemon().await;
    (daemon, metrics, LockServiceClient::new(channel))
}

/// Another caller waits for `resource` (up to 20 s), queued in the daemon
/// before this returns; its answer, to come.
async fn waiter_queued(
    client: &LockClient,
    metrics: SocketAddr,
    resource: &str,
) -> tokio::task::JoinHandle<Result<pb::Lock, tonic::Status>> {
    let mut other = client.clone();
    let resource = resource.to_owned();
    let waiting = tokio::spawn(async move { acquire(&mut other, &resource, 1_000, 20_000).await });
    eventually(
        Duration::from_secs(10),
        "the other caller waits",
        || async { redlockd_testkit::metrics::counter(metrics, "redlock_waiters", "") == 1.0 },
    )
    .await;
    waiting
}

/// The first Acquire (request id, no wait) is granted; another caller
/// queues for the resource; the client retries with the same request id
/// and a wait, as after a lost answer: granted the same lock. Released, the
/// lock goes to the waiter.
async fn an_acquire_retried_behind_a_waiter_gets_its_lock(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let (_daemon, metrics, mut c) = replica(&h).await;
    let first = c
        .acquire(request("behind", TTL_MS, 0))
        .await
        .expect("granted")
        .into_inner()
        .lock
        .expect("a lock");
    let waiting = waiter_queued(&c, metrics, "behind").await;
    let again = c
        .acquire(request("behind", TTL_MS, RETRY_WAIT_MS))
        .await
        .expect("the retry is granted its own lock")
        .into_inner()
        .lock
        .expect("a lock");
    assert_eq!(
        (again.token.as_str(), again.fence),
        (first.token.as_str(), first.fence)
    );
    assert!(release(&mut c, &again).await.expect("release"), "was held");
    let theirs = waiting
        .await
        .expect("no panic")
        .expect("the waiter is granted after the release");
    assert_ne!(theirs.token, first.token);
    release(&mut c, &theirs).await.expect("release");
}

/// A Hold with a request id holds; another caller queues; the client opens
/// the Hold again with the same request id and a wait on a new connection
/// (it thinks the first stream broken): `acquired`, the same lock. With
/// both streams closed, the waiter is granted.
async fn a_hold_retried_behind_a_waiter_gets_its_lock(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let (daemon, metrics, mut c) = replica(&h).await;
    let (first_requests, first_events, first) =
        hold_asking(&mut c, request("held", TTL_MS, 0)).await;
    let waiting = waiter_queued(&c, metrics, "held").await;
    let mut fresh = client::connect(daemon.addr)
        .await
        .expect("a new connection");
    let (retry_requests, retry_events, again) =
        hold_asking(&mut fresh, request("held", TTL_MS, RETRY_WAIT_MS)).await;
    assert_eq!(
        (again.token.as_str(), again.fence),
        (first.token.as_str(), first.fence)
    );
    drop((first_requests, first_events, retry_requests, retry_events));
    let theirs = waiting
        .await
        .expect("no panic")
        .expect("the waiter is granted once both sessions end");
    assert_ne!(theirs.token, first.token);
    release(&mut c, &theirs).await.expect("release");
}
