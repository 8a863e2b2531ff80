//! Masters' clock offsets are checked: a daemon whose
//! `redlock.max_clock_offset` no real master can meet (1 µs: the round
//! trip alone exceeds it) trusts none of them, though they are connected
//! and verified; at the default (1 s) the same masters count. The
//! arithmetic is unit-tested in `crates/redlockd/src/valkey/offset.rs`.
//!
//! Clock *jumps* quarantine a master (`crates/redlockd/src/valkey/clock_jump.rs`),
//! so a clock reading slowed by load must not look like one: every master
//! slow for a while (a burst, a loaded network), then brisk again, is
//! still trusted, and a lock held meanwhile is still held.

mod common;

use common::*;
use redlockd::redlock::Master;
use redlockd::server::build_engine;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};

against_both_servers!(
    masters_beyond_the_clock_bound_do_not_count,
    slow_clock_readings_are_not_clock_jumps,
);

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

/// Every master answers 250 ms late each way for 6 s, which covers at least
/// one of the watcher's clock readings (every 5 s), then at once again; the
/// daemon watches for 11 s more, so a brisk reading follows a slow one. The
/// slow reading's master clock was read 250 ms after it was asked: counting
/// only the brisk reading's round trip, its master's clock "moved 250 ms
/// less than ours", a jump, and every master was quarantined for the held
/// lock's remaining 60 s. `node_timeout` is 1 s, so the slow readings are
/// conclusive and compared, not skipped.
async fn slow_clock_readings_are_not_clock_jumps(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut config = h.config();
    config.redlock.node_timeout = Duration::from_secs(1);
    let mut proxies = Vec::new();
    for i in 0..5 {
        let master = std::net::SocketAddr::from(([127, 0, 0, 1], h.masters.port(i)));
        let proxy = common::proxy::Proxy::start(master).await.expect("proxy");
        config.redlock.nodes[i] = format!("redis://{}", proxy.addr());
        proxies.push(proxy);
    }
    let engine = build_engine(&config).await.expect("engine");
    eventually(Duration::from_secs(5), "every master trusted", || async {
        engine.nodes.iter().all(|n| n.trusted())
    })
    .await;
    let lock = engine
        .redlock
        .acquire("steady", Duration::from_secs(60), Duration::ZERO)
        .await
        .expect("granted");

    let watch = |until: Instant| {
        let engine = &engine;
        async move {
            while Instant::now() < until {
                let refused: Vec<String> = engine
                    .nodes
                    .iter()
                    .filter(|n| !n.trusted())
                    .map(|n| n.name().to_owned())
                    .collect();
                assert!(
                    refused.is_empty(),
                    "masters no longer trusted: {refused:?} (a slow reading taken for a jump?)"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    for proxy in &proxies {
        proxy.set(common::proxy::Mode::Slow(Duration::from_millis(250)));
    }
    watch(Instant::now() + Duration::from_secs(6)).await;
    for proxy in &proxies {
        proxy.set(common::proxy::Mode::Pass);
    }
    watch(Instant::now() + Duration::from_secs(11)).await;
    let held = engine
        .redlock
        .validate("steady", &lock.token)
        .await
        .expect("validate");
    assert!(
        held.is_some(),
        "the lock held through the slow spell is lost"
    );
    engine.close().await;
}
