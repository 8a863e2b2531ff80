//! Counting votes: majority sizes, what a round's votes decide, and their
//! properties.

use super::*;
use proptest::prelude::*;

/// N/2 + 1 for the usual sizes, none for zero.
#[test]
fn majority_sizes() {
    let needed = |n| Quorum::majority(n).map(Quorum::needed);
    assert_eq!(needed(0), None);
    assert_eq!(needed(1), Some(1));
    assert_eq!(needed(2), Some(2));
    assert_eq!(needed(3), Some(2));
    assert_eq!(needed(4), Some(3));
    assert_eq!(needed(5), Some(3));
    assert_eq!(Quorum::majority(5).map(Quorum::tolerated), Some(2));
}

/// With five masters, two losses are survivable and three are not.
#[test]
fn five_masters_survive_two_failures() {
    let q = Quorum::majority(5).expect("5 > 0");
    let mut t = Tally::new(q);
    t.failed = 2;
    assert_eq!(t.decision(), Decision::Pending);
    t.yes = 3;
    assert_eq!(t.decision(), Decision::Reached);
    let mut t = Tally::new(q);
    t.failed = 3;
    assert_eq!(t.decision(), Decision::Impossible);
    assert!(!t.refused_by_majority());
}

/// Silences at the round's deadline are the daemon's backlog: a round
/// lost to them, with the masters' own failures within what a quorum
/// tolerates, is backlogged; one the masters' failures alone lost is not.
#[test]
fn late_answers_blame_the_daemon_only_when_they_decided() {
    let q = Quorum::majority(5).expect("5 > 0");
    let mut t = Tally::new(q);
    t.count(Vote::Yes);
    t.count(Vote::Failed);
    for _ in 0..3 {
        t.count(Vote::Late);
    }
    assert_eq!((t.failed(), t.late()), (4, 3));
    assert_eq!(t.decision(), Decision::Impossible);
    assert!(t.backlogged());
    assert_eq!(
        t.to_string(),
        "1 yes, 0 no, 4 failed (3 still queued in the daemon) of 5 masters (quorum 3)"
    );
    let mut t = Tally::new(q);
    for _ in 0..3 {
        t.count(Vote::Failed);
    }
    t.count(Vote::Late);
    assert!(!t.backlogged(), "three masters failed by themselves");
    let mut t = Tally::new(q);
    for _ in 0..3 {
        t.count(Vote::Failed);
    }
    assert!(!t.backlogged(), "no silence at the deadline");
    assert_eq!(
        t.to_string(),
        "0 yes, 0 no, 3 failed of 5 masters (quorum 3)"
    );
}

/// Refusals alone decide "held by someone else"; mixed losses do not.
#[test]
fn refusal_versus_outage() {
    let q = Quorum::majority(5).expect("5 > 0");
    let mut t = Tally::new(q);
    t.no = 3;
    assert!(t.refused_by_majority());
    let mut t = Tally::new(q);
    t.no = 2;
    t.failed = 1;
    assert_eq!(t.decision(), Decision::Impossible);
    assert!(!t.refused_by_majority());
}

/// Two masters down and the resource held: the round listens past the
/// point where it is lost until the refusals show who holds it.
#[test]
fn held_while_masters_are_down_is_a_refusal() {
    let q = Quorum::majority(5).expect("5 > 0");
    let mut t = Tally::new(q);
    t.count(Vote::Failed);
    t.count(Vote::Failed);
    t.count(Vote::No);
    assert_eq!(t.decision(), Decision::Impossible);
    assert!(!t.settled(), "two answers to come could make it a refusal");
    t.count(Vote::No);
    assert!(!t.settled());
    t.count(Vote::No);
    assert!(t.settled());
    assert!(t.refused_by_majority());
}

/// The table of `docs/design/outcomes.md`, five masters: which rounds
/// without a grant are refusals (ABORTED) and which outages
/// (UNAVAILABLE), by (yes, no, failed).
#[test]
fn the_outcome_table() {
    let q = Quorum::majority(5).expect("5 > 0");
    let held = |yes: usize, no: usize, failed: usize| {
        let t = Tally {
            quorum: q,
            yes,
            no,
            delayed: 0,
            failed,
            late: 0,
        };
        assert_ne!(t.decision(), Decision::Reached);
        t.held()
    };
    // A majority refused: held, whatever else.
    assert!(held(0, 3, 2));
    assert!(held(2, 3, 0));
    assert!(held(1, 4, 0));
    // A quorum answered, most of them said held.
    assert!(held(1, 2, 2));
    assert!(held(0, 3, 0));
    // Ties and grants leaning: an outage (the silent could decide).
    assert!(!held(2, 2, 1));
    assert!(!held(2, 1, 2));
    // Fewer than a quorum answered: an outage, whatever they said.
    assert!(!held(0, 2, 3));
    assert!(!held(1, 1, 3));
    assert!(!held(0, 0, 5));
    assert!(!held(2, 0, 3));
}

