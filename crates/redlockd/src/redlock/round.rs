//! One round: a command sent to several masters at once, and the answers
//! counted until the round is decided or its deadline passes.
//!
//! Commands are queued for their masters synchronously ([`Master`]), so a
//! round needs no task per command: it stops *listening* once decided
//! without *cancelling* anything, and the answers still to come (the
//! stragglers) are dropped, or handed to a caller that wants them.

use super::claim::Claim;
use super::master::{AcquireVote, Ending, ExtendVote, Master};
use super::quorum::Vote;
use super::{LockKeys, NodeError, Redlock, Tally, Token};
use futures::future::{BoxFuture, FutureExt};
use futures::stream::{FuturesUnordered, StreamExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How many `node_timeout`s a round waits, past its own `node_timeout`,
/// for commands still queued in the daemon when every master bounds its
/// commands from their send ([`Master::bounds_own_commands`]). A backstop
/// only: admission (`super::admission`) keeps at most a few hundred
/// operations per master out at once, which its in-flight batches
/// (`crate::valkey::batch`) carry within about one `node_timeout` even with
/// the master at the edge of timing out; the backstop bounds a round
/// whatever happens (4 × 50 ms at the defaults).
pub(crate) const QUEUE_ALLOWANCE: u32 = 3;

/// One master's reply in a round, tagged with the master's index.
pub(crate) type Answer = (usize, Result<Reply, NodeError>);

/// How long [`Redlock::listen`] listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// Until the round's outcome and its reason are known
    /// ([`Tally::settled`]): a vote.
    Decided,
    /// Until every master answered: a release, whose point is to know
    /// where the deletes landed, whatever the first answers say. Every
    /// master's answer counts, trusted or not: quarantine keeps a master
    /// that may have lost keys from voting for grants, but its answer to a
    /// delete is a fact about its keys (it deleted the token's key, or had
    /// none), so a release with every master answering is never
    /// UNAVAILABLE because some were quarantined.
    AllAnswered,
}

/// The answers of a round still to come.
pub(crate) type Pending = FuturesUnordered<BoxFuture<'static, Answer>>;

/// What a round is about: the resource's keys and the token, shared by the
/// per-master tasks.
#[derive(Debug)]
pub(crate) struct Subject {
    /// The resource's keys.
    pub keys: LockKeys,
    /// The resource itself (for release notices).
    pub resource: String,
    /// The token the round acts for.
    pub token: Token,
    /// The epoch of the acquisition the round acts for, when it has a
    /// request id (`super::claim`): its releases and extensions carry it.
    pub epoch: Option<super::Epoch>,
}

/// The command a round sends to each master.
#[derive(Debug, Clone)]
pub(crate) enum Command {
    /// See [`Master::acquire`].
    Acquire {
        /// Lease length.
        ttl: Duration,
        /// The proposed fence (see `super::fence`).
        proposal: super::fence::Proposal,
        /// The waiter marker's ttl where refused (zero: not waiting).
        waiter_marker: Duration,
        /// Who the grant is for: recorded where the proposal is taken.
        holder: Arc<super::Holder>,
    },
    /// See [`Master::commit_fence`].
    CommitFence {
        /// The grant's fence.
        fence: u64,
        /// Fence hash expiry.
        fence_ttl: Duration,
        /// The lock's ttl.
        ttl: Duration,
        /// Who the grant is for.
        holder: Arc<super::Holder>,
    },
    /// See [`Master::extend`].
    Extend {
        /// New lease length.
        ttl: Duration,
        /// Fence hash expiry.
        fence_ttl: Duration,
        /// A resuming acquisition takes the lock over ([`Claim::Take`]);
        /// else the subject's own claim ([`Claim::own`]).
        take: bool,
    },
    /// See [`Master::release`].
    Release {
        /// The encoded release notice to publish.
        notice: std::sync::Arc<str>,
        /// What becomes of the grant's terms.
        ending: Ending,
    },
    /// See [`Master::check`].
    Check,
    /// See [`Master::proclaim`].
    Proclaim {
        /// The leadership's term (its grant's fence).
        term: u64,
        /// The new value's version.
        version: u64,
        /// The new value.
        value: Arc<str>,
    },
}

/// A master's reply, one variant per [`Command`] (and the all-or-none acquire
/// of `super::kinds::multi`, which has no `Command`: its keys are many).
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// To [`Master::acquire_all`] (`super::kinds::multi`).
    AcquireAll(super::master::AcquireAllVote),
    /// To [`Command::Acquire`].
    Acquire(AcquireVote),
    /// To [`Command::CommitFence`].
    Committed(bool),
    /// To [`Command::Extend`].
    Extend(ExtendVote),
    /// To [`Command::Release`].
    Released(bool),
    /// To [`Command::Check`]: remaining PTTL if held.
    Held(Option<Duration>),
    /// To [`Command::Proclaim`] (see [`Master::proclaim`]).
    Proclaimed(Option<u64>),
}

