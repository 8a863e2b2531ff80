//! `ElectionService` against five real masters and two daemon replicas:
//! one leader per election, a standby elected when the leader resigns or
//! vanishes, terms strictly increasing, observers on either replica told
//! every change in term order, and elections apart from locks of the same
//! name.

mod common;
mod election_calls;

use common::*;
use election_calls::*;
use redlockd::pb;
use redlockd::pb::campaign_response::Event;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

against_both_servers!(
    a_standby_on_another_replica_takes_over,
    an_observer_on_another_replica_sees_a_new_leader_at_once,
    an_operator_inspects_lists_and_force_releases_an_election,
    an_election_and_a_lock_of_one_name_are_apart,
    resign_by_token_and_requests_checked,
    the_daemons_own_campaign_is_an_ordinary_leader,
);

/// A `wait_fallback` no test waits for: an observer woken in time was
/// woken by a notice.
fn no_fallback_reads(config: &mut redlockd::config::Config) {
    config.redlock.wait_fallback = Duration::from_secs(60);
}

/// A leader elected through one replica, and its resign, are seen at once
/// by an observer on another: the leadership notices wake it (with a 60 s
/// `wait_fallback` and a 30 s ttl, its next read would come long after the
/// 10 s `next_change` allows). A first leader, no leader once it resigned
/// (nobody waited, so no release notice), and a second leader.
async fn an_observer_on_another_replica_sees_a_new_leader_at_once(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, no_fallback_reads).await;
    h.start_daemon().await;
    let (mut e0, mut e1) = (elections(&h, 0).await, elections(&h, 1).await);
    let mut watch0 = e0
        .observe(pb::ObserveRequest {
            name: "notices".into(),
        })
        .await
        .expect("observe")
        .into_inner();
    let first = next_change(&mut watch0).await;
    assert!(!first.has_leader, "no leader yet: {first:?}");

    let mut last = 0;
    let mut a = campaign_for(&mut e1, "notices", "10.0.0.1:8080", 30_000).await;
    let lead_a = a.elected().await;
    let seen = observe_until(&mut watch0, &mut last, lead_a.term).await;
    assert_eq!(seen.value, "10.0.0.1:8080");

    a.resign().await;
    assert!(matches!(a.next_but_kept().await, Some(Event::Resigned(_))));
    let gone = next_change(&mut watch0).await;
    assert!(!gone.has_leader, "no leader after the resign: {gone:?}");

    let mut c = campaign(&mut e1, "notices", "10.0.0.3:8080").await;
    let lead_c = c.elected().await;
    assert!(lead_c.term > lead_a.term);
    let seen = observe_until(&mut watch0, &mut last, lead_c.term).await;
    assert_eq!(seen.value, "10.0.0.3:8080");
}

/// `LockAdmin` names an election by `election`: Inspect shows its leader
/// (the election's name, value as owner, term as fence; a lock of the same
/// name is another thing), List shows it as an election, ForceRelease ends
/// the leadership (its Campaign is told `lost`) and the standby is
/// elected; `resource` and `election` together are refused.
async fn an_operator_inspects_lists_and_force_releases_an_election(flavor: Flavor) {
    use redlockd::pb::lock_admin_service_client::LockAdminServiceClient;
    let h = Harness::start(flavor).await;
    let mut e = elections(&h, 0).await;
    let mut admin = LockAdminServiceClient::connect(format!("http://{}", h.daemons[0].addr))
        .await
        .expect("connect");
    let mut a = campaign(&mut e, "ops", "10.0.0.1:8080").await;
    let lead_a = a.elected().await;
    let mut b = campaign(&mut e, "ops", "10.0.0.2:8080").await;

    let seen = admin
        .inspect(pb::InspectRequest {
            election: "ops".into(),
            ..Default::default()
        })
        .await
        .expect("Inspect")
        .into_inner();
    let lock = seen.lock.expect("the leadership");
    assert!(seen.held);
    assert_eq!(
        (
            lock.election.as_str(),
            lock.resource.as_str(),
            lock.owner.as_str(),
            lock.fence
        ),
        ("ops", "", "10.0.0.1:8080", lead_a.term)
    );
    let lock_of_the_name = admin
        .inspect(pb::InspectRequest {
            resource: "ops".into(),
            ..Default::default()
        })
        .await
        .expect("Inspect")
        .into_inner();
    assert!(!lock_of_the_name.held, "{lock_of_the_name:?}");
    let listed = admin
        .list(pb::ListRequest::default())
        .await
        .expect("List")
        .into_inner();
    assert!(
        listed
            .locks
            .iter()
            .any(|l| l.election == "ops" && l.resource.is_empty()),
        "{listed:?}"
    );

    let both = admin
        .inspect(pb::InspectRequest {
            resource: "ops".into(),
            election: "ops".into(),
        })
        .await
        .expect_err("resource and election");
    assert_eq!(both.code(), Code::InvalidArgument);
    assert!(both.message().starts_with("election"), "{both:?}");

    let forced = admin
        .force_release(pb::ForceReleaseRequest {
            election: "ops".into(),
            ..Default::default()
        })
        .await
        .expect("ForceRelease")
        .into_inner();
    assert!(forced.was_held);
    assert_eq!(forced.lock.map(|l| l.election).as_deref(), Some("ops"));
    assert!(
        matches!(a.next_but_kept().await, Some(Event::Lost(_))),
        "the leader is told it lost"
    );
    let lead_b = b.elected().await;
    assert!(lead_b.term > lead_a.term);
}

