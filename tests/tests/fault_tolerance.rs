//! Redlock's documented hazards, defended: a master restarted without its
//! data is quarantined, under the default (horizon) and the blanket
//! (`max_ttl`) quarantine alike (and without the quarantine the same restart
//! re-grants a held lock: the counterfactual), Extend puts lost keys back,
//! hung masters cost at most node_timeout, and replicas or one server listed
//! twice never count toward a quorum. More on the horizon quarantine:
//! tests/tests/restart_quarantine.rs.

mod common;

use common::*;
use redlockd::config::{Config, RestartQuarantine};
use redlockd::redlock::Master;
use redlockd::server::build_engine;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};
use tonic::Code;

against_both_servers!(
    restart_without_data_is_quarantined,
    blanket_quarantine_lasts_max_ttl,
    without_quarantine_a_restart_regrants_a_held_lock,
    extend_recreates_lost_keys,
    hung_masters_cost_at_most_node_timeout,
    replica_does_not_count,
    flushed_script_cache_costs_one_call_at_most,
    masters_slow_at_start_count_once_they_answer,
);

/// The default quarantine (horizon), at the default max_ttl (1 h): a
/// quarantine that fell back to max_ttl would fail the test.
fn quarantine_on(config: &mut Config) {
    config.redlock.quarantine = RestartQuarantine::default();
}

/// The blanket quarantine with locks of at most 2 s, so that it (max_ttl +
/// drift, + 1 s of rounding) ends within a test.
fn blanket_quarantine(config: &mut Config) {
    config.redlock.quarantine = RestartQuarantine::MaxTtl;
    config.redlock.max_ttl = Duration::from_secs(2);
}

fn quarantine_off(config: &mut Config) {
    config.redlock.quarantine = RestartQuarantine::Off;
    config.redlock.max_ttl = Duration::from_secs(2);
}

/// The harness's masters are fresh, so a daemon with the blanket
/// quarantine first waits them out like any other restart.
async fn until_serving(c: &mut LockClient) {
    eventually(
        Duration::from_secs(10),
        "the fresh masters leave quarantine",
        || {
            let mut c = c.clone();
            async move {
                match acquire(&mut c, "warm-up", 100, 0).await {
                    Ok(lock) => release(&mut c, &lock).await.is_ok(),
                    Err(_) => false,
                }
            }
        },
    )
    .await;
}

fn kill(signal: &str, pid: u32) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// A majority of masters restarted without data while a lock is held: with
/// the (default) quarantine, their fresh grants do not count and nobody else
/// gets the lock; once the lock has expired they count again, long before
/// max_ttl (1 h).
async fn restart_without_data_is_quarantined(flavor: Flavor) {
    restart_of_a_majority(flavor, quarantine_on).await;
}

/// The same with the blanket quarantine (max_ttl 2 s).
async fn blanket_quarantine_lasts_max_ttl(flavor: Flavor) {
    restart_of_a_majority(flavor, blanket_quarantine).await;
}

