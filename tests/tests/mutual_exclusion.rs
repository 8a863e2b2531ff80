//! 32 contenders on one resource, through two daemons over the same five
//! masters: never two holders at once, and fences increase with every grant.

mod common;

use common::*;
use redlockd_testkit::masters::Flavor;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

against_both_servers!(never_two_holders);

const CONTENDERS: usize = 32;
const GRANTS_EACH: usize = 3;

/// Every grant is checked against a shared record of the current holder.
async fn never_two_holders(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let holder = Arc::new(AtomicUsize::new(0)); // 0: free, else contender id
    let last_fence = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for id in 1..=CONTENDERS {
        let mut client = h.client_of(id % 2).await;
        let (holder, last_fence) = (holder.clone(), last_fence.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..GRANTS_EACH {
                let lock = acquire(&mut client, "contended", 10_000, 60_000)
                    .await
                    .expect("granted within the wait");
                let previous = holder.swap(id, Ordering::SeqCst);
                assert_eq!(
                    previous, 0,
                    "contender {id} granted while {previous} holds the lock"
                );
                let fence = last_fence.swap(lock.fence, Ordering::SeqCst);
                assert!(lock.fence > fence, "fence {} after {fence}", lock.fence);
                tokio::task::yield_now().await;
                assert_eq!(holder.swap(0, Ordering::SeqCst), id);
                assert!(
                    release(&mut client, &lock).await.expect("release"),
                    "was held"
                );
            }
        }));
    }
    let results = tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(tasks))
        .await
        .expect("all contenders finish in bounded time");
    for result in results {
        result.expect("contender task");
    }
}