/// Two replicas, two candidates, an observer on each replica: the first
/// leads and the standby waits; Leader reads it from either replica; the
/// leader resigns and the standby is elected with a higher term, seen by
/// both observers; the new leader's client vanishes and the election has
/// no leader.
async fn a_standby_on_another_replica_takes_over(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let (mut e0, mut e1) = (elections(&h, 0).await, elections(&h, 1).await);
    let mut watch0 = e0
        .observe(pb::ObserveRequest {
            name: "jobs".into(),
        })
        .await
        .expect("observe")
        .into_inner();
    let mut watch1 = e1
        .observe(pb::ObserveRequest {
            name: "jobs".into(),
        })
        .await
        .expect("observe")
        .into_inner();
    let first = next_change(&mut watch1).await;
    assert!(!first.has_leader, "no leader yet: {first:?}");

    let mut a = campaign(&mut e0, "jobs", "10.0.0.1:8080").await;
    let lead_a = a.elected().await;
    assert_eq!(lead_a.name, "jobs");
    assert_eq!(lead_a.value, "10.0.0.1:8080");
    assert!(lead_a.term > 0);
    let mut b = campaign(&mut e1, "jobs", "10.0.0.2:8080").await;
    assert!(
        b.quiet_for(Duration::from_millis(300)).await,
        "a standby was told something while another leads"
    );
    for c in [&mut e0, &mut e1] {
        let leader = c
            .leader(pb::LeaderRequest {
                name: "jobs".into(),
            })
            .await
            .expect("leader")
            .into_inner();
        assert!(leader.has_leader);
        let leader = leader.leader.expect("a leader");
        assert_eq!(
            (leader.value.as_str(), leader.term),
            ("10.0.0.1:8080", lead_a.term)
        );
        assert!(leader.since.is_some());
    }
    let (mut last0, mut last1) = (0, 0);
    observe_until(&mut watch0, &mut last0, lead_a.term).await;
    observe_until(&mut watch1, &mut last1, lead_a.term).await;

    a.resign().await;
    assert_eq!(
        a.next_but_kept().await,
        Some(Event::Resigned(pb::campaign_response::Resigned {
            was_leader: true
        }))
    );
    let lead_b = b.elected().await;
    assert_eq!(lead_b.value, "10.0.0.2:8080");
    assert!(
        lead_b.term > lead_a.term,
        "terms go up: {} then {}",
        lead_a.term,
        lead_b.term
    );
    let seen = observe_until(&mut watch0, &mut last0, lead_b.term).await;
    assert_eq!(seen.value, "10.0.0.2:8080");
    observe_until(&mut watch1, &mut last1, lead_b.term).await;

    // The leader's client vanishes: its leadership is released.
    drop(b);
    loop {
        let change = next_change(&mut watch0).await;
        if !change.has_leader {
            break;
        }
        assert!(change.leader.expect("leader").term > last0);
    }
}

