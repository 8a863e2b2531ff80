//! The fence arithmetic (next fence, proposals, vouching), then the one-round
//! fenced grant (see [`super`]) on fake masters under paused time: which grants
//! skip the commit round, the fallback when a master's counter is above the
//! proposal, and fences across two engines (daemon replicas) sharing the
//! masters.

use super::*;
use crate::redlock::fake::{self, Behaviour, FakeMaster, Op};
use crate::redlock::{Holder, LockKeys, Master, Redlock, Token};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

fn read(max: u64, now_micros: u64) -> FenceRead {
    FenceRead {
        max,
        now_micros,
        took: false,
    }
}

fn took(max: u64, now_micros: u64) -> FenceRead {
    FenceRead {
        took: true,
        ..read(max, now_micros)
    }
}

fn proposal(fence: u64) -> Proposal {
    Proposal {
        fence,
        ..Proposal::NONE
    }
}

/// The counter wins when it is ahead of the clock.
#[test]
fn counter_above_clock() {
    assert_eq!(
        next_fence(Proposal::NONE, [read(500, 10), read(7, 20)]),
        501
    );
}

/// The clock wins after the fence hash expired (counter back at 0).
#[test]
fn clock_floor_after_expiry() {
    assert_eq!(
        next_fence(Proposal::NONE, [read(0, 1_000), read(0, 1_005)]),
        1_005
    );
}

/// An empty read set still yields a valid (non-zero) fence.
#[test]
fn never_zero() {
    assert_eq!(next_fence(Proposal::NONE, []), 1);
}

/// One round only when every counted master took the proposal.
#[test]
fn one_round_needs_every_master() {
    let p = proposal(1_000);
    assert!(one_round(p, [took(5, 990), took(999, 995), took(0, 998)]));
    assert!(!one_round(
        p,
        [took(5, 990), read(1_200, 995), took(0, 998)]
    ));
    assert!(!one_round(Proposal::NONE, [took(0, 0)]));
}

/// The fallback fence is above a proposal some masters took.
#[test]
fn fallback_above_taken_proposal() {
    let p = proposal(1_000);
    assert_eq!(next_fence(p, [took(5, 990), read(1_200, 995)]), 1_201);
    assert_eq!(next_fence(p, [took(5, 990), read(20, 995)]), 1_001);
}

/// Proposals strictly increase and follow the observed clock plus the lead.
#[tokio::test(start_paused = true)]
async fn proposals_increase_from_the_observed_clock() {
    let proposer = Proposer::new(Duration::from_millis(50), Duration::from_secs(3600));
    assert_eq!(proposer.propose(true), Proposal::NONE);
    proposer.observe([read(0, 1_000_000), read(0, 2_000_000)]);
    let first = proposer.propose(true).fence;
    assert_eq!(first, 2_050_000);
    assert_eq!(proposer.propose(true).fence, first + 1);
    assert_eq!(proposer.propose(false), Proposal::NONE);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(proposer.propose(true).fence, 3_050_000);
    // A clock read that went back never lowers proposals.
    proposer.observe([read(0, 10)]);
    assert_eq!(proposer.propose(true).fence, 3_050_001);
}

/// An Extend vouches for the one fence its masters agree on; when they
/// disagree (a failed attempt's stray record beside a request id's
/// token), only for a value on a quorum, never the largest.
#[test]
fn vouched_fences() {
    let q = crate::redlock::Quorum::majority(5).expect("5 > 0");
    assert_eq!(vouched(&[], q), None);
    assert_eq!(vouched(&[7], q), Some(7));
    assert_eq!(vouched(&[7, 7], q), Some(7));
    assert_eq!(vouched(&[7, 7, 9], q), None);
    assert_eq!(vouched(&[7, 9, 7, 7], q), Some(7));
    assert_eq!(vouched(&[9, 7, 9, 9, 7], q), Some(9));
}

/// A fence ttl within the window disables proposals.
#[test]
fn short_fence_ttl_proposes_nothing() {
    let proposer = Proposer::new(Duration::from_millis(50), Duration::from_millis(500));
    proposer.observe([read(0, 1_000_000)]);
    assert_eq!(proposer.propose(true), Proposal::NONE);
}

/// At the defaults a plain grant renews its fence hash's expiry once per
/// 21 hours of fences; where `fence_ttl` is not comfortably above what the
/// hash must outlive, at every grant.
#[test]
fn refresh_period_at_the_defaults_and_below() {
    let redlock = crate::config::Config::default().redlock;
    let window = proposal_window(redlock.node_timeout);
    let period = refresh_period(redlock.fence_ttl, redlock.fence_outlives(), window);
    assert_eq!(period, Duration::from_secs(21 * 60 * 60));
    let outlived = Duration::from_secs(60);
    let tight = (outlived + window) * 2 - Duration::from_millis(1);
    assert_eq!(
        refresh_period(tight, outlived, window),
        Duration::from_micros(1)
    );
    assert_eq!(
        refresh_period(tight + Duration::from_millis(1), outlived, window),
        (tight + Duration::from_millis(1)) / 8
    );
    assert_eq!(
        refresh_period(Duration::MAX, Duration::MAX, window),
        Duration::from_micros(1)
    );
}

