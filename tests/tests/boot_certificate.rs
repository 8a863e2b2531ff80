//! The boot certificate (`crates/redlockd/src/valkey/boot.rs`) against real
//! masters, at the default quarantine and `max_ttl` (1 h): a daemon that
//! joins while a lock is held trusts the young masters at once, since a
//! daemon already waited out their start; a master restarted empty, even
//! one that comes back holding the old certificate (as from an AOF, or a
//! promoted replica with a copied key), is still quarantined for the
//! horizon of the lock.

mod common;

use common::*;
use redlockd::config::{Config, RestartQuarantine};
use redlockd::redlock::Master;
use redlockd::server::{build_engine, Engine};
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};

against_both_servers!(newcomer_trusts_certified_masters_but_not_a_restarted_one);

/// The held lock's ttl: long enough that a newcomer sitting the masters
/// out for it (the behaviour without certificates) cannot pass.
const TTL: Duration = Duration::from_secs(20);

fn default_quarantine(config: &mut Config) {
    config.redlock.quarantine = RestartQuarantine::default();
    assert_eq!(config.redlock.quarantine, RestartQuarantine::Horizon);
    assert_eq!(config.redlock.max_ttl, Duration::from_secs(3600));
}

/// Master `i`'s `run_id`, from `INFO server`.
async fn run_id(h: &Harness, i: usize) -> String {
    let info = h.raw(i, "INFO", vec!["server".into()]).await;
    let text = info.as_string().expect("INFO text");
    text.lines()
        .find_map(|line| line.trim().strip_prefix("run_id:"))
        .expect("run_id in INFO")
        .to_owned()
}

/// Master `i`'s boot certificate (empty: none).
async fn certificate(h: &Harness, i: usize) -> String {
    h.raw(i, "GET", vec!["redlock:boot".into()])
        .await
        .as_string()
        .unwrap_or_default()
}

/// How long until every master of `engine` counts (fails after `limit`).
async fn all_trusted(engine: &Engine, limit: Duration, what: &str) -> Duration {
    let started = Instant::now();
    eventually(limit, what, || async {
        engine.nodes.iter().all(|n| n.trusted())
    })
    .await;
    started.elapsed()
}

/// A lock (ttl 20 s) is held on five young masters. Their certificates
/// are written by the daemon that trusted them; a newcomer then trusts all
/// five at once and grants. Master 2 is restarted empty and given back
/// the old certificate (what an AOF or a copied replica would bring): a
/// newcomer quarantines it for the lock's horizon, not longer than the
/// ttl, and not for max_ttl.
async fn newcomer_trusts_certified_masters_but_not_a_restarted_one(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, default_quarantine).await;
    let config = h.config();
    let first = build_engine(&config).await.expect("engine");
    all_trusted(&first, Duration::from_secs(5), "a fresh cluster counts").await;
    let held = first
        .redlock
        .acquire("held", TTL, Duration::ZERO)
        .await
        .expect("granted");
    let held_until = Instant::now() + held.validity;
    // The grant is answered on a quorum; the last masters follow.
    h.held_everywhere("held", held.token.expose()).await;
    for i in 0..5 {
        let pttl = h.raw(i, "PTTL", vec!["redlock:horizon".into()]).await;
        assert!(
            pttl.as_i64().unwrap_or(0) > 10_000,
            "master {i}: horizon {pttl:?}"
        );
    }
    let mut run_ids = Vec::new();
    for i in 0..5 {
        run_ids.push(run_id(&h, i).await);
    }
    eventually(Duration::from_secs(5), "every master certified", || async {
        let mut all = true;
        for (i, expected) in run_ids.iter().enumerate() {
            all &= certificate(&h, i).await == *expected;
        }
        all
    })
    .await;

    // A newcomer: young masters holding a 20 s horizon, certified.
    let started = Instant::now();
    let newcomer = build_engine(&config).await.expect("engine");
    let trusted = all_trusted(
        &newcomer,
        Duration::from_secs(3),
        "the newcomer trusts certified masters at once",
    )
    .await;
    for node in &newcomer.nodes {
        assert!(!node.state().quarantined(), "{}: quarantined", node.name());
    }
    newcomer
        .redlock
        .acquire("other", Duration::from_secs(1), Duration::ZERO)
        .await
        .expect("the newcomer grants at once");
    let newcomer_serves = started.elapsed();

    // Master 2 restarted empty, then handed its old certificate.
    h.masters.restart(2).expect("restart master 2 without data");
    let restarted = Instant::now();
    assert_eq!(h.lock_value(2, "held").await, None, "the key is lost");
    let stale = run_ids[2].clone();
    h.raw(2, "SET", vec!["redlock:boot".into(), stale.clone().into()])
        .await;
    assert_ne!(run_id(&h, 2).await, stale, "a new process");
    let late = build_engine(&config).await.expect("engine");
    let state = late.nodes[2].state();
    eventually(
        Duration::from_secs(3),
        "master 2's quarantine settled",
        || async { state.unsettled().is_none() && state.quarantined() },
    )
    .await;
    let left = state.quarantine_left();
    let lock_left = held_until.saturating_duration_since(Instant::now());
    // Horizons outlast each lock by the fences' clock allowance.
    let allowance = redlockd::redlock::clock_allowance(
        config.redlock.node_timeout,
        config.redlock.max_clock_offset,
    );
    assert!(
        left >= lock_left && left <= TTL + allowance + Duration::from_millis(500),
        "quarantine {left:?} for a lock with {lock_left:?} left (max_ttl 1 h)"
    );
    for i in [0, 1, 3, 4] {
        assert!(late.nodes[i].trusted(), "master {i}: certified, trusted");
    }
    // The old certificate does not count for the new process; once it is
    // trusted, its own certificate is written.
    assert_eq!(certificate(&h, 2).await, stale);
    println!(
        "{flavor}: newcomer trusted five certified masters (20 s horizon held) in {trusted:?}, \
         granted {newcomer_serves:?} after it started; master 2 restarted with a stale \
         certificate: quarantined {left:?} for a lock with {lock_left:?} left ({:?} after \
         the restart)",
        restarted.elapsed()
    );
    assert!(first.redlock.release("held", &held.token).await.is_ok());
    for engine in [first, newcomer, late] {
        engine.close().await;
    }
}
