//! Against real masters: a Release right after an Extend
//! must not be overtaken by the Extend's background re-creation of a key a
//! master had lost. Master 2 has lost the key (as after a restart without
//! data), master 3 hangs (SIGSTOP); the client extends, then releases. The
//! release answers `was_held = true`, and the released token must not come
//! back on master 2.

mod common;

use common::*;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_release_is_not_overtaken_by_recreation() {
    let h = Harness::start(Flavor::Valkey).await;
    let mut c = h.client().await;
    let lock = acquire(&mut c, "raced", 60_000, 0).await.expect("granted");
    // The grant stands on a quorum when answered; the last masters follow.
    h.held_everywhere("raced", &lock.token).await;
    h.raw(2, "DEL", vec!["redlock:lock:raced".into()]).await;
    let paused = h.pause_masters(&[3]);
    {
        extend(&mut c, &lock, 60_000)
            .await
            .expect("extended on a majority");
        let was_held = release(&mut c, &lock).await.expect("a majority answered");
        assert!(was_held, "it was held until the release");
        // The re-creation would write within node_timeout (50 ms) of the
        // Extend plus one command; watch master 2 for 40 times that.
        let until = Instant::now() + NODE_TIMEOUT * 40;
        while Instant::now() < until {
            assert_eq!(
                h.lock_value(2, "raced").await,
                None,
                "the released lock came back on master 2"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    drop(paused);
    eventually(
        Duration::from_secs(10),
        "nothing left on any master",
        || async { h.holders("raced", &lock.token).await == 0 },
    )
    .await;
}
