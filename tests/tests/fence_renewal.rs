//! A plain one-round grant renews its fence hash's expiry once per period
//! of fences (an eighth of `fence_ttl` at the defaults, 21 h), not at
//! every grant: a resource locked again and again costs each master one
//! `PEXPIRE` per period instead of one per grant. The hash still lives at
//! least `fence_ttl` less a period and the proposal window after any grant
//! (`crates/redlockd/src/redlock/fence.rs`, `refresh_period`).
//!
//! Tested on the masters' own data: a new hash gets the full `fence_ttl`;
//! an expiry shortened by hand (as if days had passed) stays as it is
//! after another grant in the same period; and once the hash's `max` says
//! the last grant was a period ago, the next grant renews it. And where
//! another daemon with a shorter `fence_ttl` renewed the hash last (a
//! rolling change of the setting), the next grant renews it to its own,
//! whatever the period: the hash records whose `fence_ttl` renewed it
//! (`ft`).

mod common;

use common::*;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd_testkit::masters::Flavor;
use std::net::SocketAddr;
use std::time::Duration;

against_both_servers!(
    a_grant_renews_the_fence_hash_once_per_period,
    a_grant_renews_over_a_shorter_fence_ttl
);

const RESOURCE: &str = "renewal";
const FENCE_KEY: &str = "redlock:fence:renewal";
/// The expiry put on the hashes by hand: less than `fence_ttl` (168 h) by
/// far more than the test takes.
const SHORTENED_MS: i64 = 100 * 60 * 60 * 1000;

