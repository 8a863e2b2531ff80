//! Waiting without polling: a waiter is woken by the holder's release
//! (through this replica or another) or at the holder's expiry, waiters on
//! one replica are served first come first served, and the waiter limits
//! answer RESOURCE_EXHAUSTED at once.

mod common;

use common::*;
use redlockd::config::Config;
use redlockd::server::build_engine;
use redlockd_testkit::commandstats;
use redlockd_testkit::masters::Flavor;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Code;

against_both_servers!(
    woken_by_release_through_same_replica,
    woken_by_release_through_other_replica,
    woken_at_expiry,
    first_come_first_served,
    waiter_limits,
    releases_publish_only_for_waiters,
);

/// The fallback retry is far away: only a wake-up can be quick.
const FALLBACK: Duration = Duration::from_secs(20);

fn slow_fallback(config: &mut Config) {
    config.redlock.wait_fallback = FALLBACK;
}

/// Time from the holder's release to the waiter's grant, the release going
/// through daemon `via`.
async fn handoff_after_release(flavor: Flavor, via: usize) -> Duration {
    let mut h = Harness::start_with(flavor, slow_fallback).await;
    h.start_daemon().await;
    let mut holder = h.client_of(via).await;
    let held = acquire(&mut holder, "baton", 30_000, 0)
        .await
        .expect("granted");
    let mut waiter = h.client_of(0).await;
    let waiting = tokio::spawn(async move {
        let lock = acquire(&mut waiter, "baton", 30_000, 25_000).await;
        (Instant::now(), lock)
    });
    // The waiter tried once and was refused before the release.
    eventually(
        Duration::from_secs(5),
        "the waiter was refused once",
        || async {
            // holder: acquire + commit; waiter: acquire + release after refusal
            h.lock_commands(0).await >= 4
        },
    )
    .await;
    let released = Instant::now();
    assert!(release(&mut holder, &held).await.expect("release"));
    let (granted, lock) = waiting.await.expect("waiter task");
    let lock = lock.expect("the waiter gets the lock");
    assert!(lock.fence > held.fence);
    let handoff = granted - released;
    println!("{flavor}: release via daemon {via} -> waiter granted after {handoff:?}");
    handoff
}

/// PUBLISH commands run on every master so far (`INFO commandstats`; a
/// PUBLISH from a script counts too).
async fn publishes(h: &Harness) -> u64 {
    let mut calls = 0;
    for i in 0..5 {
        let info = h.raw(i, "INFO", vec!["commandstats".into()]).await;
        let text = info.as_string().unwrap_or_default();
        calls += commandstats::calls(&text, &["publish"]);
    }
    calls
}

/// Releases of resources nobody waits for publish no notice (no
/// master work for nobody); once a waiter on another replica was refused,
/// the holder's release publishes, and the waiter is woken by it.
async fn releases_publish_only_for_waiters(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, slow_fallback).await;
    h.start_daemon().await;
    let mut holder = h.client_of(1).await;
    for i in 0..10 {
        let lock = acquire(&mut holder, &format!("alone/{i}"), 10_000, 0)
            .await
            .expect("free");
        assert!(release(&mut holder, &lock).await.expect("release"));
    }
    assert_eq!(publishes(&h).await, 0, "releases without waiters published");
    let held = acquire(&mut holder, "baton", 30_000, 0)
        .await
        .expect("free");
    let mut waiter = h.client_of(0).await;
    let waiting = tokio::spawn(async move {
        let lock = acquire(&mut waiter, "baton", 30_000, 25_000).await;
        (Instant::now(), lock)
    });
    // The waiter's refused attempt left its marker on the masters (the
    // fence hash's `wm`: the master's time until which a replica waits).
    eventually(Duration::from_secs(5), "the waiter marker", || async {
        let marker = vec!["redlock:fence:baton".into(), "wm".into()];
        h.raw(0, "HEXISTS", marker).await.as_u64() == Some(1)
    })
    .await;
    let ttl = h
        .raw(0, "PTTL", vec!["redlock:fence:baton".into()])
        .await
        .as_i64();
    assert!(
        ttl.is_some_and(|t| t > 0),
        "the marked hash expires: {ttl:?}"
    );
    let released = Instant::now();
    assert!(release(&mut holder, &held).await.expect("release"));
    let (granted, lock) = waiting.await.expect("waiter task");
    assert!(lock.expect("the waiter gets the lock").fence > held.fence);
    let handoff = granted - released;
    assert!(
        handoff < FALLBACK / 10,
        "{handoff:?}: not woken by the release notice"
    );
    assert!(
        publishes(&h).await >= 3,
        "the release published on its quorum"
    );
}

