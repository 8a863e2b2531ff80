//! The acquire script reads before it writes: when its
//! read of the fence hash raises (a fence key of another type, WRONGTYPE),
//! the lock key was not set. Checked on each real master's reply itself,
//! before any cleanup release could hide a partial write.

mod common;

use common::*;
use redlockd::redlock::{Holder, LockKeys, Master, NodeError, Proposal, Token};
use redlockd::server::build_engine;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;

against_both_servers!(acquire_that_raises_leaves_no_lock);

/// Every master holds a string where the fence hash of `wrongtype` goes:
/// each master's acquire answers an error, and no master holds the lock
/// key afterwards. A well-typed resource is still granted.
async fn acquire_that_raises_leaves_no_lock(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let engine = build_engine(&h.config()).await.expect("engine");
    let keys = LockKeys::new("redlock:", "wrongtype");
    for i in 0..5 {
        h.raw(
            i,
            "SET",
            vec![keys.fence.clone().into(), "not a hash".into()],
        )
        .await;
    }
    let token = Token::generate().expect("token");
    for (i, node) in engine.nodes.iter().enumerate() {
        let vote = node
            .acquire(
                &keys,
                &token,
                Duration::from_secs(30),
                Proposal::NONE,
                Duration::ZERO,
                &Holder::default(),
            )
            .await;
        assert!(
            matches!(&vote, Err(NodeError::Server(message)) if message.contains("WRONGTYPE")),
            "master {i}: {vote:?}"
        );
        assert!(
            h.lock_value(i, "wrongtype").await.is_none(),
            "master {i}: the SET landed before the read raised"
        );
    }
    let fine = LockKeys::new("redlock:", "fine");
    let vote = engine.nodes[0]
        .acquire(
            &fine,
            &token,
            Duration::from_secs(1),
            Proposal::NONE,
            Duration::ZERO,
            &Holder::default(),
        )
        .await;
    assert!(
        matches!(vote, Ok(redlockd::redlock::AcquireVote::Granted(_))),
        "{vote:?}"
    );
    engine.close().await;
}
