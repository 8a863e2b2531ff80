//! One lock's life against five real masters: grant, validate, extend,
//! expiry, release (right and wrong token, twice).

mod common;

use common::*;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};
use tonic::Code;

against_both_servers!(
    grant_is_on_a_majority_and_validity_is_honest,
    extend_after_expiry_fails,
    wrong_token_and_double_release,
    extend_keeps_fence_and_resets_ttl,
);

/// A grant puts the token on every master; the reported validity never
/// outlives the keys: until `validity` has passed since the request was
/// sent, a majority still holds it.
async fn grant_is_on_a_majority_and_validity_is_honest(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    // Validity counts from the request's send (lock.proto's `validity`):
    // the answer's travel time, milliseconds on a loaded machine, is on
    // the daemon's side of the bound, not the client's.
    let sent = Instant::now();
    let lock = acquire(&mut c, "life", 300, 0)
        .await
        .expect("free resource is granted");
    let validity = std_duration(lock.validity);
    assert!(
        validity > Duration::ZERO && validity < Duration::from_millis(300),
        "{validity:?}"
    );
    assert!(lock.fence > 0);
    assert_eq!(lock.token.len(), 32);
    assert!(h.holders("life", &lock.token).await >= 3);

    let v = validate(&mut c, &lock).await.expect("validate");
    assert!(v.held);
    assert!(
        std_duration(v.validity) < Duration::from_millis(300),
        "{v:?}"
    );

    // Watch the masters until a majority no longer holds the token.
    eventually(Duration::from_secs(5), "the lock expires", || async {
        h.holders("life", &lock.token).await < 3
    })
    .await;
    assert!(
        sent.elapsed() >= validity,
        "lost a majority {:?} after the request was sent, but validity was {validity:?}",
        sent.elapsed()
    );
    let v = validate(&mut c, &lock).await.expect("validate");
    assert!(!v.held && v.validity.is_none());
}

/// Extending an expired lock is FAILED_PRECONDITION; releasing it is not
/// an error but reports it was not held.
async fn extend_after_expiry_fails(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let lock = acquire(&mut c, "expiring", 50, 0).await.expect("granted");
    eventually(Duration::from_secs(5), "the lock expires", || async {
        h.holders("expiring", &lock.token).await == 0
    })
    .await;
    let status = extend(&mut c, &lock, 1_000).await.expect_err("expired");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(!release(&mut c, &lock).await.expect("release"));
    // Nothing was re-created by the failed extend.
    assert!(h.keys("redlock:lock:expiring").await.is_empty());
}

/// A wrong (well-formed) token releases nothing and the holder keeps the
/// lock; a second release by the holder reports was_held = false.
async fn wrong_token_and_double_release(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let lock = acquire(&mut c, "guarded", 10_000, 0)
        .await
        .expect("granted");
    let mut impostor = lock.clone();
    impostor.token = "0123456789abcdef0123456789abcdef".into();
    assert!(!release(&mut c, &impostor).await.expect("release"));
    assert!(!validate(&mut c, &impostor).await.expect("validate").held);
    // Untouched: still on all five masters.
    h.held_everywhere("guarded", &lock.token).await;
    assert!(validate(&mut c, &lock).await.expect("validate").held);
    let status = acquire(&mut c, "guarded", 1_000, 0)
        .await
        .expect_err("still held");
    assert_eq!(status.code(), Code::Aborted, "{status:?}");

    assert!(release(&mut c, &lock).await.expect("release"));
    assert!(!release(&mut c, &lock).await.expect("second release"));
    assert!(h.keys("redlock:lock:guarded").await.is_empty());
    acquire(&mut c, "guarded", 1_000, 0)
        .await
        .expect("free again");
}

/// Extend resets the masters' expiry to the new ttl and keeps the fence.
async fn extend_keeps_fence_and_resets_ttl(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let lock = acquire(&mut c, "long-job", 5_000, 0)
        .await
        .expect("granted");
    let extended = extend(&mut c, &lock, 60_000)
        .await
        .expect("held, so extendable");
    assert_eq!(extended.fence, lock.fence);
    assert_eq!(extended.token, lock.token);
    assert!(std_duration(extended.validity) > Duration::from_secs(50));
    // A majority is extended when Extend answers; the stragglers' commands
    // were sent too and land shortly after.
    let extended_on = || async {
        let mut n = 0;
        for i in 0..5 {
            let pttl = h.raw(i, "PTTL", vec!["redlock:lock:long-job".into()]).await;
            n += usize::from(pttl.as_i64().expect("integer") > 50_000);
        }
        n
    };
    assert!(extended_on().await >= 3);
    eventually(
        Duration::from_secs(2),
        "every master is extended",
        || async { extended_on().await == 5 },
    )
    .await;
}
