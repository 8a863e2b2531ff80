//! Fences strictly increase over 1,000 successive grants of one resource
//! spread over two daemon instances, and under contention across two
//! daemons; a grant takes one master round trip in the common case, and
//! the fence commit round when a master's counter is above the proposal
//! (`crates/redlockd/src/redlock/fence.rs`). A one-round grant
//! records its holder and terms as the commit does: `Inspect` shows its
//! owner, kind and time of grant, and its lock-delay holds the resource
//! after the holder vanished.

mod common;

use common::process::DaemonProcess;
use common::*;
use redlockd::pb;
use redlockd::pb::lock_admin_service_client::LockAdminServiceClient;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd::server::build_engine;
use redlockd_testkit::commandstats;
use redlockd_testkit::masters::Flavor;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tonic::Code;

against_both_servers!(fences_increase_across_daemons);
against_both_servers!(common_grant_takes_one_round);
against_both_servers!(counter_above_the_proposal_takes_the_commit_round);
against_both_servers!(fences_increase_under_contention_across_daemons);
against_both_servers!(one_round_grant_records_holder_and_terms);
against_both_servers!(one_round_grant_clears_earlier_terms);

const TTL: Duration = Duration::from_secs(10);

/// Batch scripts (EVALSHA and EVAL) each master has run so far, from
/// `INFO commandstats`: one per master per round. (`DELIFEQ` called from a
/// script counts apart, so `Harness::lock_commands` would count it too.)
async fn commands(h: &Harness) -> Vec<u64> {
    let mut counts = Vec::new();
    for i in 0..5 {
        let info = h.raw(i, "INFO", vec!["commandstats".into()]).await;
        let text = info.as_string().unwrap_or_default();
        counts.push(commandstats::calls(&text, &["evalsha", "eval"]));
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

/// Generous bound for a daemon to start, a metric to show, keys to expire.
const LIMIT: Duration = Duration::from_secs(10);

/// A daemon process over the harness's masters with its metrics endpoint
/// on (at default settings otherwise), and a client of it.
async fn replica_with_metrics(h: &Harness) -> (DaemonProcess, SocketAddr, LockClient) {
    let (daemon, metrics, channel) = h.metered_daemon().await;
    (daemon, metrics, LockServiceClient::new(channel))
}

/// Grants of the daemon whose metrics listen on `metrics` whose fence the
/// acquire round fixed (`redlock_fence_grants_total{path="one_round"}`).
fn one_round_grants(metrics: SocketAddr) -> f64 {
    redlockd_testkit::metrics::counter(metrics, "redlock_fence_grants_total", r#"path="one_round""#)
}

/// A unary grant with an owner and a lock-delay, granted in one round (the
/// daemon's metric says so): `Inspect` through the other replica shows its
/// owner, kind, fence and time of grant, the masters' fence hashes hold the
/// same record as a commit writes, and once the holder vanishes (no
/// release) neither replica grants the resource before ttl + lock_delay;
/// a waiter gets it after that (lower bound from the grant's request).
async fn one_round_grant_records_holder_and_terms(flavor: Flavor) {
    const TTL: u64 = 300;
    const DELAY: u64 = 4_000;
    // The masters' clock and ours are the same host's.
    const SLACK: Duration = Duration::from_millis(25);
    let h = Harness::start(flavor).await;
    let (_daemon, metrics, mut a) = replica_with_metrics(&h).await;
    // The daemon's first grant has no master clock to propose from yet.
    let warm = acquire(&mut a, "one-round/warm", 10_000, 0)
        .await
        .expect("free");
    assert!(release(&mut a, &warm).await.expect("Release"));
    // A grant falls back to the commit round where a master's clock is
    // outside the proposal's window (a daemon starved between reading the
    // masters' clock and proposing): try fresh resources, releasing each
    // such grant (an orderly end frees it at once), until one is one-round.
    let mut one_round = None;
    for attempt in 0..20 {
        let resource = format!("one-round/terms/{attempt}");
        let before = one_round_grants(metrics);
        let asked = (Instant::now(), SystemTime::now());
        let lock = a
            .acquire(pb::AcquireRequest {
                resource: resource.clone(),
                ttl: ms(TTL),
                owner: "one-round owner".into(),
                lock_delay: ms(DELAY),
                ..Default::default()
            })
            .await
            .expect("Acquire with a lock_delay")
            .into_inner()
            .lock
            .expect("lock");
        if one_round_grants(metrics) > before {
            one_round = Some((resource, lock, asked));
            break;
        }
        assert!(release(&mut a, &lock).await.expect("Release"));
    }
    let (resource, lock, (asked, asked_wall)) =
        one_round.expect("a one-round grant in 20 acquisitions");
    let resource = resource.as_str();

    let mut admin = LockAdminServiceClient::connect(format!("http://{}", h.daemons[0].addr))
        .await
        .expect("connect");
    let seen = admin
        .inspect(pb::InspectRequest {
            resource: resource.into(),
            ..Default::default()
        })
        .await
        .expect("Inspect")
        .into_inner();
    let info = seen.lock.expect("held: a lock");
    assert!(seen.held);
    assert_eq!(
        info.owner, "one-round owner",
        "owner recorded by the acquire"
    );
    assert_eq!(info.session_kind(), pb::SessionKind::Unary);
    assert_eq!(info.fence, lock.fence);
    let at = SystemTime::try_from(info.acquired_at.expect("acquired_at")).expect("timestamp");
    let skew = at
        .duration_since(asked_wall)
        .unwrap_or_else(|e| e.duration());
    assert!(skew < Duration::from_secs(5), "acquired_at {at:?}");

    // The record on the masters: what COMMIT_FENCE would have written.
    let mut recorded = 0;
    for i in 0..5 {
        let fields = vec![
            format!("redlock:fence:{resource}").into(),
            "fence".into(),
            "owner".into(),
            "kind".into(),
            "delay".into(),
            "nb".into(),
            "at".into(),
        ];
        let got = h.raw(i, "HMGET", fields).await;
        let got: Vec<Option<String>> = got
            .into_array()
            .into_iter()
            .map(|v| v.as_string())
            .collect();
        if got[0].as_deref() == Some(lock.fence.to_string().as_str()) {
            assert_eq!(got[1].as_deref(), Some("one-round owner"), "master {i}");
            assert_eq!(got[2].as_deref(), Some("unary"), "master {i}");
            assert_eq!(got[3].as_deref(), Some(DELAY.to_string().as_str()));
            assert!(got[4].is_some() && got[5].is_some(), "master {i}: {got:?}");
            recorded += 1;
        }
    }
    assert!(recorded >= 3, "the record is on {recorded} masters");

    // The holder vanishes: no Release, the lock runs out.
    eventually(LIMIT, "the lock's keys are gone", || async {
        h.holders(resource, &lock.token).await == 0
    })
    .await;
    for client in [&mut a, &mut h.client().await] {
        let refused = client
            .acquire(pb::AcquireRequest {
                resource: resource.into(),
                ttl: ms(10_000),
                ..Default::default()
            })
            .await
            .expect_err("expired, but within its lock_delay");
        assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
    }
    let next = acquire(&mut h.client().await, resource, 10_000, 30_000)
        .await
        .expect("granted once the delay ended");
    let waited = asked.elapsed();
    assert!(
        waited + SLACK >= Duration::from_millis(TTL + DELAY),
        "granted {waited:?} after the first grant, before ttl + lock_delay"
    );
    assert!(next.fence > lock.fence);
}

/// An earlier grant's terms left in the fence hash (a lock-delay whose
/// not-before time has passed, a hold-at-least whose end has not) do not
/// outlive a one-round grant without terms: the acquire deletes them, so
/// the new holder's Release deletes its key at once instead of keeping it
/// until the old `lu`, and its Extend sets no not-before time.
async fn one_round_grant_clears_earlier_terms(flavor: Flavor) {
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
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    // A starved engine's proposal can miss a master's clock window and fall
    // back to the commit round (which clears the terms too): try fresh
    // resources until one is granted in one round.
    let mut one_round = None;
    for attempt in 0..20 {
        let resource = format!("one-round/stale-terms/{attempt}");
        for i in 0..5 {
            let stale = vec![
                format!("redlock:fence:{resource}").into(),
                "delay".into(),
                "60000".into(),
                "nb".into(),
                (now_ms - 1_000).to_string().into(),
                "lu".into(),
                (now_ms + 600_000).to_string().into(),
            ];
            h.raw(i, "HSET", stale).await;
        }
        let rounds = redlock.fence_commit_rounds();
        let lock = redlock
            .acquire(&resource, TTL, Duration::ZERO)
            .await
            .expect("free: the old not-before time has passed");
        if redlock.fence_commit_rounds() == rounds {
            one_round = Some((resource, lock));
            break;
        }
        assert!(redlock
            .release_now(&resource, &lock.token)
            .await
            .expect("release"));
    }
    let (resource, lock) = one_round.expect("a one-round grant in 20 acquisitions");
    let resource = resource.as_str();
    let fields = || -> Vec<fred::prelude::Value> {
        vec![
            format!("redlock:fence:{resource}").into(),
            "delay".into(),
            "nb".into(),
            "lu".into(),
        ]
    };
    let extended = redlock
        .extend(resource, &lock.token, TTL)
        .await
        .expect("held");
    assert_eq!(extended.fence, lock.fence);
    let mut cleared = 0;
    for i in 0..5 {
        let got = h.raw(i, "HMGET", fields()).await.into_array();
        if got.iter().all(|v| v.is_null()) {
            cleared += 1;
        }
    }
    assert!(cleared >= 3, "old terms cleared on {cleared} masters only");
    assert!(redlock
        .release(resource, &lock.token)
        .await
        .expect("release"));
    assert_eq!(
        h.holders(resource, lock.token.expose()).await,
        0,
        "deleted, not kept until the old hold-at-least"
    );
    engine.close().await;
}
