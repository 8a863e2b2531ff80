//! Hold sessions through the `Lease`: granted, extended, released; lost
//! when an operator force-releases, when the masters go, when the daemon
//! drains; dropped, the lock is released; granted after a wait longer than
//! the ttl.

use crate::{acquirable_within, client_of, start};
use redlockd_client::Error;
use redlockd_proto::pb;
use redlockd_proto::pb::lock_admin_service_client::LockAdminServiceClient;
use redlockd_testkit::harness::{eventually, Harness};
use redlockd_testkit::masters::Flavor;
use redlockd_testkit::proxy::Proxy;
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_secs(30);

/// A lease holds the lock (others are refused), check passes, release
/// says it was held, and the resource is free again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_and_release() {
    let (_h, c) = start().await;
    let lease = c.hold("sessions/basic", TTL).await.expect("hold");
    assert!(lease.fence() > 0);
    assert_eq!(lease.resource(), "sessions/basic");
    lease.check().expect("held");
    assert!(!format!("{lease:?}").contains(lease.token()));
    let other = c.acquire("sessions/basic", TTL).await.expect_err("held");
    assert!(matches!(other, Error::Held(_)), "{other}");
    let validation = c.validate(&lease.lock()).await.expect("validate");
    assert!(validation.held);
    assert!(lease.release().await.expect("release"));
    let next = c
        .acquire("sessions/basic", TTL)
        .await
        .expect("free at once");
    c.release(&next).await.expect("release");
}

/// The daemon extends a short lock while the session lasts: extensions
/// arrive, the validity moves forward, check keeps passing past the ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_is_extended() {
    let (_h, c) = start().await;
    let ttl = Duration::from_millis(600);
    let lease = c.hold("sessions/extended", ttl).await.expect("hold");
    let first = lease.lock().valid_until();
    eventually(Duration::from_secs(5), "three extensions", || {
        let n = lease.extensions();
        async move { n >= 3 }
    })
    .await;
    lease.check().expect("still held");
    assert!(lease.lock().valid_until() > first);
    assert!(lease.release().await.expect("release"));
}

/// A Hold waiting for a held resource is granted when the holder's lease is
/// released, with a greater fence; without a wait it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_waits_for_the_holder() {
    let (h, a) = start().await;
    let b = client_of(&h, 0).await;
    let first = a.hold("sessions/queue", TTL).await.expect("hold");
    let refused = b.hold("sessions/queue", TTL).await.expect_err("held");
    assert!(matches!(refused, Error::Held(_)), "{refused}");
    let waiter = tokio::spawn({
        let b = b.clone();
        async move {
            b.hold("sessions/queue", TTL)
                .wait(Duration::from_secs(20))
                .await
        }
    });
    // Lets the waiter's session begin; cannot make the test pass on its own.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fence = first.fence();
    assert!(first.release().await.expect("release"));
    let second = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("granted after the release")
        .expect("task")
        .expect("lease");
    assert!(second.fence() > fence);
    assert!(second.release().await.expect("release"));
}

/// An operator's ForceRelease: the daemon says `lost`; `lost()` resolves
/// with the reason and `check` fails from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_when_force_released() {
    let (h, c) = start().await;
    let lease = c.hold("sessions/forced", TTL).await.expect("hold");
    let lost = lease.lost();
    let channel = redlockd_testkit::client::endpoint(h.daemons[0].addr)
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let forced = LockAdminServiceClient::new(channel)
        .force_release(pb::ForceReleaseRequest {
            resource: "sessions/forced".into(),
            ..Default::default()
        })
        .await
        .expect("ForceRelease")
        .into_inner();
    assert!(forced.was_held);
    let error = tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("lost within 5 s");
    assert!(matches!(error, Error::Lost(_)), "{error}");
    assert!(
        error.to_string().contains("released by an operator"),
        "{error}"
    );
    let check = lease.check().expect_err("lost");
    assert!(matches!(check, Error::Lost(_)), "{check}");
    assert!(!lease.release().await.expect("release of a lost lease"));
}

