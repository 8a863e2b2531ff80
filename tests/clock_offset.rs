//! Masters' clock offsets are checked (issue 22 item 6): a daemon whose
//! `redlock.max_clock_offset` no real master can meet (1 µs: the round
//! trip alone exceeds it) trusts none of them, though they are connected
//! and verified; at the default (1 s) the same masters count. The
//! arithmetic is unit-tested in `crates/redlockd/src/node/offset.rs`.

mod common;

use common::*;
use redlockd::redlock::Node;
use redlockd::server::build_engine;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;

against_both_servers!(masters_beyond_the_clock_bound_do_not_count);

async fn masters_beyond_the_clock_bound_do_not_count(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut strict = h.config();
    strict.redlock.max_clock_offset = Duration::from_micros(1);
    let strict = build_engine(&strict).await.expect("engine");
    eventually(
        Duration::from_secs(5),
        "every master connected and verified, none trusted",
        || async {
            strict
                .nodes
                .iter()
                .all(|n| n.state().verified() && !n.trusted())
        },
    )
    .await;
    let refused = strict
        .redlock
        .acquire("clock", Duration::from_secs(1), Duration::ZERO)
        .await;
    assert!(refused.is_err(), "granted by masters that do not count");

    let default = build_engine(&h.config()).await.expect("engine");
    assert_eq!(h.config().redlock.max_clock_offset, Duration::from_secs(1));
    eventually(Duration::from_secs(5), "every master trusted", || async {
        default.nodes.iter().all(|n| n.trusted())
    })
    .await;
    default
        .redlock
        .acquire("clock", Duration::from_secs(1), Duration::ZERO)
        .await
        .expect("granted within the default bound");
    strict.close().await;
    default.close().await;
}
