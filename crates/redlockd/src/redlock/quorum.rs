//! Counting the masters' answers to one round of a Redlock call.
//!
//! A round is decided as soon as either a majority said yes, or so many said
//! no or failed that a majority is out of reach. The engine stops waiting for
//! stragglers once the round is *settled*: decided, and with the reason of a
//! failure known (held elsewhere, or masters unreachable).

use std::fmt;

/// The size of a majority of `n` masters; built only through [`Quorum::majority`],
/// so it is never zero and never larger than `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quorum {
    masters: usize,
    needed: usize,
}

impl Quorum {
    /// The majority of `masters` (N/2 + 1); `None` for zero masters.
    pub fn majority(masters: usize) -> Option<Quorum> {
        (masters > 0).then_some(Quorum {
            masters,
            needed: masters / 2 + 1,
        })
    }

    /// Number of masters taking part.
    pub fn masters(self) -> usize {
        self.masters
    }

    /// Number of agreeing masters that make a decision.
    pub fn needed(self) -> usize {
        self.needed
    }

    /// How many masters may be lost (or say no) while a quorum is still possible.
    pub fn tolerated(self) -> usize {
        self.masters - self.needed
    }
}

/// Where a round stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Not decided yet: keep waiting for answers.
    Pending,
    /// A majority said yes.
    Reached,
    /// A majority can no longer say yes.
    Impossible,
}

/// The answers of one round so far, kept apart so a failure can say why it
/// failed (refused by a holder, or masters unreachable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    quorum: Quorum,
    /// Masters that said yes (granted, extended, deleted, holds).
    yes: usize,
    /// Masters that answered no (held by someone else, token not there).
    no: usize,
    /// Masters that did not answer in time or answered with an error.
    failed: usize,
    /// Of `failed`, those silent at the round's deadline although they
    /// time their commands out themselves ([`Vote::Late`]): the daemon's
    /// own backlog, not the masters'.
    late: usize,
}

/// One master's answer in a round, as a [`Tally`] counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vote {
    /// Granted, extended, deleted, holds.
    Yes,
    /// Held by someone else, token not there.
    No,
    /// No answer in time, an error, or an answer that does not count
    /// (a master not trusted now).
    Failed,
    /// Still silent at the round's deadline although the master times its
    /// commands out itself, `node_timeout` after they are written
    /// (`Node::bounds_own_commands`): a written command always ends by
    /// then with an answer or a timeout error, so a silence at the deadline
    /// means the command, or its answer, was still waiting in the daemon's
    /// own queue. Counts as failed; kept apart so that the outcome blames
    /// the daemon's backlog, not the masters ([`Tally::backlogged`]).
    Late,
}

impl Tally {
    /// An empty tally for one round.
    pub fn new(quorum: Quorum) -> Tally {
        Tally {
            quorum,
            yes: 0,
            no: 0,
            failed: 0,
            late: 0,
        }
    }

    /// Counts one master's answer: the only way a tally changes, so that
    /// no caller can count a master twice in one field and not another.
    pub fn count(&mut self, vote: Vote) {
        match vote {
            Vote::Yes => self.yes += 1,
            Vote::No => self.no += 1,
            Vote::Failed => self.failed += 1,
            Vote::Late => {
                self.failed += 1;
                self.late += 1;
            }
        }
    }

    /// Masters that said yes so far.
    pub fn yes(&self) -> usize {
        self.yes
    }

    /// Masters that said no so far.
    pub fn no(&self) -> usize {
        self.no
    }

    /// Masters that failed to answer so far.
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// Of the failed masters, those silent at the round's deadline because
    /// of the daemon's own backlog ([`Vote::Late`]).
    pub fn late(&self) -> usize {
        self.late
    }