impl Command {
    /// Queues the command for master `index`, `node` (see [`Master`]: by
    /// return it is on its way), and returns its answer, to come: one
    /// allocation besides the node's own future.
    pub(crate) fn send(
        &self,
        index: usize,
        node: &dyn Master,
        subject: &Subject,
    ) -> BoxFuture<'static, Answer> {
        fn tagged<T: Send + 'static>(
            index: usize,
            reply: BoxFuture<'static, Result<T, NodeError>>,
            as_reply: fn(T) -> Reply,
        ) -> BoxFuture<'static, Answer> {
            async move { (index, reply.await.map(as_reply)) }.boxed()
        }
        let (keys, token) = (&subject.keys, &subject.token);
        match self {
            Command::Acquire {
                ttl,
                proposal,
                waiter_marker,
                holder,
            } => tagged(
                index,
                node.acquire(keys, token, *ttl, *proposal, *waiter_marker, holder),
                Reply::Acquire,
            ),
            Command::CommitFence {
                fence,
                fence_ttl,
                ttl,
                holder,
            } => tagged(
                index,
                node.commit_fence(keys, token, *fence, *fence_ttl, *ttl, holder),
                Reply::Committed,
            ),
            Command::Extend {
                ttl,
                fence_ttl,
                take,
            } => {
                let claim = match (*take, subject.epoch) {
                    (true, Some(epoch)) => Claim::Take(epoch),
                    (_, epoch) => Claim::own(epoch),
                };
                tagged(
                    index,
                    node.extend(keys, token, *ttl, *fence_ttl, claim),
                    Reply::Extend,
                )
            }
            Command::Release { notice, ending } => tagged(
                index,
                node.release(keys, token, notice, *ending, subject.epoch),
                Reply::Released,
            ),
            Command::Check => tagged(index, node.check(keys, token), Reply::Held),
            Command::Proclaim {
                term,
                version,
                value,
            } => tagged(
                index,
                node.proclaim(keys, token, *term, *version, value),
                Reply::Proclaimed,
            ),
        }
    }
}

impl Redlock {
    /// Sends `command` to the masters `targets` at once, feeding each reply to
    /// `on_answer` until the round is decided or `node_timeout` passes (the
    /// masters still silent then count as failed). Stragglers are not waited
    /// for, but not cancelled either (see the module doc).
    ///
    /// Every command is queued for its master before this returns its first
    /// answer, so any later command for the same key (the release after a
    /// failed attempt, a client's Release) reaches each master after this
    /// round's, never before: a straggling SET cannot land after its own
    /// cleanup.
    pub(super) async fn round(
        &self,
        subject: &Arc<Subject>,
        targets: impl Iterator<Item = usize>,
        command: Command,
        on_answer: impl FnMut(usize, Reply, &mut Tally),
    ) -> Tally {
        self.round_with_stragglers(subject, targets, command, on_answer)
            .await
            .0
    }

    /// [`Redlock::round`], also handing back the replies still to come, for
    /// a caller that wants to act on them later (Extend re-creates lost keys);
    /// the caller bounds how long it listens to them.
    pub(super) async fn round_with_stragglers(
        &self,
        subject: &Arc<Subject>,
        targets: impl Iterator<Item = usize>,
        command: Command,
        mut on_answer: impl FnMut(usize, Reply, &mut Tally),
    ) -> (Tally, Pending) {
        let deadline = self.round_deadline(Instant::now());
        let mut pending = self.send_to(subject, targets, &command);
        let mut tally = Tally::new(self.quorum);
        self.listen(
            &mut pending,
            deadline,
            self.silent_vote(),
            &mut tally,
            Until::Decided,
            &mut on_answer,
        )
        .await;
        (tally, pending)
    }

    /// When a round that starts sending at `start` stops waiting for its
    /// masters. If every master times its commands out itself from their
    /// actual send ([`Master::bounds_own_commands`]), `node_timeout` must not
    /// also count from `start`: a command may wait in the daemon's queue
    /// first, and that wait is the daemon's doing, not the master's. The
    /// round then waits up to [`QUEUE_ALLOWANCE`] more `node_timeout`s as a
    /// backstop. Otherwise (test fakes that never time out by themselves)
    /// the round's own `node_timeout` is the bound.
    pub(super) fn round_deadline(&self, start: Instant) -> Instant {
        if self.nodes.iter().all(|node| node.bounds_own_commands()) {
            start + self.longest_round()
        } else {
            start + self.settings.node_timeout
        }
    }

