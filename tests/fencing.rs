//! Fences strictly increase over 1,000 successive grants of one resource
//! spread over two daemon instances.

mod common;

use common::*;
use redlockd_testkit::masters::Flavor;

against_both_servers!(fences_increase_across_daemons);

const GRANTS: usize = 1_000;

/// Alternating daemons, released or left to expire: always a larger fence.
async fn fences_increase_across_daemons(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let mut clients = [h.client_of(0).await, h.client_of(1).await];
    let mut last = 0;
    for i in 0..GRANTS {
        let client = &mut clients[i % 2];
        let lock = acquire(client, "fenced", 10_000, 0).await.expect("free");
        assert!(
            lock.fence > last,
            "grant {i}: fence {} after {last}",
            lock.fence
        );
        last = lock.fence;
        assert!(release(client, &lock).await.expect("release"));
    }
    // The fence survives the lock keys: after expiry (no release) it grows too.
    let client = &mut clients[0];
    let lock = acquire(client, "fenced", 20, 0).await.expect("free");
    assert!(lock.fence > last);
    last = lock.fence;
    eventually(
        std::time::Duration::from_secs(5),
        "the lock expires",
        || async { h.holders("fenced", &lock.token).await == 0 },
    )
    .await;
    let lock = acquire(&mut clients[1], "fenced", 1_000, 0)
        .await
        .expect("free again");
    assert!(lock.fence > last);
}
