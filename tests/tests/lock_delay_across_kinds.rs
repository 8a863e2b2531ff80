//! A `lock_delay` keeps the resource from every kind of lock, not only
//! from its own: a plain holder's delay keeps out a semaphore's permits,
//! and a permit holder's delay keeps out a plain lock, readers, a lock
//! on several resources and a semaphore of another limit, as the
//! API promises ("nobody acquires the resource until lock_delay after the
//! expiry"). Before, each kind read only its own record (a plain lock the
//! resource's fence hash, a permit its own), and a permit was granted at
//! once on a resource whose plain holder had just vanished.
//!
//! Five real masters, one daemon. The delays (30 s) are far longer than
//! any test step, and no assertion is on time: the lock's expiry is
//! polled on the masters.

mod common;

use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;
use tonic::Code;

against_both_servers!(
    a_permit_waits_out_a_plain_holders_lock_delay,
    other_kinds_wait_out_a_permit_holders_lock_delay,
);

const DELAY_MS: u64 = 30_000;

async fn harness(flavor: Flavor) -> Harness {
    Harness::start_with(flavor, |c| {
        c.redlock.max_lock_delay = Duration::from_millis(DELAY_MS);
    })
    .await
}

/// A grant of `resource` whose holder then vanishes: ttl 300 ms and a
/// 30 s lock_delay, not released, returned once its keys expired.
async fn vanished(h: &Harness, c: &mut LockClient, resource: &str, limit: u32) {
    c.acquire(pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(300),
        lock_delay: ms(DELAY_MS),
        limit,
        ..Default::default()
    })
    .await
    .expect("the first grant")
    .into_inner()
    .lock
    .expect("a grant carries the lock");
    // Gone from every master, not only past its validity (which ends a
    // drift margin before the masters' keys do).
    let pattern = format!("redlock:lock:{resource}*");
    eventually(Duration::from_secs(10), "the lock expired", || async {
        h.keys(&pattern).await.is_empty()
    })
    .await;
}

/// An attempt without waiting, refused for the delay.
async fn kept_by_the_delay(c: &mut LockClient, request: pb::AcquireRequest, what: &str) {
    let status = c
        .acquire(request)
        .await
        .expect_err(&format!("{what} inside another kind's lock_delay"));
    assert_eq!(status.code(), Code::Aborted, "{what}: {status:?}");
    assert!(
        status.message().contains("lock_delay"),
        "{what}: refused for the delay, not for a holder: {status:?}"
    );
}

async fn a_permit_waits_out_a_plain_holders_lock_delay(flavor: Flavor) {
    let h = harness(flavor).await;
    let mut c = h.client_of(0).await;
    vanished(&h, &mut c, "delay/plain", 0).await;
    let permit = pb::AcquireRequest {
        resource: "delay/plain".into(),
        ttl: ms(10_000),
        limit: 2,
        ..Default::default()
    };
    kept_by_the_delay(&mut c, permit, "a permit").await;
}

async fn other_kinds_wait_out_a_permit_holders_lock_delay(flavor: Flavor) {
    let h = harness(flavor).await;
    let mut c = h.client_of(0).await;
    vanished(&h, &mut c, "delay/permit", 2).await;
    let plain = pb::AcquireRequest {
        resource: "delay/permit".into(),
        ttl: ms(10_000),
        ..Default::default()
    };
    kept_by_the_delay(&mut c, plain, "a plain lock").await;
    let reader = pb::AcquireRequest {
        resource: "delay/permit".into(),
        ttl: ms(10_000),
        mode: pb::LockMode::Shared as i32,
        ..Default::default()
    };
    kept_by_the_delay(&mut c, reader, "a reader").await;
    let several = pb::AcquireRequest {
        resources: vec!["delay/permit".into(), "delay/other".into()],
        ttl: ms(10_000),
        ..Default::default()
    };
    kept_by_the_delay(&mut c, several, "a lock on several resources").await;
    // A semaphore of another limit is another kind: its permits, whatever
    // their index, wait out the delay too.
    let other_limit = pb::AcquireRequest {
        resource: "delay/permit".into(),
        ttl: ms(10_000),
        limit: 3,
        ..Default::default()
    };
    kept_by_the_delay(&mut c, other_limit, "a permit of another limit").await;
}
