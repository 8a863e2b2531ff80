//! The held-locks gauge (the dashboard shows how many locks are
//! held): `redlock_locks_held` of a real daemon over five real masters
//! follows unary grants, a Hold session, releases, extensions and expiry,
//! and two replicas' gauges sum to the fleet's held locks.

mod common;

use common::process::DaemonProcess;
use common::*;
use redlockd::pb;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd_testkit::masters::Flavor;
use std::net::SocketAddr;
use std::time::Duration;

against_both_servers!(gauge_follows_grants_releases_and_expiry);

/// Generous bound for the gauge (refreshed every second) to show a change.
const LIMIT: Duration = Duration::from_secs(10);

/// `redlock_locks_held` of the daemon whose metrics listen on `metrics`
/// (`None`: not exported yet, or the scrape failed).
fn locks_held(metrics: SocketAddr) -> Option<f64> {
    let text = redlockd_testkit::metrics::scrape(metrics).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("redlock_locks_held "))
        .and_then(|value| value.trim().parse().ok())
}

/// A daemon process with metrics on, and a client of it.
async fn replica(h: &Harness) -> (DaemonProcess, SocketAddr, LockClient) {
    let (daemon, metrics, channel) = h.metered_daemon().await;
    (daemon, metrics, LockServiceClient::new(channel))
}

/// Waits until the gauge of `metrics` reads `expected`.
async fn gauge_reaches(metrics: SocketAddr, expected: f64, what: &str) {
    eventually(
        LIMIT,
        &format!("{what}: redlock_locks_held = {expected}"),
        || async { locks_held(metrics) == Some(expected) },
    )
    .await;
}

async fn gauge_follows_grants_releases_and_expiry(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let (a_daemon, a_metrics, mut a) = replica(&h).await;
    let (b_daemon, b_metrics, mut b) = replica(&h).await;
    gauge_reaches(a_metrics, 0.0, "nothing held yet").await;

    let long = acquire(&mut a, "held/long", 60_000, 0)
        .await
        .expect("Acquire");
    let other = acquire(&mut a, "held/other", 60_000, 0)
        .await
        .expect("Acquire");
    let (session, mut events, _) = hold(&mut a, "held/session", 60_000, 0).await;
    gauge_reaches(a_metrics, 3.0, "two unary grants and a session").await;

    // A refused acquisition holds nothing.
    let refused = acquire(&mut a, "held/long", 1_000, 0).await;
    assert_eq!(refused.expect_err("held").code(), tonic::Code::Aborted);

    release(&mut a, &long).await.expect("Release");
    gauge_reaches(a_metrics, 2.0, "a release ends the count at once").await;

    let _short = acquire(&mut a, "held/short", 5_000, 0)
        .await
        .expect("Acquire");
    gauge_reaches(a_metrics, 3.0, "a short grant").await;
    gauge_reaches(a_metrics, 2.0, "an expired lock is no longer counted").await;

    session.send(release_message()).await.expect("send release");
    let released = events.message().await.expect("stream ok");
    assert!(
        matches!(
            released.and_then(|e| e.event),
            Some(pb::hold_event::Event::Released(_))
        ),
        "the session's release is answered"
    );
    gauge_reaches(a_metrics, 1.0, "a session's orderly end").await;

    // Extended through the other replica: counted there from then on; the
    // sum over replicas is the fleet's count once this replica's own
    // validity for it has run out (documented approximation).
    let moved = extend(&mut b, &other, 60_000).await.expect("Extend");
    assert_eq!(moved.fence, other.fence);
    gauge_reaches(b_metrics, 1.0, "an Extend through another replica").await;
    release(&mut b, &other).await.expect("Release");
    gauge_reaches(b_metrics, 0.0, "released through that replica").await;

    let _ = (a_daemon.stop(LIMIT).await, b_daemon.stop(LIMIT).await);
}
