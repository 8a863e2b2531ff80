//! Wake-on-release across replicas for the semaphore, shared and
//! multi-resource kinds (releases publish only where a waiter marker is). A waiter on replica 0
//! for a semaphore's permit, a shared grant or several resources is refused
//! while replica 1's client holds; its refused attempt must set the waiter
//! marker of the resource it waits for, so that the release through
//! replica 1 publishes a notice and wakes it. `wait_fallback` is 30 s: a
//! waiter left to its fallback would take that long, so the bound below
//! (half of it, generous for a loaded host) shows the notice woke it.
//!
//! No assertion on time but that bound: waits are bounded and polled.

mod common;

use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};

against_both_servers!(
    a_released_permit_wakes_a_permit_waiter,
    a_released_writer_wakes_a_shared_waiter,
    a_release_wakes_a_multi_resource_waiter,
);

const FALLBACK: Duration = Duration::from_secs(30);

async fn two_replicas(flavor: Flavor) -> Harness {
    let mut h = Harness::start_with(flavor, |config| {
        config.redlock.wait_fallback = FALLBACK;
    })
    .await;
    h.start_daemon().await;
    h
}

fn request(resource: &str, ttl_ms: u64, wait_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(ttl_ms),
        wait: ms(wait_ms),
        owner: "waiting-kinds-test".into(),
        ..Default::default()
    }
}

async fn grant(client: &mut LockClient, request: pb::AcquireRequest) -> pb::Lock {
    client
        .acquire(request)
        .await
        .expect("granted")
        .into_inner()
        .lock
        .expect("a grant carries the lock")
}

/// Waits until some master holds `resource`'s waiter marker (the field
/// `wm` of the resource's own fence hash): the waiter's refused attempt
/// set it.
async fn marker_set(h: &Harness, resource: &str) {
    let fence = format!("redlock:fence:{resource}");
    eventually(Duration::from_secs(20), "the waiter marker", || async {
        for i in 0..5 {
            if h.raw(i, "HEXISTS", vec![fence.as_str().into(), "wm".into()])
                .await
                .as_u64()
                == Some(1)
            {
                return true;
            }
        }
        false
    })
    .await;
}

/// Releases `held` through `holder` once the waiter's marker is set, and
/// checks that the waiter is granted well before its fallback retry; the
/// waiter's lock.
async fn release_and_wake(
    h: &Harness,
    marker_of: &str,
    holder: &mut LockClient,
    held: &pb::Lock,
    waiter: tokio::task::JoinHandle<Result<tonic::Response<pb::AcquireResponse>, tonic::Status>>,
) -> pb::Lock {
    marker_set(h, marker_of).await;
    let released = Instant::now();
    assert!(release(holder, held).await.expect("release"));
    let answer = tokio::time::timeout(Duration::from_secs(50), waiter)
        .await
        .expect("the waiter answers within its wait")
        .expect("waiter task")
        .expect("the waiter is granted");
    let after = released.elapsed();
    assert!(
        after < FALLBACK / 2,
        "granted {after:?} after the release: not woken by its notice"
    );
    answer.into_inner().lock.expect("lock")
}

/// Limit 2, both permits held through replica 1: a permit waiter on
/// replica 0 is woken when one of them is released.
async fn a_released_permit_wakes_a_permit_waiter(flavor: Flavor) {
    let h = two_replicas(flavor).await;
    let (mut c0, mut c1) = (h.client_of(0).await, h.client_of(1).await);
    let permit = |wait_ms| pb::AcquireRequest {
        limit: 2,
        ..request("sem/wake", 60_000, wait_ms)
    };
    let first = grant(&mut c1, permit(0)).await;
    let _second = grant(&mut c1, permit(0)).await;
    let waiter = tokio::spawn(async move { c0.acquire(permit(45_000)).await });
    let lock = release_and_wake(&h, "sem/wake", &mut c1, &first, waiter).await;
    assert_eq!(lock.resource, "sem/wake");
}

/// An exclusive lock held through replica 1: a shared waiter on replica 0
/// is woken by its release.
async fn a_released_writer_wakes_a_shared_waiter(flavor: Flavor) {
    let h = two_replicas(flavor).await;
    let (mut c0, mut c1) = (h.client_of(0).await, h.client_of(1).await);
    let held = grant(&mut c1, request("rw/wake", 60_000, 0)).await;
    let waiter = tokio::spawn(async move {
        c0.acquire(pb::AcquireRequest {
            mode: pb::LockMode::Shared.into(),
            ..request("rw/wake", 60_000, 45_000)
        })
        .await
    });
    let lock = release_and_wake(&h, "rw/wake", &mut c1, &held, waiter).await;
    assert!(lock.fence > held.fence);
}

/// One of two resources held through replica 1: a waiter for both on
/// replica 0 is woken by its release.
async fn a_release_wakes_a_multi_resource_waiter(flavor: Flavor) {
    let h = two_replicas(flavor).await;
    let (mut c0, mut c1) = (h.client_of(0).await, h.client_of(1).await);
    let held = grant(&mut c1, request("multi/b", 60_000, 0)).await;
    let waiter = tokio::spawn(async move {
        c0.acquire(pb::AcquireRequest {
            resource: String::new(),
            resources: vec!["multi/a".into(), "multi/b".into()],
            ..request("", 60_000, 45_000)
        })
        .await
    });
    let lock = release_and_wake(&h, "multi/b", &mut c1, &held, waiter).await;
    assert_eq!(lock.resources.len(), 2);
}
