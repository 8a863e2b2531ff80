//! The default restart quarantine (horizon, see `crates/redlockd/src/valkey/horizon.rs`)
//! against real masters, at the default `max_ttl` (1 h): a fresh cluster
//! serves at once; a master restarted empty while a lock it held is still
//! valid sits out exactly until that lock has expired (plus drift and the
//! fences' clock allowance), as seen by a replica that did not grant the
//! lock; restarts with nothing ever locked cost nothing.

mod common;

use common::*;
use redlockd::config::{Config, RestartQuarantine};
use redlockd::redlock::Master;
use redlockd::server::{build_engine, Engine};
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

against_both_servers!(
    fresh_cluster_serves_at_once,
    restarted_master_sits_out_until_the_lock_it_lost_expires,
    restarts_with_nothing_locked_are_not_quarantined,
);

/// The default quarantine, pinned: the harness runs the default too; this
/// checks it stays so. `max_ttl` stays at its default, 1 h.
fn default_quarantine(config: &mut Config) {
    config.redlock.quarantine = RestartQuarantine::default();
    assert_eq!(config.redlock.quarantine, RestartQuarantine::Horizon);
    assert_eq!(config.redlock.max_ttl, Duration::from_secs(3600));
}

/// The standard health status of the lock service on daemon `i`.
async fn health(h: &Harness, i: usize) -> ServingStatus {
    let channel = Channel::from_shared(format!("http://{}", h.daemons[i].addr))
        .expect("url")
        .connect()
        .await;
    let Ok(channel) = channel else {
        return ServingStatus::Unknown;
    };
    match HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "redlock.v1.LockService".into(),
        })
        .await
    {
        Ok(response) => {
            ServingStatus::try_from(response.into_inner().status).unwrap_or(ServingStatus::Unknown)
        }
        Err(_) => ServingStatus::Unknown,
    }
}

/// Waits until every master of `engine` counts.
async fn all_trusted(engine: &Engine, limit: Duration, what: &str) {
    eventually(limit, what, || async {
        engine.nodes.iter().all(|n| n.trusted())
    })
    .await;
}

/// Five masters started a moment ago and a daemon at default settings: a
/// lock is granted and the health check says SERVING within two seconds
/// (the blanket quarantine refused both for an hour).
async fn fresh_cluster_serves_at_once(flavor: Flavor) {
    let h = Harness::start_with(flavor, default_quarantine).await;
    let started = Instant::now();
    let mut c = h.client().await;
    eventually(Duration::from_secs(2), "a first grant", || {
        let mut c = c.clone();
        async move { acquire(&mut c, "first", 1_000, 0).await.is_ok() }
    })
    .await;
    let granted = started.elapsed();
    eventually(Duration::from_secs(2), "SERVING", || async {
        health(&h, 0).await == ServingStatus::Serving
    })
    .await;
    let lock = acquire(&mut c, "second", 1_000, 0)
        .await
        .expect("granted at once");
    assert!(release(&mut c, &lock).await.expect("release"));
    println!(
        "{flavor}: first lock granted {granted:?} after the daemon started, SERVING after {:?}",
        started.elapsed()
    );
}

