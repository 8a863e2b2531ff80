//! A lock a `Hold` session lost keeps its `lock_delay`. The session's
//! extensions fail (masters hung), the client is told `lost`, and once
//! the lock's last validity is over the daemon deletes what is left of it
//! (an extension's keys on a minority). That clean-up is not the holder
//! letting go: the holder was told a validity, may not have read `lost`
//! (a paused process), and its writes may still be in flight, which is
//! what the delay is for (docs/api.md). So the masters keep the delay's
//! not-before time and nobody is granted the resource inside it.
//!
//! The case the mixed chaos run found (seed 37): master 2 missed the grant
//! (unreachable), two others hung; the clean-up ended the delay on the two
//! that still answered, and with master 2, which never had it, they made a
//! quorum that granted the resource 0.4 s after the holder froze, inside
//! its 4 s delay.

mod common;

use common::*;
use redlockd::pb;
use redlockd::pb::hold_event::Event;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;
use tonic::Code;

against_both_servers!(a_lost_sessions_lock_keeps_its_delay);

/// Long beside everything the test waits for, so that every check below
/// falls inside it.
const LOCK_DELAY_MS: u64 = 30_000;

async fn a_lost_sessions_lock_keeps_its_delay(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    // A daemon that reaches master 2 through a proxy, cut for the grant.
    let master = std::net::SocketAddr::from(([127, 0, 0, 1], h.masters.port(2)));
    let cut = proxy::Proxy::start(master).await.expect("proxy");
    let mut config = h.config();
    config.redlock.nodes[2] = format!("redis://{}", cut.addr());
    let daemon = daemon::Daemon::start(config.validated().expect("valid"))
        .await
        .expect("a daemon with master 2 behind a proxy");
    let mut holder = client::connect(daemon.addr).await.expect("client");
    cut.set(proxy::Mode::Blackhole);
    let (_requests, mut events, _lock) = hold_asking(
        &mut holder,
        pb::AcquireRequest {
            resource: "lapsed".into(),
            ttl: ms(1_000),
            owner: "lapsed-lock-delay".into(),
            lock_delay: ms(LOCK_DELAY_MS),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(h.lock_value(2, "lapsed").await, None, "master 2 missed it");

    // Masters 3 and 4 hang and master 2 answers again (without the lock):
    // the next extension has 2 of 5, and the session is lost.
    let paused = h.pause_masters(&[3, 4]);
    cut.set(proxy::Mode::Pass);
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.message())
            .await
            .expect("an event within 10 s")
            .expect("stream ok")
            .and_then(|e| e.event);
        match event {
            Some(Event::Extended(_)) => continue,
            Some(Event::Lost(_)) => break,
            other => panic!("expected `lost`, got {other:?}"),
        }
    }
    // What is left of it goes once its validity is over.
    eventually(
        Duration::from_secs(10),
        "the lost lock's keys are gone from masters 0 and 1",
        || async {
            h.lock_value(0, "lapsed").await.is_none() && h.lock_value(1, "lapsed").await.is_none()
        },
    )
    .await;
    for i in 0..2 {
        let not_before = h
            .raw(i, "HGET", vec!["redlock:fence:lapsed".into(), "nb".into()])
            .await;
        assert!(
            not_before.as_string().is_some(),
            "master {i} ended the lost lock's delay"
        );
    }
    // Masters 0, 1 and 2 answer, and only master 2 (which never had the
    // lock) may grant: nobody gets the resource inside the delay.
    let mut other = h.client().await;
    let refused = acquire(&mut other, "lapsed", 1_000, 0)
        .await
        .expect_err("granted inside the lost lock's lock_delay");
    assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
    println!("{flavor}: inside the delay, two masters hung: {refused:?}");
    drop(paused);
    let refused = acquire(&mut other, "lapsed", 1_000, 0)
        .await
        .expect_err("granted inside the lost lock's lock_delay");
    assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
    assert!(
        refused.message().contains("lock_delay"),
        "the refusal says what keeps the resource: {refused:?}"
    );
    println!("{flavor}: inside the delay, every master answering: {refused:?}");
}