/// A round is not settled while answers to come could still turn an
/// outage into a refusal, or a refusal by the live answers into an
/// outage.
#[test]
fn settled_waits_for_what_could_change_the_reason() {
    let q = Quorum::majority(5).expect("5 > 0");
    let mut t = Tally::new(q);
    for vote in [Vote::Yes, Vote::No, Vote::Failed, Vote::Failed] {
        t.count(vote);
    }
    assert!(!t.settled(), "a fifth 'no' would make it held");
    t.count(Vote::No);
    assert!(t.settled() && t.held());
    let mut t = Tally::new(q);
    for vote in [Vote::No, Vote::No, Vote::Yes, Vote::Failed] {
        t.count(vote);
    }
    assert!(t.held());
    assert!(!t.settled(), "a fifth 'yes' would make it a tie");
    t.count(Vote::Yes);
    assert!(t.settled() && !t.held());
}

/// Three failures: an outage whatever the other two say.
#[test]
fn three_failures_settle_at_once() {
    let q = Quorum::majority(5).expect("5 > 0");
    let mut t = Tally::new(q);
    for _ in 0..3 {
        t.count(Vote::Failed);
    }
    assert!(t.settled());
    assert!(!t.refused_by_majority());
}

/// A refusal of a free key whose lock-delay runs counts as a no, and is
/// said apart: the caller is told what keeps the resource, not "held by
/// another owner" when nobody holds it.
#[test]
fn lock_delay_refusals_are_said_apart() {
    let q = Quorum::majority(5).expect("5 > 0");
    let mut t = Tally::new(q);
    t.count(Vote::Yes);
    for _ in 0..3 {
        t.count(Vote::Delayed);
    }
    assert!(t.refused_by_majority());
    assert_eq!((t.no(), t.delayed()), (3, 3));
    assert_eq!(
        t.to_string(),
        "1 yes, 3 no (3 in a lock_delay), 0 failed of 5 masters (quorum 3)"
    );
    let only_delay = crate::redlock::LockError::Contended(t).to_string();
    assert!(
        only_delay.starts_with("resource is free but kept by the lock_delay"),
        "{only_delay}"
    );
    let mut mixed = Tally::new(q);
    mixed.count(Vote::No);
    mixed.count(Vote::Delayed);
    mixed.count(Vote::No);
    let mixed = crate::redlock::LockError::Contended(mixed).to_string();
    assert!(
        mixed.starts_with("resource is held by another owner, or kept by a lock_delay"),
        "{mixed}"
    );
    let mut held = Tally::new(q);
    for _ in 0..3 {
        held.count(Vote::No);
    }
    let held = crate::redlock::LockError::Contended(held).to_string();
    assert_eq!(
        held,
        "resource is held by another owner (0 yes, 3 no, 0 failed of 5 masters (quorum 3))"
    );
}

proptest! {
    /// A settled round stays settled and has a decision; a complete one is
    /// always settled; and a round settled as lost without a refusal can
    /// no longer become one.
    #[test]
    fn settled_is_final(votes in proptest::collection::vec(0u8..3, 0..5)) {
        let q = Quorum::majority(5).expect("5 > 0");
        let mut t = Tally::new(q);
        let mut was_settled = false;
        for v in votes {
            t.count(match v { 0 => Vote::Yes, 1 => Vote::No, _ => Vote::Failed });
            if was_settled {
                prop_assert!(t.settled());
            }
            was_settled = t.settled();
            if was_settled {
                prop_assert_ne!(t.decision(), Decision::Pending);
            }
        }
        if t.complete() {
            prop_assert!(t.settled());
        }
    }

    /// Two majorities of the same masters always share a master, and a
    /// round can never be both reached and impossible.
    #[test]
    fn majorities_intersect(n in 1usize..64, yes in 0usize..64, no in 0usize..64, failed in 0usize..64) {
        let q = Quorum::majority(n).expect("n > 0");
        prop_assert!(2 * q.needed() > n);
        prop_assert!(q.needed() <= n);
        let t = Tally { quorum: q, yes: yes.min(n), no: no.min(n - yes.min(n)), delayed: 0, failed: 0, late: 0 };
        let t = Tally { failed: failed.min(n - t.yes - t.no), ..t };
        if t.complete() {
            prop_assert_ne!(t.decision(), Decision::Pending);
        }
    }
}