    /// The longest a round waits: `node_timeout`, then [`QUEUE_ALLOWANCE`].
    pub(super) fn longest_round(&self) -> Duration {
        self.settings.node_timeout * (1 + QUEUE_ALLOWANCE)
    }

    /// How a master still silent at a [`Redlock::round_deadline`] counts:
    /// [`Vote::Late`] (the daemon's backlog) when every master times its
    /// commands out itself from their send, since a command written to the
    /// master has then ended by itself well before that deadline; else
    /// [`Vote::Failed`] (test fakes, which only the round times out).
    pub(super) fn silent_vote(&self) -> Vote {
        match self.nodes.iter().all(|node| node.bounds_own_commands()) {
            true => Vote::Late,
            false => Vote::Failed,
        }
    }

    /// Queues `command` for every master of `targets`; their answers, to come.
    pub(super) fn send_to(
        &self,
        subject: &Arc<Subject>,
        targets: impl Iterator<Item = usize>,
        command: &Command,
    ) -> Pending {
        targets
            .map(|index| command.send(index, self.nodes[index].as_ref(), subject))
            .collect()
    }

    /// Counts the answers of `pending` into `tally` (an untrusted master's
    /// answer as a failure, see `Master::trusted`, except in a release:
    /// [`Until::AllAnswered`]) until `until` says to stop,
    /// every master answered, or `deadline` passed; masters still silent at
    /// the deadline count as `silent` ([`Redlock::silent_vote`] after a
    /// round's deadline, [`Vote::Failed`] after a shorter one).
    pub(super) async fn listen(
        &self,
        pending: &mut Pending,
        deadline: Instant,
        silent: Vote,
        tally: &mut Tally,
        until: Until,
        mut on_answer: impl FnMut(usize, Reply, &mut Tally),
    ) {
        let expiry = tokio::time::sleep_until(deadline);
        tokio::pin!(expiry);
        let mut heard = vec![false; self.nodes.len()];
        loop {
            let answer = tokio::select! {
                biased;
                answer = pending.next() => answer,
                () = &mut expiry => {
                    self.count_silent(&heard, pending.len(), silent, tally);
                    tracing::debug!(silent = pending.len(), "masters did not answer in time");
                    return;
                }
            };
            let Some((index, reply)) = answer else { return };
            if let Some(heard) = heard.get_mut(index) {
                *heard = true;
            }
            match reply {
                Ok(_) if until == Until::Decided && !self.nodes[index].trusted() => {
                    tally.count(Vote::Failed)
                }
                Ok(reply) => on_answer(index, reply, tally),
                Err(error) => self.count_failure(index, &error, tally),
            }
            if until == Until::Decided && tally.settled() {
                return;
            }
        }
    }

    /// Counts the `silent` masters still silent at a round's deadline (the
    /// ones not `heard`, when they are exactly the `still_pending`). A
    /// [`Vote::Late`] (the daemon's own backlog) stands unless the master
    /// is silent by itself (hung, stopped, unreachable: a batch to it timed
    /// out on its own silence, judged with the daemon's timers on time,
    /// `Master::is_silent`): then the command waiting for it in the daemon's
    /// queue waited for that master, so it counts as failed and the round
    /// is UNAVAILABLE, never the daemon's overload. A daemon starved of
    /// CPU, whose timers run late, still blames itself.
    fn count_silent(&self, heard: &[bool], still_pending: usize, silent: Vote, tally: &mut Tally) {
        let unheard: Vec<usize> = (0..heard.len()).filter(|&i| !heard[i]).collect();
        if silent != Vote::Late || unheard.len() != still_pending {
            for _ in 0..still_pending {
                tally.count(silent);
            }
            return;
        }
        for index in unheard {
            match self.nodes[index].is_silent() {
                true => tally.count(Vote::Failed),
                false => tally.count(Vote::Late),
            }
        }
    }

    /// The masters silent now (commands outstanding without an answer for
    /// `node_timeout`, or nothing at all answered during a round's length),
    /// as failures of a tally, when they are too many for a quorum: what a
    /// waiter that never got to attempt (others were ahead of it) tells its
    /// caller, UNAVAILABLE rather than "held".
    pub(super) fn silent_majority(&self) -> Option<Tally> {
        let since = Instant::now().checked_sub(self.longest_round())?;
        let mut tally = Tally::new(self.quorum);
        for node in &self.nodes {
            if node.is_silent() || !node.answered_since(since) {
                tally.count(Vote::Failed);
            }
        }
        (tally.failed() > self.quorum.tolerated()).then_some(tally)
    }

    pub(super) fn count_failure(&self, index: usize, error: &NodeError, tally: &mut Tally) {
        tally.count(Vote::Failed);
        tracing::debug!(node = self.nodes[index].name(), %error, "master did not answer");
    }
}