    /// True when a round without a quorum failed because of the daemon's
    /// own backlog: some masters were [`Vote::Late`], and the masters' own
    /// failures alone would have left a majority possible. Such a round is
    /// the daemon's overload (RESOURCE_EXHAUSTED), never the masters'
    /// outage (UNAVAILABLE), which would tell callers to retry at once.
    pub fn backlogged(&self) -> bool {
        self.late > 0 && self.failed - self.late <= self.quorum.tolerated()
    }

    /// The quorum this tally counts against.
    pub fn quorum(&self) -> Quorum {
        self.quorum
    }

    /// Where the round stands.
    pub fn decision(&self) -> Decision {
        if self.yes >= self.quorum.needed {
            Decision::Reached
        } else if self.no + self.failed > self.quorum.tolerated() {
            Decision::Impossible
        } else {
            Decision::Pending
        }
    }

    /// True when the "no" answers alone rule out a majority: the outcome is a
    /// real answer (held by someone else / not held), not an outage.
    pub fn refused_by_majority(&self) -> bool {
        self.no > self.quorum.tolerated()
    }

    /// True when a round without a grant is a refusal ("held by someone
    /// else", ABORTED) rather than an outage (UNAVAILABLE), by the table of
    /// `docs/design/outcomes.md`: the "no" answers rule out a majority; or
    /// at least a quorum of masters answered and most of those that
    /// answered said held. With two of five masters silent and the
    /// resource held, the caller's own "yes" on a master the holder's key
    /// did not reach leaves the live answers at 1 yes and 2 no: the silent
    /// two could in theory have made a majority, but what the cluster
    /// says is "held", and a caller told UNAVAILABLE would alert and retry
    /// elsewhere for a lock that is simply taken.
    pub fn held(&self) -> bool {
        let answered = self.yes + self.no;
        self.refused_by_majority() || (answered >= self.quorum.needed && self.no > self.yes)
    }

    /// Whether more answers could still make [`Tally::held`] true.
    fn could_become_held(&self, to_come: usize) -> bool {
        self.no + to_come > self.quorum.tolerated()
            || (self.yes + self.no + to_come >= self.quorum.needed && self.no + to_come > self.yes)
    }

    /// True once both the outcome and its reason are known: a majority said
    /// yes; or the "no" answers alone rule out a majority (a real answer:
    /// held by someone else, not held); or a majority is out of reach and
    /// the answers still to come cannot change whether it is a refusal
    /// ([`Tally::held`]) or an outage.
    ///
    /// Why not stop at [`Decision::Impossible`]: with two masters down and
    /// the resource held, the first three answers can be two failures and
    /// one "no"; the round is lost, but stopping there would report an
    /// outage (UNAVAILABLE, "retry at once") for what is a held resource
    /// (ABORTED), which the two answers still to come would have shown.
    pub fn settled(&self) -> bool {
        let answered = self.yes + self.no + self.failed;
        let to_come = self.quorum.masters.saturating_sub(answered);
        match self.decision() {
            Decision::Reached => true,
            Decision::Pending => false,
            Decision::Impossible => {
                self.refused_by_majority()
                    || to_come == 0
                    || (!self.held() && !self.could_become_held(to_come))
            }
        }
    }

    /// True when every master has answered or failed.
    pub fn complete(&self) -> bool {
        self.yes + self.no + self.failed >= self.quorum.masters
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} yes, {} no, {} failed",
            self.yes, self.no, self.failed
        )?;
        if self.late > 0 {
            write!(f, " ({} still queued in the daemon)", self.late)?;
        }
        write!(
            f,
            " of {} masters (quorum {})",
            self.quorum.masters, self.quorum.needed
        )
    }
}

#[cfg(test)]
mod tests {
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
            let t = Tally { quorum: q, yes: yes.min(n), no: no.min(n - yes.min(n)), failed: 0, late: 0 };
            let t = Tally { failed: failed.min(n - t.yes - t.no), ..t };
            if t.complete() {
                prop_assert_ne!(t.decision(), Decision::Pending);
            }
        }
    }
}