proptest! {
    /// After any grant a fence hash keeps at least `fence_ttl - period -
    /// window`, and that still outlives the lock and its delays
    /// (`outlived`) and the proposal window.
    #[test]
    fn a_renewed_hash_outlives_its_lock(
        fence_ttl_s in 1u64..1_000_000,
        outlived_s in 1u64..1_000_000,
        window_ms in 1u64..100_000,
    ) {
        let (fence_ttl, outlived) = (Duration::from_secs(fence_ttl_s), Duration::from_secs(outlived_s));
        let window = Duration::from_millis(window_ms);
        prop_assume!(fence_ttl > outlived);
        let period = refresh_period(fence_ttl, outlived, window);
        let left = fence_ttl.saturating_sub(period + window);
        if period > Duration::from_micros(1) {
            prop_assert!(left > outlived, "{left:?} <= {outlived:?}");
            prop_assert!(left > window, "{left:?} <= {window:?}");
            prop_assert!(left >= fence_ttl / 2, "{left:?} < half of {fence_ttl:?}");
        }
    }

    /// The fence is strictly above every counter in the quorum, the
    /// proposal where taken, and no lower than any clock.
    #[test]
    fn above_every_counter(
        reads in proptest::collection::vec((0u64..u64::MAX - 1, 0u64..1u64 << 53, any::<bool>()), 1..7),
        fence in 0u64..1u64 << 53,
    ) {
        let p = proposal(fence);
        let got = next_fence(p, reads.iter().map(|&(m, t, k)| FenceRead { max: m, now_micros: t, took: k }));
        for (m, t, k) in reads {
            prop_assert!(got > m);
            prop_assert!(got >= t);
            if k {
                prop_assert!(got > fence);
            }
        }
    }
}

const MS: fn(u64) -> Duration = Duration::from_millis;
const TTL: Duration = Duration::from_secs(10);
const RESOURCE: &str = "orders/42";

/// Five masters whose clocks are a few milliseconds apart (NTP-synced).
fn close_clocks() -> Vec<Arc<FakeMaster>> {
    [0, 3, -2, 1, -4]
        .iter()
        .enumerate()
        .map(|(i, &skew)| Arc::new(FakeMaster::new(format!("fake{i}"), skew)))
        .collect()
}

fn engine(fakes: &[Arc<FakeMaster>]) -> Redlock {
    Redlock::new(fake::as_nodes(fakes), fake::settings(MS(50))).expect("five masters")
}

/// Fence commits each master received so far.
fn commits(fakes: &[Arc<FakeMaster>]) -> Vec<usize> {
    fakes
        .iter()
        .map(|f| f.calls().iter().filter(|c| c.op == Op::CommitFence).count())
        .collect()
}

/// The first grant has no clock to propose from and commits; every later
/// one takes the proposal on its quorum and sends no commit, with a
/// greater fence each time, which Extend reports back.
#[tokio::test(start_paused = true)]
async fn grants_after_the_first_take_one_round() {
    let fakes = close_clocks();
    let engine = engine(&fakes);
    let first = engine
        .acquire(RESOURCE, TTL, Duration::ZERO)
        .await
        .expect("free");
    assert_eq!(commits(&fakes), [1; 5]);
    assert_eq!(engine.fence_commit_rounds(), 1);
    engine
        .release(RESOURCE, &first.token)
        .await
        .expect("release");
    let mut last = first.fence;
    for i in 0..20 {
        tokio::time::advance(MS(3)).await;
        let lock = engine
            .acquire(RESOURCE, TTL, Duration::ZERO)
            .await
            .expect("free");
        assert!(lock.fence > last, "grant {i}: {} after {last}", lock.fence);
        assert_eq!(commits(&fakes), [1; 5], "grant {i} sent a commit");
        let extended = engine
            .extend(RESOURCE, &lock.token, TTL)
            .await
            .expect("held");
        assert_eq!(
            extended.fence, lock.fence,
            "Extend reports the grant's fence"
        );
        engine
            .release(RESOURCE, &lock.token)
            .await
            .expect("release");
        last = lock.fence;
    }
    assert_eq!(engine.fence_commit_rounds(), 1);
    // The fence follows the masters' clock (plus the 50 ms lead).
    let keys = LockKeys::new("t:", RESOURCE);
    assert!(fakes[0].fence_max(&keys) >= fakes[0].wall_micros());
}

