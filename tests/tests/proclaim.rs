//! `ElectionService.Proclaim` against five real masters and two daemon
//! replicas: the leader's new value shows on `Leader` and `Observe` under
//! the same term, from either replica; a term that no longer leads is
//! refused and changes nothing; the next leader starts from its own value;
//! and a read that meets the old value on two masters keeps the new one.

mod common;
mod election_calls;

use common::*;
use election_calls::*;
use redlockd::pb;
use redlockd::pb::campaign_response::Event;
use redlockd::pb::election_service_client::ElectionServiceClient;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;
use tonic::transport::Channel;
use tonic::Code;

against_both_servers!(
    a_leader_proclaims_on_either_replica,
    a_term_that_no_longer_leads_proclaims_nothing,
    a_read_keeps_the_newest_value_it_meets,
);

/// `wait_fallback` of a minute: an observer told within `next_change`'s
/// 10 s was woken by the Proclaim's notice, not by a periodic read.
fn no_fallback_reads(config: &mut redlockd::config::Config) {
    config.redlock.wait_fallback = Duration::from_secs(60);
}

async fn proclaim(
    c: &mut ElectionServiceClient<Channel>,
    name: &str,
    lead: &pb::Leadership,
    value: &str,
) -> Result<u64, tonic::Status> {
    let request = pb::ProclaimRequest {
        name: name.into(),
        token: lead.token.clone(),
        term: lead.term,
        value: value.into(),
    };
    Ok(c.proclaim(request).await?.into_inner().value_version)
}

async fn leader(c: &mut ElectionServiceClient<Channel>, name: &str) -> Option<pb::Leader> {
    let request = pb::LeaderRequest { name: name.into() };
    let answer = c.leader(request).await.expect("leader").into_inner();
    assert_eq!(answer.has_leader, answer.leader.is_some());
    answer.leader
}

/// Elected through replica 0, observed and proclaimed through replica 1:
/// each Proclaim answers a higher version, `Leader` on replica 0 reads it
/// with the same term, the observer on replica 1 is told each value at
/// once (woken by the notice: a minute's `wait_fallback`), and the
/// leadership is still kept (its next `kept` comes, not `lost`).
async fn a_leader_proclaims_on_either_replica(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, no_fallback_reads).await;
    h.start_daemon().await;
    let (mut e0, mut e1) = (elections(&h, 0).await, elections(&h, 1).await);
    let mut watch = e1
        .observe(pb::ObserveRequest {
            name: "moving".into(),
        })
        .await
        .expect("observe")
        .into_inner();
    let mut candidate = campaign_for(&mut e0, "moving", "10.0.0.1:80", 30_000).await;
    let lead = candidate.elected().await;
    let mut step = (0, u64::MAX);
    let first = next_leader(&mut watch, &mut step).await;
    assert_eq!((first.term, first.value_version), (lead.term, 0));
    assert_eq!(first.value, "10.0.0.1:80");

    let mut last_version = 0;
    for value in ["10.0.0.2:80", "10.0.0.3:80"] {
        let version = proclaim(&mut e1, "moving", &lead, value)
            .await
            .expect("proclaimed");
        assert!(version > last_version, "{version} after {last_version}");
        last_version = version;
        let read = leader(&mut e0, "moving").await.expect("a leader");
        assert_eq!(
            (read.term, read.value.as_str(), read.value_version),
            (lead.term, value, version)
        );
        let told = next_leader(&mut watch, &mut step).await;
        assert_eq!(
            (told.term, told.value.as_str(), told.value_version),
            (lead.term, value, version)
        );
    }
    // The first extension comes a third of the 30 s ttl after the grant.
    let kept = tokio::time::timeout(Duration::from_secs(30), candidate.events.message())
        .await
        .expect("an event within the ttl")
        .expect("stream ok")
        .and_then(|e| e.event);
    match kept {
        Some(Event::Kept(kept)) => assert_eq!(kept.term, lead.term),
        other => panic!("the leadership goes on: {other:?}"),
    }
}