/// A holder's lock (ttl 4 s) sits on exactly three masters: the other two
/// are cut off (a proxy swallows everything) while it is acquired, then
/// come back with their data. One of the three is then restarted empty.
/// Until the lock has expired no second holder is granted, through the
/// replica that granted it or another one that knows nothing of it; the
/// restarted master's quarantine is the lock's remaining time plus drift
/// and the fences' clock allowance (about 4 s at the defaults), not
/// max_ttl (1 h); once over, the master votes again (a grant that needs
/// it).
async fn restarted_master_sits_out_until_the_lock_it_lost_expires(flavor: Flavor) {
    const TTL: Duration = Duration::from_secs(4);
    let mut h = Harness::start_with(flavor, default_quarantine).await;
    let mut config = h.config();
    let mut proxies = Vec::new();
    for i in [3, 4] {
        let master = std::net::SocketAddr::from(([127, 0, 0, 1], h.masters.port(i)));
        let proxy = common::proxy::Proxy::start(master).await.expect("proxy");
        config.redlock.nodes[i] = format!("redis://{}", proxy.addr());
        proxies.push(proxy);
    }
    // Horizons outlast each lock by the fences' clock allowance (see
    // `redlock::fence::clock_allowance`): the restarted master sits out that
    // much longer than the lock.
    let allowance = redlockd::redlock::clock_allowance(
        config.redlock.node_timeout,
        config.redlock.max_clock_offset,
    );
    // Two replicas: `granter` grants the lock, `other` never heard of it.
    let granter = build_engine(&config).await.expect("engine");
    let other = build_engine(&config).await.expect("engine");
    for engine in [&granter, &other] {
        all_trusted(
            engine,
            Duration::from_secs(5),
            "a fresh cluster counts at once",
        )
        .await;
    }
    for proxy in &proxies {
        proxy.set(common::proxy::Mode::Blackhole);
    }
    let lock = granter
        .redlock
        .acquire("precious", TTL, Duration::ZERO)
        .await
        .expect("granted by masters 0, 1, 2");
    let held_until = Instant::now() + lock.validity;
    let token = lock.token.expose().to_owned();
    for i in 0..5 {
        let expected = (i < 3).then_some(token.as_str());
        assert_eq!(
            h.lock_value(i, "precious").await.as_deref(),
            expected,
            "master {i}"
        );
    }
    for i in 0..5 {
        let pttl = h.raw(i, "PTTL", vec!["redlock:horizon".into()]).await;
        let pttl = pttl.as_i64().expect("an integer");
        match i < 3 {
            true => assert!(
                pttl > 0 && pttl <= 4_000 + allowance.as_millis() as i64,
                "master {i}: horizon {pttl} ms"
            ),
            false => assert_eq!(pttl, -2, "master {i} never saw the lock"),
        }
    }
    // Masters 3 and 4 come back with their data (same process): they vote.
    for proxy in &proxies {
        proxy.set(common::proxy::Mode::Pass);
    }
    for engine in [&granter, &other] {
        all_trusted(engine, Duration::from_secs(5), "masters 3 and 4 back").await;
    }
    h.masters.restart(2).expect("restart master 2 without data");
    let restarted = Instant::now();
    assert_eq!(h.lock_value(2, "precious").await, None, "the key is lost");
    // Each replica sees the restart, reads the horizons and settles.
    for engine in [&granter, &other] {
        let state = engine.nodes[2].state();
        eventually(Duration::from_secs(3), "the quarantine settled", || async {
            state.unsettled().is_none() && state.quarantined()
        })
        .await;
        let left = state.quarantine_left();
        let lock_left = held_until.saturating_duration_since(Instant::now());
        assert!(
            left >= lock_left + allowance && left <= TTL + allowance + Duration::from_millis(200),
            "quarantine {left:?} for a lock with {lock_left:?} left, allowance {allowance:?} \
             (max_ttl 1 h)"
        );
        println!("{flavor}: master 2 quarantined for {left:?}; the lock has {lock_left:?} left");
    }
    // Until the lock has expired: nobody else gets it, through either replica.
    let mut attempts = 0;
    while Instant::now() < held_until {
        for engine in [&granter, &other] {
            match engine
                .redlock
                .acquire("precious", Duration::from_secs(1), Duration::ZERO)
                .await
            {
                Ok(second) => {
                    if Instant::now() < held_until {
                        panic!("a second holder while the first lock was valid: {second:?}");
                    }
                }
                Err(_) => attempts += 1,
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        attempts > 10,
        "the lock was contested ({attempts} attempts)"
    );
    // After it: master 2 votes again, in both replicas. With 3 and 4 gone,
    // a grant needs it.
    for engine in [&granter, &other] {
        eventually(
            allowance + Duration::from_secs(2),
            "master 2 votes again",
            || async { engine.nodes[2].trusted() },
        )
        .await;
    }
    let sat_out = restarted.elapsed();
    let after_expiry = held_until.elapsed();
    h.masters.stop(3).expect("stop master 3");
    h.masters.stop(4).expect("stop master 4");
    for engine in [&granter, &other] {
        let redlock = engine.redlock.clone();
        eventually(
            Duration::from_secs(3),
            "a grant that needs master 2",
            || {
                let redlock = redlock.clone();
                async move {
                    redlock
                        .acquire("after", Duration::from_millis(500), Duration::ZERO)
                        .await
                        .is_ok()
                }
            },
        )
        .await;
    }
    println!(
        "{flavor}: master 2 sat out {sat_out:?} (the holder's validity ended {:?} after the \
         restart; trusted again {after_expiry:?} after that); max_ttl is 1 h",
        held_until.saturating_duration_since(restarted),
    );
    assert!(
        sat_out < TTL + allowance + Duration::from_secs(2),
        "{sat_out:?}"
    );
    granter.close().await;
    other.close().await;
}

/// Nothing was ever locked: masters restarted empty, a majority of them,
/// are not quarantined at all; then a grant that needs all three of them
/// (the other two stopped) comes at once.
async fn restarts_with_nothing_locked_are_not_quarantined(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, default_quarantine).await;
    let engine = build_engine(&h.config()).await.expect("engine");
    all_trusted(
        &engine,
        Duration::from_secs(5),
        "a fresh cluster counts at once",
    )
    .await;
    let run_ids: Vec<String> = engine.nodes.iter().map(|n| n.state().run_id()).collect();
    for i in 0..3 {
        h.masters.restart(i).expect("restart without data");
    }
    let restarted = Instant::now();
    eventually(
        Duration::from_secs(3),
        "the restarts are seen and settled",
        || async {
            (0..3).all(|i| {
                let state = engine.nodes[i].state();
                state.run_id() != run_ids[i] && state.unsettled().is_none()
            })
        },
    )
    .await;
    for i in 0..3 {
        assert!(
            !engine.nodes[i].state().quarantined(),
            "master {i}: no horizon anywhere, no grant made: no quarantine"
        );
    }
    h.masters.stop(3).expect("stop");
    h.masters.stop(4).expect("stop");
    engine
        .redlock
        .acquire("first-ever", Duration::from_secs(1), Duration::ZERO)
        .await
        .expect("masters 0, 1, 2 grant at once");
    println!(
        "{flavor}: three restarted masters granted {:?} after their restart",
        restarted.elapsed()
    );
    engine.close().await;
}