/// A master whose counter is above the proposal: the grant falls back to
/// the commit round, with a fence above that counter, and the next grant
/// (proposing above it now) is back to one round once that counter is
/// below its proposals.
#[tokio::test(start_paused = true)]
async fn a_counter_above_the_proposal_falls_back_to_the_commit() {
    let fakes = close_clocks();
    let engine = engine(&fakes);
    let keys = LockKeys::new("t:", RESOURCE);
    let warm = engine
        .acquire(RESOURCE, TTL, Duration::ZERO)
        .await
        .expect("free");
    engine
        .release(RESOURCE, &warm.token)
        .await
        .expect("release");
    // Another grant (an older daemon, a fast clock) left master 2 far ahead.
    let ahead = fakes[2].wall_micros() + 60_000_000;
    let other = Token::generate().expect("token");
    fakes[2].hold(&keys, &other, MS(1));
    let planted = fakes[2].commit_fence(
        &keys,
        &other,
        ahead,
        Duration::from_secs(3600),
        MS(1),
        &Holder::default(),
    );
    assert!(planted.await.expect("fake answers"));
    tokio::time::advance(MS(2)).await;
    let lock = engine
        .acquire(RESOURCE, TTL, Duration::ZERO)
        .await
        .expect("free");
    assert_eq!(engine.fence_commit_rounds(), 2, "the fallback commit ran");
    assert_eq!(lock.fence, ahead + 1, "one above the counter that refused");
    let extended = engine
        .extend(RESOURCE, &lock.token, TTL)
        .await
        .expect("held");
    assert_eq!(extended.fence, lock.fence);
    engine
        .release(RESOURCE, &lock.token)
        .await
        .expect("release");
    // Proposals stay about the clock, below master 2's counter: a quorum
    // that includes master 2 keeps falling back, each time above it.
    let next = engine
        .acquire(RESOURCE, TTL, Duration::ZERO)
        .await
        .expect("free");
    assert!(next.fence > lock.fence);
}

/// A master whose clock is far from the others is outside the proposal
/// window: it does not take the proposal, and grants whose quorum counts it
/// fall back; fences still increase.
#[tokio::test(start_paused = true)]
async fn a_master_with_a_far_clock_does_not_take_proposals() {
    let fakes: Vec<_> = [0, 3, 5_000, 1, -4]
        .iter()
        .enumerate()
        .map(|(i, &skew)| Arc::new(FakeMaster::new(format!("fake{i}"), skew)))
        .collect();
    let engine = engine(&fakes);
    let keys = LockKeys::new("t:", RESOURCE);
    let mut last = 0;
    for _ in 0..5 {
        let lock = engine
            .acquire(RESOURCE, TTL, Duration::ZERO)
            .await
            .expect("free");
        assert!(lock.fence > last);
        last = lock.fence;
        engine
            .release(RESOURCE, &lock.token)
            .await
            .expect("release");
        tokio::time::advance(MS(1)).await;
    }
    // Every grant fell back: master 2 (counted in every quorum of five
    // instant masters) never took a proposal of a clock 5 s behind its own.
    assert_eq!(engine.fence_commit_rounds(), 5);
    assert!(fakes[2].fence_max(&keys) >= last);
}

/// Two engines (daemon replicas) alternate grants of one resource, each
/// proposing from its own estimate; some grants expire instead of being
/// released, and a slow master turns some answers into stragglers. Fences
/// strictly increase, and most grants after the first of each engine take
/// one round.
#[tokio::test(start_paused = true)]
async fn fences_increase_across_two_engines() {
    let fakes = close_clocks();
    let engines = [engine(&fakes), engine(&fakes)];
    let mut last = 0;
    for i in 0..200usize {
        let engine = &engines[i % 2];
        fakes[i % 5].set(match i % 3 {
            0 => Behaviour::Slow(MS(20)),
            _ => Behaviour::Up,
        });
        let lock = engine
            .acquire(RESOURCE, MS(500), Duration::ZERO)
            .await
            .unwrap_or_else(|e| panic!("grant {i}: {e}"));
        assert!(lock.fence > last, "grant {i}: {} after {last}", lock.fence);
        last = lock.fence;
        fakes[i % 5].set(Behaviour::Up);
        if i % 4 == 0 {
            tokio::time::advance(MS(600)).await;
        } else {
            engine
                .release(RESOURCE, &lock.token)
                .await
                .expect("release");
            tokio::time::advance(MS(1)).await;
        }
    }
    let fallbacks: u64 = engines.iter().map(Redlock::fence_commit_rounds).sum();
    assert!(
        fallbacks < 40,
        "{fallbacks} of 200 grants took the commit round"
    );
}