/// A Proclaim by a wrong term, a malformed token or an unprintable value
/// is refused (FAILED_PRECONDITION, INVALID_ARGUMENT naming the field) and
/// changes nothing; after the leader resigns, its Proclaim is
/// FAILED_PRECONDITION and leaves no leader behind; the next leader is
/// read with its own value at version 0 (the old leader's versions do not
/// carry over), and then with its own proclaimed value.
async fn a_term_that_no_longer_leads_proclaims_nothing(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut e = elections(&h, 0).await;
    let mut a = campaign(&mut e, "refusals", "a").await;
    let lead_a = a.elected().await;
    let mut versions = Vec::new();
    for _ in 0..3 {
        let version = proclaim(&mut e, "refusals", &lead_a, "a2")
            .await
            .expect("proclaimed");
        versions.push(version);
    }
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    let wrong_term = pb::Leadership {
        term: 0,
        ..lead_a.clone()
    };
    let refused = proclaim(&mut e, "refusals", &wrong_term, "x")
        .await
        .expect_err("no term");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("term"), "{}", refused.message());

    let wrong_term = pb::Leadership {
        term: lead_a.term + 1,
        ..lead_a.clone()
    };
    let refused = proclaim(&mut e, "refusals", &wrong_term, "x")
        .await
        .expect_err("not this term");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    let forged = pb::Leadership {
        token: "not-a-token".into(),
        ..lead_a.clone()
    };
    let refused = proclaim(&mut e, "refusals", &forged, "x")
        .await
        .expect_err("malformed token");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("token"), "{}", refused.message());
    let refused = proclaim(&mut e, "refusals", &lead_a, "bad\nvalue")
        .await
        .expect_err("a control character");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("value"), "{}", refused.message());
    let read = leader(&mut e, "refusals").await.expect("a leader");
    assert_eq!(
        (read.value.as_str(), read.value_version),
        ("a2", versions[2])
    );

    a.resign().await;
    assert!(matches!(a.next_but_kept().await, Some(Event::Resigned(_))));
    let late = proclaim(&mut e, "refusals", &lead_a, "too late")
        .await
        .expect_err("resigned");
    assert_eq!(late.code(), Code::FailedPrecondition, "{late:?}");
    assert!(leader(&mut e, "refusals").await.is_none());

    let mut b = campaign(&mut e, "refusals", "b").await;
    let lead_b = b.elected().await;
    assert!(lead_b.term > lead_a.term);
    let read = leader(&mut e, "refusals").await.expect("b leads");
    assert_eq!(
        (read.term, read.value.as_str(), read.value_version),
        (lead_b.term, "b", 0)
    );
    let version = proclaim(&mut e, "refusals", &lead_b, "b2")
        .await
        .expect("proclaimed");
    let read = leader(&mut e, "refusals").await.expect("b leads");
    assert_eq!(
        (read.term, read.value.as_str(), read.value_version),
        (lead_b.term, "b2", version)
    );
}

/// A Proclaim that two masters missed: masters 0 and 1 are put back to
/// the campaign's value (the record as before the Proclaim), and masters 2
/// and 3 frozen, so a read hears 0, 1 and 4 only: two old values and one
/// new. It answers the new one, by its version; a read that counted
/// values, or kept any record, could answer the old.
async fn a_read_keeps_the_newest_value_it_meets(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut e = elections(&h, 0).await;
    let mut a = campaign_for(&mut e, "ranked", "old", 30_000).await;
    let lead = a.elected().await;
    let version = proclaim(&mut e, "ranked", &lead, "new")
        .await
        .expect("proclaimed");
    let fence = "redlock:fence:\u{1e}election/ranked";
    for i in 0..2 {
        h.raw(i, "HSET", vec![fence.into(), "owner".into(), "old".into()])
            .await;
        h.raw(i, "HDEL", vec![fence.into(), "pv".into()]).await;
        let owner = h.raw(i, "HGET", vec![fence.into(), "owner".into()]).await;
        assert_eq!(owner.as_string().as_deref(), Some("old"), "master {i}");
    }
    let pids: Vec<u32> = (2..4).map(|i| h.masters.pid(i).expect("running")).collect();
    let signal = |signal: &str, pid: u32| {
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    };
    for &pid in &pids {
        signal("-STOP", pid);
    }
    let read = leader(&mut e, "ranked").await;
    for &pid in &pids {
        signal("-CONT", pid);
    }
    let read = read.expect("a leader, read from 0, 1 and 4");
    assert_eq!(
        (read.term, read.value.as_str(), read.value_version),
        (lead.term, "new", version)
    );
}
