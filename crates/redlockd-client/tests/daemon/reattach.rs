//! Leases that reattach (`Acquire::reattach`): a silent session's lock
//! kept with the lease's own Extends and released by a Release call; a
//! reset session's lock found gone after the settle pause; an unreachable
//! daemon ends the lease by its clock, without the daemon's word.

use crate::{acquirable_within, start};
use redlockd_client::{Client, Error, Lease, LeaseEvent, LeaseEvents};
use redlockd_testkit::harness::Harness;
use redlockd_testkit::proxy::{Mode, Proxy};
use std::time::{Duration, Instant};

/// The lock's ttl: an extension is due every third of it.
const TTL: Duration = Duration::from_secs(1);

/// A daemon behind a fault proxy, a client through it, and a reattaching
/// lease on `resource` with its events.
async fn lease_through_proxy(resource: &str) -> (Harness, Proxy, Client, Lease, LeaseEvents) {
    let (h, _) = start().await;
    let proxy = Proxy::start(h.daemons[0].addr).await.expect("proxy");
    let c = Client::connect(proxy.addr().to_string())
        .await
        .expect("connect through the proxy");
    let lease = c.hold(resource, TTL).reattach().await.expect("hold");
    let events = lease.events();
    (h, proxy, c, lease, events)
}

/// The next event that `wanted` accepts, within `limit`.
async fn event(
    events: &mut LeaseEvents,
    limit: Duration,
    wanted: fn(&LeaseEvent) -> bool,
) -> LeaseEvent {
    tokio::time::timeout(limit, async {
        loop {
            match events.next().await {
                Some(event) if wanted(&event) => return event,
                Some(_) => continue,
                None => panic!("the lease ended first"),
            }
        }
    })
    .await
    .expect("the event within its limit")
}

/// The session frozen (a partition the daemon does not see yet): half a
/// ttl without an extension, the lease extends the lock itself on a new
/// connection and keeps it past the ttl; releasing it then sends a Release
/// call, and the resource is free at once (long before the daemon's
/// keepalive, 2 to 3 s after the freeze, would end the session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_session_kept_and_released_through_calls() {
    let (h, proxy, _c, lease, mut events) = lease_through_proxy("reattach/silent").await;
    let frozen = Instant::now();
    proxy.freeze_existing();
    let silent = event(&mut events, TTL, |e| matches!(e, LeaseEvent::Silent { .. })).await;
    println!("{silent:?} {:?} after the freeze", frozen.elapsed());
    tokio::time::sleep_until((frozen + TTL * 3 / 2).into()).await;
    lease.check().expect("kept past the ttl by its own Extends");
    assert!(lease.lock().remaining() > Duration::ZERO);
    assert!(lease.release().await.expect("release"), "it was held");
    let other = crate::client_of(&h, 0).await;
    let took = acquirable_within(&other, "reattach/silent", Duration::from_secs(2)).await;
    println!("acquirable {:?} after the freeze", frozen.elapsed());
    assert!(took < Duration::from_millis(500), "free after {took:?}");
}

/// The session's connection reset: the daemon (alive) releases the lock;
/// the lease's first Extend, after the settle pause, is refused, and the
/// lease ends with the daemon's word: gone, nothing to release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_session_found_gone() {
    let (_h, proxy, _c, lease, mut events) = lease_through_proxy("reattach/reset").await;
    let lost = lease.lost();
    proxy.close_existing();
    let broke = event(&mut events, TTL, |e| {
        matches!(e, LeaseEvent::SessionBroke { .. })
    })
    .await;
    println!("{broke:?}");
    let error = tokio::time::timeout(TTL, lost)
        .await
        .expect("ended within the ttl");
    assert!(matches!(error, Error::Lost(_)), "{error}");
    assert!(error.to_string().contains("no longer held"), "{error}");
    let end = lease.ended().expect("ended");
    assert!(end.gone, "{end:?}");
    assert!(!lease.release().await.expect("nothing to release"));
}

/// Nothing reaches the daemon any more (existing and new connections
/// black-holed): every attempt fails, and the lease ends by its own clock
/// a margin before the validity runs out, without the daemon's word; the
/// end says until when the lock may still be held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_daemon_ends_the_lease_by_its_clock() {
    let (_h, proxy, _c, lease, mut events) = lease_through_proxy("reattach/cut").await;
    let lost = lease.lost();
    let cut = Instant::now();
    proxy.set(Mode::Blackhole);
    event(&mut events, TTL, |e| matches!(e, LeaseEvent::Silent { .. })).await;
    let error = tokio::time::timeout(TTL, lost)
        .await
        .expect("ended within the ttl of the cut");
    println!("lost {:?} after the cut: {error}", cut.elapsed());
    assert!(
        error.to_string().contains("no extension arrived"),
        "{error}"
    );
    let end = lease.ended().expect("ended");
    assert!(!end.gone, "{end:?}");
    assert!(end.valid_until > Instant::now(), "{end:?}");
    assert!(end.valid_until <= cut + TTL, "{end:?}");
}

/// Dropping a lease that keeps its lock with its own Extends releases it
/// with a Release call: the resource is free at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_while_extending_releases_through_a_call() {
    let (h, proxy, _c, lease, mut events) = lease_through_proxy("reattach/dropped").await;
    proxy.freeze_existing();
    event(&mut events, TTL, |e| matches!(e, LeaseEvent::Silent { .. })).await;
    let dropped = Instant::now();
    drop(lease);
    let other = crate::client_of(&h, 0).await;
    acquirable_within(&other, "reattach/dropped", Duration::from_secs(3)).await;
    let free = dropped.elapsed();
    println!("free {free:?} after the drop");
    assert!(free < Duration::from_millis(1_000), "free after {free:?}");
}
