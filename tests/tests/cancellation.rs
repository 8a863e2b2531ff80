//! A caller that goes away mid-acquire (cancelled, or its deadline passed)
//! never leaves a lock behind.

mod common;

use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;
use tonic::Code;

against_both_servers!(
    cancelled_waiter_leaves_nothing,
    deadline_exceeded_leaves_nothing
);

/// A waiter for a held resource is cancelled; after the holder releases,
/// the resource is free (the waiter neither holds it nor keeps trying).
async fn cancelled_waiter_leaves_nothing(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut holder = h.client().await;
    let held = acquire(&mut holder, "busy", 30_000, 0)
        .await
        .expect("granted");

    let mut waiter = h.client().await;
    // The waiter's connection, for a call after the cancel.
    let mut waiters_connection = waiter.clone();
    let waiting = tokio::spawn(async move { acquire(&mut waiter, "busy", 30_000, 60_000).await });
    // Let the waiter's attempts reach the masters before cancelling it.
    let before = h.lock_commands(0).await;
    eventually(Duration::from_secs(5), "the waiter is trying", || async {
        h.lock_commands(0).await > before + 2
    })
    .await;
    waiting.abort();
    assert!(waiting.await.expect_err("aborted").is_cancelled());
    // The cancel (an HTTP/2 reset) is written on the waiter's connection
    // before this call, so the daemon has read it when this call returns.
    // Without that, the reset could still be in the client's queue when the
    // release below wakes the waiter (the client writes it from its
    // connection task, after the abort), and no daemon can tell that the
    // grant it answers is unwanted. (CI once failed so.) A reset read but
    // not yet acted on when the grant comes is released too: by the
    // dropped acquisition, or by the answer that cannot be sent
    // (`service::delivery`, whose handler tests pin that case).
    validate(&mut waiters_connection, &held)
        .await
        .expect("the waiter's connection still serves");

    assert!(release(&mut holder, &held).await.expect("release"));
    // If the waiter had kept trying it would take the lock (30 s ttl) and
    // this acquire, which waits 2 s, would fail with ABORTED.
    let mut third = h.client().await;
    let lock = acquire(&mut third, "busy", 1_000, 2_000)
        .await
        .expect("nothing left behind");
    assert!(release(&mut third, &lock).await.expect("release"));
    assert!(h.keys("redlock:lock:busy").await.is_empty());
}

/// An Acquire whose gRPC deadline passes while the resource is held answers
/// DEADLINE_EXCEEDED and leaves nothing locked.
async fn deadline_exceeded_leaves_nothing(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let held = acquire(&mut c, "slow", 30_000, 0).await.expect("granted");
    let mut request = tonic::Request::new(pb::AcquireRequest {
        resource: "slow".into(),
        ttl: ms(30_000),
        wait: ms(60_000),
        owner: String::new(),
        request_id: String::new(),
        ..Default::default()
    });
    request.set_timeout(Duration::from_millis(300));
    let status = c
        .acquire(request)
        .await
        .expect_err("held for longer than the deadline");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(release(&mut c, &held).await.expect("release"));
    let lock = acquire(&mut c, "slow", 1_000, 2_000)
        .await
        .expect("nothing left behind");
    assert!(release(&mut c, &lock).await.expect("release"));
}