async fn restart_of_a_majority(flavor: Flavor, quarantine: fn(&mut Config)) {
    let mut h = Harness::start_with(flavor, quarantine).await;
    let mut c = h.client().await;
    until_serving(&mut c).await;
    let held = acquire(&mut c, "precious", 2_000, 0)
        .await
        .expect("granted");
    let held_until = Instant::now() + std_duration(held.validity);
    for i in 0..3 {
        h.masters.restart(i).expect("restart without data");
    }
    while Instant::now() < held_until {
        let status = acquire(&mut c, "precious", 1_000, 0)
            .await
            .expect_err("the lock is held: no second holder");
        assert!(
            matches!(status.code(), Code::Unavailable | Code::Aborted),
            "{status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let started = Instant::now();
    eventually(Duration::from_secs(10), "the quarantine ends", || {
        let mut c = c.clone();
        async move { acquire(&mut c, "after", 1_000, 0).await.is_ok() }
    })
    .await;
    println!(
        "{flavor}: restarted masters counted again {:?} after the lock expired",
        started.elapsed()
    );
}

/// The counterfactual: the same restart with the quarantine off grants a
/// second holder while the first lock is still valid (which is why the
/// quarantine exists).
async fn without_quarantine_a_restart_regrants_a_held_lock(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, quarantine_off).await;
    let mut c = h.client().await;
    let held = acquire(&mut c, "precious", 2_000, 0)
        .await
        .expect("granted");
    let held_until = Instant::now() + std_duration(held.validity);
    for i in 0..3 {
        h.masters.restart(i).expect("restart without data");
    }
    let mut second = None;
    while second.is_none() && Instant::now() < held_until {
        second = acquire(&mut c, "precious", 1_000, 0).await.ok();
    }
    let second = second.expect("a second holder while the first lock was valid");
    assert!(Instant::now() < held_until, "both held at once");
    assert_ne!(second.token, held.token);
}

/// A master that lost a held lock's key gets it back on the next Extend.
async fn extend_recreates_lost_keys(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, quarantine_off).await;
    let mut c = h.client().await;
    let held = acquire(&mut c, "long-held", 2_000, 0)
        .await
        .expect("granted");
    h.masters.restart(0).expect("restart without data");
    eventually(Duration::from_secs(5), "the master is back", || async {
        h.masters.is_running(0)
    })
    .await;
    let h = &h;
    eventually(
        Duration::from_secs(5),
        "Extend re-creates the key on master 0",
        || {
            let (mut c, held) = (c.clone(), held.clone());
            async move {
                extend(&mut c, &held, 2_000).await.is_ok()
                    && h.lock_value(0, "long-held").await.as_deref() == Some(held.token.as_str())
            }
        },
    )
    .await;
    assert!(release(&mut c, &held).await.expect("release"));
    assert!(h.keys("redlock:lock:long-held").await.is_empty());
}

/// Two hung masters (SIGSTOP: they accept connections and never answer):
/// every call still succeeds, none waits much beyond node_timeout.
async fn hung_masters_cost_at_most_node_timeout(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    // The daemon is serving (its start-up waits up to 2 s for each master).
    acquire(&mut c, "warm-up", 100, 0).await.expect("granted");
    let pids: Vec<u32> = (3..5).map(|i| h.masters.pid(i).expect("running")).collect();
    for &pid in &pids {
        kill("-STOP", pid);
    }
    let mut slowest = Duration::ZERO;
    for round in 0..5 {
        let started = Instant::now();
        let lock = acquire(&mut c, &format!("r{round}"), 5_000, 0)
            .await
            .expect("granted by 3 of 5");
        extend(&mut c, &lock, 5_000)
            .await
            .expect("extended by 3 of 5");
        assert!(validate(&mut c, &lock).await.expect("validate").held);
        assert!(release(&mut c, &lock).await.expect("release"));
        slowest = slowest.max(started.elapsed());
    }
    for &pid in &pids {
        kill("-CONT", pid);
    }
    println!(
        "{flavor}: slowest acquire+extend+validate+release with two hung masters: {slowest:?}"
    );
    // Release waits for every master (bounded by node_timeout); the other
    // calls are decided by the three live ones.
    assert!(slowest < NODE_TIMEOUT * 8, "{slowest:?}");
}

/// Every master forgets the batch script (`SCRIPT FLUSH`, as an operator
/// or a restart with AOF would): the batches that meet NOSCRIPT fail rather
/// than being retried out of order, and the next call carries the script's
/// text again and succeeds.
async fn flushed_script_cache_costs_one_call_at_most(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let before = acquire(&mut c, "before-flush", 5_000, 0)
        .await
        .expect("granted");
    for i in 0..5 {
        h.raw(i, "SCRIPT", vec!["FLUSH".into()]).await;
    }
    // This one may meet NOSCRIPT on every master: UNAVAILABLE, never a
    // wrong answer.
    match release(&mut c, &before).await {
        Ok(held) => assert!(held, "the lock was held"),
        Err(status) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
    }
    let after = acquire(&mut c, "after-flush", 5_000, 0)
        .await
        .expect("the script travels in full again");
    assert!(release(&mut c, &after).await.expect("release"));
    assert!(h.keys("redlock:lock:after-flush").await.is_empty());
}

