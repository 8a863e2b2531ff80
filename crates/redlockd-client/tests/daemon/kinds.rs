//! The kinds: a semaphore's permits (`limit`), shared (read) locks, and a
//! lock on several resources at once.

use crate::start;
use redlockd_client::Error;
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);

/// A semaphore of 2 grants two permits (0 and 1, their own tokens), refuses
/// a third and a plain lock (held under another limit), and grants a
/// waiting third when a permit is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_permits() {
    let (_h, c) = start().await;
    let a = c.acquire("kinds/sem", TTL).limit(2).await.expect("permit");
    let b = c.acquire("kinds/sem", TTL).limit(2).await.expect("permit");
    let mut permits = [a.permit(), b.permit()];
    permits.sort_unstable();
    assert_eq!(permits, [0, 1]);
    assert_ne!(a.token(), b.token());
    let third = c
        .acquire("kinds/sem", TTL)
        .limit(2)
        .await
        .expect_err("full");
    assert!(matches!(third, Error::Held(_)), "{third}");
    let plain = c.acquire("kinds/sem", TTL).await.expect_err("other limit");
    assert!(matches!(plain, Error::NotHeld(_)), "{plain}");
    assert!(c.validate(&a).await.expect("validate").held);
    let waiter = tokio::spawn({
        let c = c.clone();
        async move {
            c.acquire("kinds/sem", TTL)
                .limit(2)
                .wait(Duration::from_secs(20))
                .await
        }
    });
    assert!(c.release(&a).await.expect("release"));
    let third = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("granted after the release")
        .expect("task")
        .expect("permit");
    assert_eq!(third.permit(), a.permit());
    assert!(third.fence() > a.fence());
    c.release(&b).await.expect("release");
    c.release(&third).await.expect("release");
}

/// Shared grants coexist (tokens start with `s`); an exclusive acquire is
/// refused while they hold, and granted after, with a greater fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_locks_coexist() {
    let (_h, c) = start().await;
    let r1 = c.acquire("kinds/rw", TTL).shared().await.expect("shared");
    let r2 = c.acquire("kinds/rw", TTL).shared().await.expect("shared");
    assert!(r1.token().starts_with('s') && r2.token().starts_with('s'));
    let writer = c.acquire("kinds/rw", TTL).await.expect_err("readers hold");
    assert!(matches!(writer, Error::Held(_)), "{writer}");
    assert!(c.validate(&r2).await.expect("validate").held);
    assert!(c.release(&r1).await.expect("release"));
    assert!(c.release(&r2).await.expect("release"));
    let writer = c.acquire("kinds/rw", TTL).await.expect("free");
    assert!(writer.fence() > r1.fence().max(r2.fence()));
    c.release(&writer).await.expect("release");
}

/// Several resources at once: one token, a fence per resource in the order
/// asked; each resource is held (refused alone); extend, validate and
/// release through the lock act on all of them; a name twice is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_resources() {
    let (_h, c) = start().await;
    let lock = c
        .acquire("kinds/acct-1", TTL)
        .resources(["kinds/acct-2", "kinds/acct-3"])
        .await
        .expect("all three");
    let names: Vec<_> = lock
        .resources()
        .iter()
        .map(|r| r.resource.as_str())
        .collect();
    assert_eq!(names, ["kinds/acct-1", "kinds/acct-2", "kinds/acct-3"]);
    assert!(lock.resources().iter().all(|r| r.fence > 0));
    assert_eq!(lock.resource(), "kinds/acct-1");
    assert_eq!(lock.fence(), lock.resources()[0].fence);
    let alone = c.acquire("kinds/acct-3", TTL).await.expect_err("held");
    assert!(matches!(alone, Error::Held(_)), "{alone}");
    let extended = c.extend(&lock, TTL).await.expect("extend");
    assert_eq!(extended.token(), lock.token());
    assert!(c.validate(&extended).await.expect("validate").held);
    assert!(c.release(&extended).await.expect("release"));
    let alone = c.acquire("kinds/acct-3", TTL).await.expect("free");
    c.release(&alone).await.expect("release");
    let twice = c
        .acquire("kinds/x", TTL)
        .resources(["kinds/x"])
        .await
        .expect_err("named twice");
    assert_eq!(twice.field(), Some("resources"), "{twice}");
}
