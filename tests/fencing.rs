//! Fences strictly increase over 1,000 successive grants of one resource
//! spread over two daemon instances, and under contention across two
//! daemons; a grant takes one master round trip in the common case, and
//! the fence commit round when a master's counter is above the proposal
//! (issue 16, `crates/redlockd/src/redlock/fence.rs`).

mod common;

use common::*;
use redlockd::server::build_engine;
use redlockd_testkit::masters::Flavor;
use std::sync::{Arc, Mutex};
use std::time::Duration;

against_both_servers!(fences_increase_across_daemons);
against_both_servers!(common_grant_takes_one_round);
against_both_servers!(counter_above_the_proposal_takes_the_commit_round);
against_both_servers!(fences_increase_under_contention_across_daemons);

const TTL: Duration = Duration::from_secs(10);

/// Batch scripts (EVALSHA and EVAL) each master has run so far, from
/// `INFO commandstats`: one per master per round. (`DELIFEQ` called from a
/// script counts apart, so `Harness::lock_commands` would count it too.)
async fn commands(h: &Harness) -> Vec<u64> {
    let mut counts = Vec::new();
    for i in 0..5 {
        let info = h.raw(i, "INFO", vec!["commandstats".into()]).await;
        let text = info.as_string().unwrap_or_default();
        let calls = text
            .lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .filter_map(|l| {
                l.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum();
        counts.push(calls);
    }
    counts
}

/// Once the engine has seen the masters' clock (its first grant), no grant
/// takes the fence commit round: one round per grant, and each master runs
/// at most two batch scripts per acquire + release cycle (fewer when a
/// release and the next acquire share a batch).
async fn common_grant_takes_one_round(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let engine = build_engine(&h.config()).await.expect("engine");
    let redlock = &engine.redlock;
    let warm = redlock
        .acquire("one-round/warm", TTL, Duration::ZERO)
        .await
        .expect("free");
    assert!(redlock
        .release("one-round/warm", &warm.token)
        .await
        .expect("release"));
    assert_eq!(
        redlock.fence_commit_rounds(),
        1,
        "the first grant has no clock yet"
    );
    let before = commands(&h).await;
    let mut last = warm.fence;
    for i in 0..20 {
        let resource = format!("one-round/{i}");
        let lock = redlock
            .acquire(&resource, TTL, Duration::ZERO)
            .await
            .expect("free");
        assert!(lock.fence > last, "fence {} after {last}", lock.fence);
        last = lock.fence;
        assert!(redlock
            .release(&resource, &lock.token)
            .await
            .expect("release"));
    }
    assert_eq!(
        redlock.fence_commit_rounds(),
        1,
        "no grant after the first committed"
    );
    let after = commands(&h).await;
    for (i, (a, b)) in after.iter().zip(before).enumerate() {
        assert!(
            a - b <= 40,
            "master {i}: {} batch scripts for 20 cycles",
            a - b
        );
    }
    engine.close().await;
}

/// Three masters (so every quorum has one) hold a fence counter far above
/// any proposal: each grant falls back to the commit round, and its fence
/// is one above that counter, then above the last; Extend reports it.
async fn counter_above_the_proposal_takes_the_commit_round(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let engine = build_engine(&h.config()).await.expect("engine");
    let redlock = &engine.redlock;
    let warm = redlock
        .acquire("fallback/warm", TTL, Duration::ZERO)
        .await
        .expect("free");
    assert!(redlock
        .release("fallback/warm", &warm.token)
        .await
        .expect("release"));
    let ahead: u64 = 1 << 52;
    for i in 0..3 {
        let field = vec![
            "redlock:fence:fallback".into(),
            "max".into(),
            ahead.to_string().into(),
        ];
        h.raw(i, "HSET", field).await;
    }
    let rounds = redlock.fence_commit_rounds();
    let mut last = ahead;
    for _ in 0..5 {
        let lock = redlock
            .acquire("fallback", TTL, Duration::ZERO)
            .await
            .expect("free");
        assert!(lock.fence > last, "fence {} not above {last}", lock.fence);
        last = lock.fence;
        let extended = redlock
            .extend("fallback", &lock.token, TTL)
            .await
            .expect("held");
        assert_eq!(extended.fence, lock.fence);
        assert!(redlock
            .release("fallback", &lock.token)
            .await
            .expect("release"));
    }
    assert_eq!(last, ahead + 5, "each fallback fence is max + 1");
    assert_eq!(
        redlock.fence_commit_rounds(),
        rounds + 5,
        "every grant committed"
    );
    engine.close().await;
}

/// Eight contenders, four on each of two daemons, wait for one resource
/// and pass it around 200 times; each records its fence while it holds the
/// lock, so the records are in grant order: they strictly increase.
async fn fences_increase_under_contention_across_daemons(flavor: Flavor) {
    const GRANTS: usize = 200;
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..8 {
        let mut client = h.client_of(c % 2).await;
        let fences = Arc::clone(&fences);
        tasks.push(tokio::spawn(async move {
            loop {
                let lock = acquire(&mut client, "contended", 10_000, 30_000)
                    .await
                    .expect("granted within the wait");
                let done = {
                    let mut fences = fences.lock().expect("fences");
                    fences.push(lock.fence);
                    fences.len() >= GRANTS
                };
                assert!(release(&mut client, &lock).await.expect("release"));
                if done {
                    return;
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("contender");
    }
    let fences = fences.lock().expect("fences").clone();
    assert!(fences.len() >= GRANTS);
    for pair in fences.windows(2) {
        assert!(pair[1] > pair[0], "fence {} after {}", pair[1], pair[0]);
    }
}

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