/// Grants whose fence the acquire round fixed (one-round grants).
fn one_round_grants(metrics: SocketAddr) -> f64 {
    redlockd_testkit::metrics::counter(metrics, "redlock_fence_grants_total", r#"path="one_round""#)
}

async fn a_grant_renews_the_fence_hash_once_per_period(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let fence_ttl_ms = i64::try_from(h.config().redlock.fence_ttl.as_millis()).expect("fits");
    // The period at the defaults (`refresh_period`'s unit test pins it).
    let period_us = u64::try_from(Duration::from_secs(21 * 60 * 60).as_micros()).expect("fits");
    let (_daemon, metrics, channel) = h.metered_daemon().await;
    let mut client = LockServiceClient::new(channel);
    // The daemon's first grant has no master clock to propose from yet.
    let warm = acquire(&mut client, "renewal/warm", 10_000, 0)
        .await
        .expect("free");
    assert!(release(&mut client, &warm).await.expect("Release"));

    // A new hash: the full fence_ttl on every master.
    let first = grant(&h, &mut client, metrics).await;
    for i in 0..5 {
        let left = pttl(&h, i).await;
        assert!(left > fence_ttl_ms - 60_000, "master {i}: {left} ms");
    }
    assert!(release(&mut client, &first).await.expect("Release"));

    // Shortened by hand; a grant in the same period leaves it as it is.
    shorten(&h).await;
    let second = grant(&h, &mut client, metrics).await;
    let same_period = first.fence / period_us == second.fence / period_us;
    for i in 0..5 {
        let left = pttl(&h, i).await;
        if same_period {
            assert!(left <= SHORTENED_MS, "master {i}: renewed ({left} ms)");
        } else {
            // The two grants straddled a period's end (odds about 1 in
            // 10^5): the second renewed, as it should.
            assert!(left > fence_ttl_ms - 60_000, "master {i}: {left} ms");
        }
    }
    assert!(release(&mut client, &second).await.expect("Release"));

    // The hash says its last grant was a period ago: the next renews it.
    shorten(&h).await;
    let a_period_ago = second.fence - period_us - 1;
    for i in 0..5 {
        h.raw(
            i,
            "HSET",
            vec![
                FENCE_KEY.into(),
                "max".into(),
                a_period_ago.to_string().into(),
            ],
        )
        .await;
    }
    let third = grant(&h, &mut client, metrics).await;
    assert!(third.fence > second.fence, "fences still increase");
    for i in 0..5 {
        let left = pttl(&h, i).await;
        assert!(
            left > fence_ttl_ms - 60_000,
            "master {i}: not renewed ({left} ms)"
        );
    }
    assert!(release(&mut client, &third).await.expect("Release"));
}

async fn a_grant_renews_over_a_shorter_fence_ttl(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let fence_ttl_ms = i64::try_from(h.config().redlock.fence_ttl.as_millis()).expect("fits");
    let (_daemon, metrics, channel) = h.metered_daemon().await;
    let mut client = LockServiceClient::new(channel);
    let warm = acquire(&mut client, "renewal/warm", 10_000, 0)
        .await
        .expect("free");
    assert!(release(&mut client, &warm).await.expect("Release"));
    let first = grant(&h, &mut client, metrics).await;
    assert!(release(&mut client, &first).await.expect("Release"));

    // A second daemon over the same masters, with a shorter fence_ttl (as
    // in the middle of a rolling change of it): its grant renews the hash
    // to its own setting, shortening it on every master.
    let short = Duration::from_secs(2 * 60 * 60);
    let mut config = h.config();
    config.redlock.fence_ttl = short;
    let other = daemon::Daemon::start(config.validated().expect("valid"))
        .await
        .expect("second daemon");
    let other_channel = client::endpoint(other.addr)
        .expect("endpoint")
        .connect_lazy();
    client::wait_serving(other_channel.clone(), Duration::from_secs(10))
        .await
        .expect("the other daemon SERVING");
    let mut other_client = LockServiceClient::new(other_channel);
    let theirs = acquire(&mut other_client, RESOURCE, 10_000, 0)
        .await
        .expect("free");
    h.held_everywhere(RESOURCE, &theirs.token).await;
    let short_text = short.as_millis().to_string();
    // Its grant (a commit: its first, with no master clock to propose
    // from) recorded its setting.
    eventually(
        Duration::from_secs(5),
        "the grant records its fence_ttl on every master",
        || async { h.fence_field_on(RESOURCE, "ft", &short_text).await == 5 },
    )
    .await;
    // An extension renews too, and says so: with the record made to name
    // the first daemon's setting by hand, the other's Extend must rewrite
    // it; and where the hash is gone (master 0), it must not leave one
    // that never expires.
    h.raw(0, "DEL", vec![FENCE_KEY.into()]).await;
    for i in 1..5 {
        h.raw(
            i,
            "HSET",
            vec![
                FENCE_KEY.into(),
                "ft".into(),
                fence_ttl_ms.to_string().into(),
            ],
        )
        .await;
    }
    let theirs = extend(&mut other_client, &theirs, 20_000)
        .await
        .expect("Extend");
    eventually(
        Duration::from_secs(5),
        "the Extend records its fence_ttl on masters 1 to 4",
        || async { h.fence_field_on(RESOURCE, "ft", &short_text).await >= 4 },
    )
    .await;
    // The Extend ran on master 0 too once its lock key has the new ttl.
    let lock_key = format!("redlock:lock:{RESOURCE}");
    eventually(Duration::from_secs(5), "the Extend on master 0", || async {
        let left = h.raw(0, "PTTL", vec![lock_key.clone().into()]).await;
        left.as_i64().is_some_and(|ms| ms > 10_000)
    })
    .await;
    assert_ne!(pttl(&h, 0).await, -1, "a fence hash without an expiry");
    assert!(release(&mut other_client, &theirs).await.expect("Release"));
    let short_ms = i64::try_from(short.as_millis()).expect("fits");
    for i in 0..5 {
        let left = pttl(&h, i).await;
        assert!(
            left <= short_ms,
            "master {i}: {left} ms after the other's grant"
        );
    }

    // The first daemon's next grant is (almost surely) in the same period
    // as the other's fence, yet renews: the hash was not renewed to its
    // fence_ttl.
    let again = grant(&h, &mut client, metrics).await;
    for i in 0..5 {
        let left = pttl(&h, i).await;
        assert!(
            left > fence_ttl_ms - 60_000,
            "master {i}: left at the shorter expiry ({left} ms)"
        );
    }
    assert!(release(&mut client, &again).await.expect("Release"));
}

/// A grant of [`RESOURCE`] that took its fence in one round (the commit
/// round renews the expiry always: those are released and tried again),
/// once every master has run it (the grant waited for a quorum only).
async fn grant(h: &Harness, client: &mut LockClient, metrics: SocketAddr) -> redlockd::pb::Lock {
    loop {
        let before = one_round_grants(metrics);
        let lock = acquire(client, RESOURCE, 10_000, 0).await.expect("free");
        if one_round_grants(metrics) > before {
            h.held_everywhere(RESOURCE, &lock.token).await;
            return lock;
        }
        assert!(release(client, &lock).await.expect("Release"));
    }
}

async fn pttl(h: &Harness, i: usize) -> i64 {
    h.raw(i, "PTTL", vec![FENCE_KEY.into()])
        .await
        .as_i64()
        .expect("PTTL is a number")
}

async fn shorten(h: &Harness) {
    for i in 0..5 {
        h.raw(
            i,
            "PEXPIRE",
            vec![FENCE_KEY.into(), SHORTENED_MS.to_string().into()],
        )
        .await;
    }
}