/// An election named `jobs` and a lock on the resource `jobs` are held at
/// once: their keys differ.
async fn an_election_and_a_lock_of_one_name_are_apart(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut locks = h.client().await;
    let lock = acquire(&mut locks, "jobs", 10_000, 0)
        .await
        .expect("the lock");
    let mut e = elections(&h, 0).await;
    let mut candidate = campaign(&mut e, "jobs", "me").await;
    let leadership = candidate.elected().await;
    assert!(release(&mut locks, &lock).await.expect("release"));
    candidate.resign().await;
    assert!(matches!(
        candidate.next_but_kept().await,
        Some(Event::Resigned(pb::campaign_response::Resigned {
            was_leader: true
        }))
    ));
    assert_ne!(leadership.token, lock.token);
}

/// Resign by token from another call ends the leadership (the campaign
/// learns `lost` at its next extension); a second Resign finds none; bad
/// requests are INVALID_ARGUMENT naming the election's fields.
async fn resign_by_token_and_requests_checked(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut e = elections(&h, 0).await;
    let mut candidate = campaign(&mut e, "resigning", "me").await;
    let leadership = candidate.elected().await;
    let resign = pb::ResignRequest {
        name: "resigning".into(),
        token: leadership.token.clone(),
    };
    let resigned = e.resign(resign.clone()).await.expect("resign").into_inner();
    assert!(resigned.was_leader);
    let again = e.resign(resign).await.expect("resign").into_inner();
    assert!(!again.was_leader);
    let end = candidate.next_but_kept().await;
    assert!(
        matches!(end, Some(Event::Lost(_))),
        "expected `lost`, got {end:?}"
    );
    let leader = e
        .leader(pb::LeaderRequest {
            name: "resigning".into(),
        })
        .await
        .expect("leader")
        .into_inner();
    assert!(!leader.has_leader);

    let bad = e
        .leader(pb::LeaderRequest {
            name: "a\u{1e}b".into(),
        })
        .await
        .expect_err("a control character");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("name"), "{}", bad.message());
    let (requests, outgoing) = mpsc::channel(1);
    requests
        .send(pb::CampaignRequest {
            request: Some(pb::campaign_request::Request::Resign(
                pb::campaign_request::Resign {},
            )),
        })
        .await
        .expect("queue");
    let refused = e
        .campaign(ReceiverStream::new(outgoing))
        .await
        .expect_err("a campaign must start with `campaign`");
    assert_eq!(refused.code(), Code::InvalidArgument);
}

/// A daemon campaigning for its pod (`[[election]]`) leads as any
/// candidate does: `Leader` shows its value and term, and a client's
/// candidate waits behind it. (Its take-overs: tests/election_sidecar.rs.)
async fn the_daemons_own_campaign_is_an_ordinary_leader(flavor: Flavor) {
    fn campaigning(config: &mut redlockd::config::Config) {
        config.elections = vec![redlockd::config::ElectionConfig {
            name: "pods/leader".into(),
            value: "pod-1:8080".into(),
            ttl: Duration::from_secs(2),
            file: None,
        }];
    }
    let h = Harness::start_with(flavor, campaigning).await;
    let mut e = elections(&h, 0).await;
    let term = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    eventually(Duration::from_secs(10), "the daemon leads", || {
        let (mut e, term) = (e.clone(), term.clone());
        async move {
            let answer = e
                .leader(pb::LeaderRequest {
                    name: "pods/leader".into(),
                })
                .await
                .expect("leader")
                .into_inner();
            match answer.leader {
                Some(leader) if leader.value == "pod-1:8080" => {
                    term.store(leader.term, std::sync::atomic::Ordering::SeqCst);
                    true
                }
                _ => false,
            }
        }
    })
    .await;
    let term = term.load(std::sync::atomic::Ordering::SeqCst);
    let mut candidate = campaign(&mut e, "pods/leader", "client").await;
    assert!(
        candidate.quiet_for(Duration::from_millis(300)).await,
        "a candidate was told something while the daemon leads"
    );
    // Resigning through the daemon's own token is not a client's to do:
    // the candidate stays behind it while it leads.
    let leader = e
        .leader(pb::LeaderRequest {
            name: "pods/leader".into(),
        })
        .await
        .expect("leader")
        .into_inner()
        .leader
        .expect("still the daemon");
    assert_eq!((leader.value.as_str(), leader.term), ("pod-1:8080", term));
    candidate.resign().await;
}
