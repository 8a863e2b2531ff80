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
    pub(crate) fn tolerated(self) -> usize {
        self.masters - self.needed
    }
}

/// Where a round stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
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
    /// Of `no`, the refusals of a free key whose lock-delay still ran
    /// ([`Vote::Delayed`]).
    delayed: usize,
    /// Masters that did not answer in time or answered with an error.
    failed: usize,
    /// Of `failed`, those silent at the round's deadline although they
    /// time their commands out themselves ([`Vote::Late`]): the daemon's
    /// own backlog, not the masters'.
    late: usize,
}

/// One master's answer in a round, as a [`Tally`] counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vote {
    /// Granted, extended, deleted, holds.
    Yes,
    /// Held by someone else, token not there.
    No,
    /// A no: the key was free, but the lock-delay of a holder that did not
    /// release it still ran on this master. Counted apart so that the
    /// caller is not told a free resource is held by someone.
    Delayed,
    /// No answer in time, an error, or an answer that does not count
    /// (a master not trusted now).
    Failed,
    /// Still silent at the round's deadline although the master times its
    /// commands out itself, `node_timeout` after they are written
    /// (`Master::bounds_own_commands`): a written command always ends by
    /// then with an answer or a timeout error, so a silence at the deadline
    /// means the command, or its answer, was still waiting in the daemon's
    /// own queue. Counts as failed; kept apart so that the outcome blames
    /// the daemon's backlog, not the masters ([`Tally::backlogged`]).
    Late,
}

impl Tally {
    /// An empty tally for one round.
    pub(crate) fn new(quorum: Quorum) -> Tally {
        Tally {
            quorum,
            yes: 0,
            no: 0,
            delayed: 0,
            failed: 0,
            late: 0,
        }
    }

    /// Counts one master's answer: the only way a tally changes, so that
    /// no caller can count a master twice in one field and not another.
    pub(crate) fn count(&mut self, vote: Vote) {
        match vote {
            Vote::Yes => self.yes += 1,
            Vote::No => self.no += 1,
            Vote::Delayed => {
                self.no += 1;
                self.delayed += 1;
            }
            Vote::Failed => self.failed += 1,
            Vote::Late => {
                self.failed += 1;
                self.late += 1;
            }
        }
    }

    /// Masters that said yes so far.
    pub(crate) fn yes(&self) -> usize {
        self.yes
    }

    /// Masters that said no so far.
    pub(crate) fn no(&self) -> usize {
        self.no
    }

    /// Of the no answers, those of a running lock-delay ([`Vote::Delayed`]).
    pub(crate) fn delayed(&self) -> usize {
        self.delayed
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
    pub(crate) fn backlogged(&self) -> bool {
        self.late > 0 && self.failed - self.late <= self.quorum.tolerated()
    }

    /// The quorum this tally counts against.
    pub fn quorum(&self) -> Quorum {
        self.quorum
    }

    /// Where the round stands.
    pub(crate) fn decision(&self) -> Decision {
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
    pub(crate) fn refused_by_majority(&self) -> bool {
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
    pub(crate) fn held(&self) -> bool {
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
    pub(crate) fn settled(&self) -> bool {
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
        write!(f, "{} yes, {} no", self.yes, self.no)?;
        if self.delayed > 0 {
            write!(f, " ({} in a lock_delay)", self.delayed)?;
        }
        write!(f, ", {} failed", self.failed)?;
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
mod tests;
