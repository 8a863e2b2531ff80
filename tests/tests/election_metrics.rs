//! The election metrics of a real daemon process over five real masters:
//! the term of the newest leadership begun through it, and the time each
//! resource stood free before a waiter behind its holder got it
//! (`redlock_handoff_gap_seconds`: for an election, the time without a
//! leader), by kind, never labelled with a name.

mod common;
mod election_calls;

use common::*;
use election_calls::*;
use redlockd::pb::election_service_client::ElectionServiceClient;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd_testkit::masters::Flavor;
use redlockd_testkit::metrics::counter;
use std::time::{Duration, Instant};

against_both_servers!(a_waiting_leader_counts_the_time_without_one);

const LIMIT: Duration = Duration::from_secs(10);
const GAP: &str = "redlock_handoff_gap_seconds";

/// A standby elected when the leader's client vanishes (its stream
/// dropped: the daemon releases at once and the release wakes the
/// standby) counts one gap of kind `election`, no longer than the test
/// took; the term gauge reads the standby's term. A waiter behind a
/// unary lock left to expire counts one of kind `lock`. Nobody waited
/// for the first leader: no gap for it.
async fn a_waiting_leader_counts_the_time_without_one(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let (_daemon, metrics, channel) = h.metered_daemon().await;
    let started = Instant::now();
    let mut elections = ElectionServiceClient::new(channel.clone());
    let mut first = campaign_for(&mut elections, "metered", "a", 30_000).await;
    let lead_a = first.elected().await;
    let gaps = |kind: &str| {
        counter(
            metrics,
            &format!("{GAP}_count"),
            &format!("kind=\"{kind}\""),
        )
    };
    assert_eq!(gaps("election"), 0.0, "nobody waited for the first leader");
    assert_eq!(
        counter(metrics, "redlock_election_term", ""),
        lead_a.term as f64
    );

    let mut standby = campaign_for(&mut elections, "metered", "b", 30_000).await;
    assert!(standby.quiet_for(Duration::from_millis(300)).await);
    drop(first);
    let lead_b = standby.elected().await;
    assert!(lead_b.term > lead_a.term);
    let took = started.elapsed().as_secs_f64();
    eventually(LIMIT, "the election's gap counted", || async {
        gaps("election") == 1.0
    })
    .await;
    let gap = counter(metrics, &format!("{GAP}_sum"), "kind=\"election\"");
    assert!(
        (0.0..took).contains(&gap),
        "a gap of {gap} s in a {took} s test"
    );
    assert_eq!(
        counter(metrics, "redlock_election_term", ""),
        lead_b.term as f64
    );
    assert_eq!(
        counter(metrics, "redlock_election_leaderships_total", ""),
        2.0
    );

    let mut locks = LockServiceClient::new(channel);
    acquire(&mut locks, "metered", 2_000, 0)
        .await
        .expect("a lock of the same name: apart from the election");
    acquire(&mut locks, "metered", 5_000, 10_000)
        .await
        .expect("granted once the first expired");
    eventually(LIMIT, "the lock's gap counted", || async {
        gaps("lock") == 1.0
    })
    .await;
    assert_eq!(gaps("election"), 1.0);
}