/// A daemon that meets two masters through a slow network (every packet
/// 100 ms late, beyond node_timeout, so their INFO times out) uses them once
/// the network is quick again: the INFO that makes a master's votes count
/// is retried, not left for a reconnection that never comes. With two other
/// masters then gone, the quorum needs both.
async fn masters_slow_at_start_count_once_they_answer(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    let mut proxies = Vec::new();
    let mut config = h.config();
    // The default quarantine: these masters are new and nothing was ever
    // locked on them, so nothing is at risk and they vote at once.
    for i in [3, 4] {
        let master = std::net::SocketAddr::from(([127, 0, 0, 1], h.masters.port(i)));
        let proxy = common::proxy::Proxy::start(master).await.expect("proxy");
        proxy.set(common::proxy::Mode::Slow(Duration::from_millis(100)));
        config.redlock.nodes[i] = format!("redis://{}", proxy.addr());
        proxies.push(proxy);
    }
    let engine = build_engine(&config).await.expect("engine");
    for proxy in &proxies {
        proxy.set(common::proxy::Mode::Pass);
    }
    h.masters.stop(0).expect("stop master 0");
    h.masters.stop(1).expect("stop master 1");
    let redlock = engine.redlock.clone();
    eventually(
        Duration::from_secs(5),
        "the masters that were slow count once they answer",
        || {
            let redlock = redlock.clone();
            async move {
                redlock
                    .acquire("after-the-slowness", Duration::from_secs(1), Duration::ZERO)
                    .await
                    .is_ok()
            }
        },
    )
    .await;
    engine.close().await;
}

/// A master that is a replica (here even a writable one) is refused: with
/// two real masters down, the replica does not make up the quorum.
async fn replica_does_not_count(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    let primary = h.masters.port(3).to_string();
    h.raw(
        4,
        "CONFIG",
        vec!["SET".into(), "replica-read-only".into(), "no".into()],
    )
    .await;
    h.raw(
        4,
        "REPLICAOF",
        vec!["127.0.0.1".into(), primary.as_str().into()],
    )
    .await;
    // A daemon connecting now sees the replica.
    let engine = build_engine(&h.config()).await.expect("engine");
    eventually(Duration::from_secs(5), "the replica is refused", || async {
        !engine.nodes[4].trusted()
    })
    .await;
    assert!((0..4).all(|i| engine.nodes[i].trusted()));
    let redlock = engine.redlock.clone();
    redlock
        .acquire("probe", Duration::from_millis(100), Duration::ZERO)
        .await
        .expect("four real masters grant");
    h.masters.stop(0).expect("stop");
    h.masters.stop(1).expect("stop");
    let error = redlock
        .acquire("no-quorum", Duration::from_secs(1), Duration::ZERO)
        .await
        .expect_err("two masters and a replica are no quorum");
    assert!(
        matches!(error, redlockd::redlock::LockError::NoQuorum(_)),
        "{error:?}"
    );
    engine.close().await;
}

/// One server listed twice (under two names) counts once: with two of the
/// four distinct servers down, a lock they hold is not "held on a majority".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_listed_twice_counts_once() {
    let mut h = Harness::start(Flavor::Valkey).await;
    let mut config = h.config();
    let alias = format!("redis://localhost:{}", h.masters.port(3));
    config.redlock.nodes = h.masters.urls()[..4].to_vec();
    config.redlock.nodes.push(alias);
    config.validate().expect("the alias passes the URL check");
    let engine = build_engine(&config).await.expect("engine");
    eventually(
        Duration::from_secs(5),
        "every master reported its run_id",
        || async { engine.nodes.iter().all(|n| !n.state().run_id().is_empty()) },
    )
    .await;
    redlockd::valkey::mark_duplicates(&engine.nodes);
    assert!(!engine.nodes[4].trusted(), "the alias is refused");
    let redlock = engine.redlock.clone();
    let lock = redlock
        .acquire("twice", Duration::from_secs(2), Duration::ZERO)
        .await
        .expect("granted by four servers");
    h.masters.stop(0).expect("stop");
    h.masters.stop(1).expect("stop");
    let error = redlock
        .validate("twice", &lock.token)
        .await
        .expect_err("held on two of four servers: cannot tell");
    assert!(
        matches!(error, redlockd::redlock::LockError::NoQuorum(_)),
        "{error:?}"
    );
    engine.close().await;
}