/// Dropping a lease ends its session: the daemon releases the lock at once
/// (another client gets it long before the 30 s ttl), and a pending
/// `lost()` resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_lease_releases_it() {
    let (h, c) = start().await;
    let other = client_of(&h, 0).await;
    let lease = c.hold("sessions/dropped", TTL).await.expect("hold");
    let lost = lease.lost();
    drop(lease);
    let took = acquirable_within(&other, "sessions/dropped", Duration::from_secs(2)).await;
    println!("free {took:?} after the drop");
    let error = tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("lost() resolves after the drop");
    assert!(matches!(error, Error::Lost(_)), "{error}");
}

/// Three of the five masters stop: the daemon cannot extend, and the lease
/// says lost before its ttl has run out since the last extension could
/// have been made (as the conformance scenario bounds it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_when_the_majority_goes() {
    let (mut h, c) = start().await;
    let ttl = Duration::from_secs(2);
    let lease = c.hold("sessions/majority", ttl).await.expect("hold");
    let lost = lease.lost();
    let stopped = Instant::now();
    for i in 0..3 {
        h.masters.stop(i).expect("stop a master");
    }
    let error = tokio::time::timeout(ttl, lost)
        .await
        .expect("lost within the ttl");
    println!("lost {:?} after the stop: {error}", stopped.elapsed());
    assert!(matches!(error, Error::Lost(_)), "{error}");
    assert!(lease.check().is_err());
}

/// The network between client and daemon freezes (nothing moves, nothing
/// closes): no event can say the lock is gone, and the lease counts it lost
/// by its own clock, a margin before the last known validity ends, so
/// within the ttl of the freeze.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_by_the_clients_clock_when_the_network_freezes() {
    let (h, _) = start().await;
    let proxy = Proxy::start(h.daemons[0].addr).await.expect("proxy");
    let c = redlockd_client::Client::connect(proxy.addr().to_string())
        .await
        .expect("connect through the proxy");
    let ttl = Duration::from_secs(1);
    let lease = c.hold("sessions/frozen", ttl).await.expect("hold");
    let lost = lease.lost();
    let frozen = Instant::now();
    proxy.freeze_existing();
    let error = tokio::time::timeout(ttl, lost)
        .await
        .expect("lost within the ttl of the freeze");
    println!("lost {:?} after the freeze: {error}", frozen.elapsed());
    assert!(
        error.to_string().contains("no extension arrived"),
        "{error}"
    );
    assert!(lease.check().is_err());
}

/// A Hold granted after waiting longer than its ttl arrives lapsed by the
/// client's count (from when `acquire` was sent); the lease is handed out
/// once the first extension vouches for it, valid and extended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_after_a_wait_longer_than_the_ttl() {
    let (_h, c) = start().await;
    // Never released: expires after its ttl, which the waiter outwaits.
    let _held = c
        .acquire("sessions/late", Duration::from_millis(1_500))
        .await
        .expect("acquire");
    let ttl = Duration::from_millis(600);
    let sent = Instant::now();
    let lease = c
        .hold("sessions/late", ttl)
        .wait(Duration::from_secs(10))
        .await
        .expect("granted after the holder's expiry");
    assert!(sent.elapsed() > ttl, "granted after {:?}", sent.elapsed());
    lease.check().expect("vouched for by its first extension");
    assert!(lease.lock().remaining() > Duration::ZERO);
    eventually(Duration::from_secs(5), "extensions go on", || {
        let n = lease.extensions();
        async move { n >= 2 }
    })
    .await;
    lease.check().expect("still held");
    assert!(lease.release().await.expect("release"));
}

/// A daemon that drains: the lease says draining, and when the grace runs
/// out the daemon says `lost` (it stops extending the lock and leaves it
/// to expire), which ends the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_daemon_ends_the_lease() {
    let mut h = Harness::start_with(Flavor::Valkey, |config| {
        config.server.shutdown_grace = Duration::from_secs(2);
    })
    .await;
    let c = client_of(&h, 0).await;
    let lease = c.hold("sessions/drain", TTL).await.expect("hold");
    let lost = lease.lost();
    let daemon = h.daemons.pop().expect("the daemon");
    let stopping = tokio::spawn(daemon.stop(Duration::from_secs(20)));
    eventually(Duration::from_secs(5), "the lease says draining", || {
        let draining = lease.is_draining();
        async move { draining }
    })
    .await;
    lease.check().expect("still held while draining");
    let error = tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .expect("ended by the drain's end");
    assert!(error.to_string().contains("shutdown grace"), "{error}");
    stopping.await.expect("task").expect("the daemon stops");
}