/// A release through the waiter's own replica wakes it at once.
async fn woken_by_release_through_same_replica(flavor: Flavor) {
    let handoff = handoff_after_release(flavor, 0).await;
    assert!(
        handoff < FALLBACK / 10,
        "{handoff:?}: not woken by the release"
    );
}

/// A release through another replica wakes it through the masters' pub/sub.
async fn woken_by_release_through_other_replica(flavor: Flavor) {
    let handoff = handoff_after_release(flavor, 1).await;
    assert!(
        handoff < FALLBACK / 10,
        "{handoff:?}: not woken by the release notice"
    );
}

/// A lock that is never released: the waiter gets it shortly after its
/// expiry, and not before the holder's validity ended.
async fn woken_at_expiry(flavor: Flavor) {
    let h = Harness::start_with(flavor, slow_fallback).await;
    let mut holder = h.client().await;
    let held = acquire(&mut holder, "left-behind", 500, 0)
        .await
        .expect("granted");
    let answered = Instant::now();
    let held_until = answered + std_duration(held.validity);
    // The keys were set before the answer, so they expired by then.
    let expires_by = answered + Duration::from_millis(500);
    let mut waiter = h.client().await;
    let lock = acquire(&mut waiter, "left-behind", 1_000, 10_000)
        .await
        .expect("granted after expiry");
    let granted = Instant::now();
    assert!(
        granted >= held_until,
        "granted while the holder's validity lasted"
    );
    let lag = granted.saturating_duration_since(expires_by);
    println!("{flavor}: granted {lag:?} after the holder's keys expired");
    assert!(lag < FALLBACK / 10, "{lag:?}: not woken at the expiry");
    assert!(lock.fence > held.fence);
}

/// Waiters on one replica get the lock in the order they arrived.
async fn first_come_first_served(flavor: Flavor) {
    let h = Harness::start_with(flavor, slow_fallback).await;
    let engine = build_engine(&h.config()).await.expect("engine");
    let redlock = engine.redlock.clone();
    let ttl = Duration::from_secs(30);
    let held = redlock
        .acquire("queue", ttl, Duration::ZERO)
        .await
        .expect("granted");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for id in 0..8 {
        let (engine, order) = (redlock.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let lock = engine
                .acquire("queue", ttl, Duration::from_secs(25))
                .await
                .expect("each waiter gets its turn");
            order.lock().expect("order").push(id);
            engine.release("queue", &lock.token).await.expect("release");
        }));
        eventually(Duration::from_secs(5), "the waiter is queued", || {
            let redlock = redlock.clone();
            async move { redlock.waiting() == id + 1 }
        })
        .await;
    }
    assert!(redlock
        .release("queue", &held.token)
        .await
        .expect("release"));
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("bounded")
            .expect("waiter");
    }
    assert_eq!(*order.lock().expect("order"), (0..8).collect::<Vec<_>>());
    engine.close().await;
}

fn tight_limits(config: &mut Config) {
    config.limits.max_waiters_per_resource = 1;
    config.limits.max_waiters = 2;
}

/// Past `max_waiters_per_resource` or `max_waiters`: RESOURCE_EXHAUSTED at once.
async fn waiter_limits(flavor: Flavor) {
    let h = Harness::start_with(flavor, tight_limits).await;
    let mut c = h.client().await;
    let a = acquire(&mut c, "a", 30_000, 0).await.expect("granted");
    let b = acquire(&mut c, "b", 30_000, 0).await.expect("granted");
    let _c2 = acquire(&mut c, "c", 30_000, 0).await.expect("granted");
    let mut waiting = Vec::new();
    for resource in ["a", "b"] {
        let mut client = h.client().await;
        waiting.push(tokio::spawn(async move {
            acquire(&mut client, resource, 1_000, 20_000).await
        }));
    }
    eventually(
        Duration::from_secs(5),
        "both waiters are queued",
        || async { h.lock_commands(0).await >= 3 * 2 + 2 * 2 },
    )
    .await;
    let status = acquire(&mut c, "a", 1_000, 5_000)
        .await
        .expect_err("queue of a is full");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("max_waiters_per_resource"),
        "{status:?}"
    );
    let status = acquire(&mut c, "c", 1_000, 5_000)
        .await
        .expect_err("daemon is full");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("max_waiters"), "{status:?}");
    // Trying once never queues, so it is not limited.
    let status = acquire(&mut c, "c", 1_000, 0).await.expect_err("held");
    assert_eq!(status.code(), Code::Aborted);
    release(&mut c, &a).await.expect("release");
    release(&mut c, &b).await.expect("release");
    for waiter in waiting {
        waiter
            .await
            .expect("task")
            .expect("the queued waiters get their locks");
    }
}
