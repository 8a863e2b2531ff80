//! Holding a lock: a holder's Extend, Release and Validate, the release
//! sent to every master (with its notice, which wakes the waiters), and
//! the background re-creation of keys an Extend found lost.

use super::notices::Notice;
use super::round::{Command, Reply, Subject};
use super::{
    fence, recreate, round, token, validity, Claim, Decision, Ending, Epoch, ExtendVote, Lock,
    LockError, Redlock, Tally, Token, Vote, WakeWaiters,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Redlock {
    /// Resets the lock's time to live to `ttl` if `token` still holds it on a
    /// majority; the new validity counts from before the round.
    ///
    /// The answer carries the lock's own fence, as granted: the one the
    /// masters that extended it keep beside its token. When none of them
    /// has it any more (their fence records were lost with a restart), the
    /// fence cannot be vouched for and the call fails with
    /// [`LockError::FenceUnknown`] instead of answering a fence of 0, which
    /// would break "a later holder's fence is greater". The lock itself was
    /// extended; its holder should release it and acquire anew.
    ///
    /// This is a client's own Extend with its token: it acts whatever
    /// acquisition of the token's request id holds the lock ([`Claim::Any`]).
    pub async fn extend(
        &self,
        resource: &str,
        token: &Token,
        ttl: Duration,
    ) -> Result<Lock, LockError> {
        self.extend_claiming(resource, token, ttl, Claim::Any).await
    }

    /// [`Redlock::extend`] as `claim` says ([`claim`](super::claim)): a
    /// resuming acquisition takes the lock over with [`Claim::Take`].
    pub(crate) async fn extend_claiming(
        &self,
        resource: &str,
        token: &Token,
        ttl: Duration,
        claim: Claim,
    ) -> Result<Lock, LockError> {
        let (fence, lock) = self.extend_lease(resource, token, ttl, claim).await?;
        let fence = fence.ok_or(LockError::FenceUnknown)?;
        Ok(Lock { fence, ..lock })
    }

    /// [`Redlock::extend`] without the fence check, for a holder that knows
    /// its fence from the grant (a session): the fence the masters reported,
    /// if any, and the lock with the new validity (its `fence` is 0).
    pub(crate) async fn extend_lease(
        &self,
        resource: &str,
        token: &Token,
        ttl: Duration,
        claim: Claim,
    ) -> Result<(Option<u64>, Lock), LockError> {
        match token::members(token) {
            Some(members) => self.extend_multi(resource, &members, token, ttl).await,
            None => self.extend_lease_one(resource, token, ttl, claim).await,
        }
    }

    /// [`Redlock::extend_lease`] of one resource's key.
    pub(super) async fn extend_lease_one(
        &self,
        resource: &str,
        token: &Token,
        ttl: Duration,
        claim: Claim,
    ) -> Result<(Option<u64>, Lock), LockError> {
        let epoch = match claim {
            Claim::Any => None,
            Claim::Own(epoch) | Claim::Take(epoch) => Some(epoch),
        };
        let subject = self.subject_of(resource, token.clone(), epoch);
        let _permit = self.admission.extension().await?;
        let start = validity::Started::now();
        let command = Command::Extend {
            ttl,
            fence_ttl: self.settings.fence_ttl,
            take: matches!(claim, Claim::Take(_)),
        };
        let mut fences = Vec::with_capacity(self.nodes.len());
        let mut missing = Vec::new();
        let mut superseded = 0;
        let (votes, stragglers) =
            self.round_with_stragglers(&subject, self.all(), command, |index, reply, tally| {
                match reply {
                    Reply::Extend(ExtendVote::Extended { fence: seen }) => {
                        tally.count(Vote::Yes);
                        fences.extend(seen);
                    }
                    Reply::Extend(ExtendVote::Missing) => {
                        tally.count(Vote::No);
                        missing.push(index);
                    }
                    Reply::Extend(ExtendVote::Superseded) => {
                        tally.count(Vote::No);
                        superseded += 1;
                    }
                    _ => tally.count(Vote::No),
                }
            })
            .await;
        match votes.decision() {
            Decision::Reached => {
                let (validity, deadline) = start
                    .validity(ttl, self.settings.drift_factor)
                    .ok_or(LockError::Expired(votes))?;
                self.recreate_lost_keys(&subject, ttl, missing, stragglers);
                self.held.hold(token, deadline);
                let lock = Lock {
                    resource: resource.to_owned(),
                    token: token.clone(),
                    fence: 0,
                    validity,
                    deadline,
                    members: Vec::new(),
                    epoch,
                };
                Ok((fence::vouched(&fences, self.quorum), lock))
            }
            _ if votes.refused_by_majority() && superseded > 0 => Err(LockError::Superseded(votes)),
            _ if votes.refused_by_majority() => Err(LockError::NotHeld(votes)),
            _ => Err(LockError::no_quorum(votes)),
        }
    }

    /// A lock held on a majority is put back, in the background, on the
    /// masters that lost its key (a restart), including those whose answer
    /// arrives after the Extend was decided: a rolling restart of the masters
    /// then does not erode a long-held lock one master at a time. A release
    /// of the lock cancels it ([`recreate`]).
    pub(super) fn recreate_lost_keys(
        &self,
        subject: &Arc<Subject>,
        ttl: Duration,
        missing: Vec<usize>,
        stragglers: round::Pending,
    ) {
        let lease = recreate::Lease {
            ttl,
            fence_ttl: self.settings.fence_ttl,
        };
        self.recreations.start(
            self.nodes.clone(),
            subject,
            lease,
            self.settings.node_timeout,
            missing,
            stragglers,
        );
    }

    /// Deletes the lock on every master where `token` holds it, and wakes
    /// the resource's waiters. Returns whether it was still held on a
    /// majority; an error when too few masters answered to tell (the release
    /// was still sent to all of them). Pending re-creations of the lock are
    /// cancelled first, so none can put it back afterwards.
    ///
    /// This is the holder's release (Release, a Hold session's orderly end):
    /// before the grant's `hold_at_least` has run, the masters shorten the lock
    /// to end then instead of deleting it
    /// ([`Master::release`](super::Master::release)).
    ///
    /// This is a client's own Release with its token: it deletes whatever
    /// acquisition of the token's request id holds the lock.
    pub async fn release(&self, resource: &str, token: &Token) -> Result<bool, LockError> {
        self.release_as(resource, token, None, Ending::Released)
            .await
    }

    /// [`Redlock::release_now`] of an operator: whatever the grant's
    /// `hold_at_least` and whichever acquisition holds it.
    pub async fn release_now(&self, resource: &str, token: &Token) -> Result<bool, LockError> {
        self.release_as(resource, token, None, Ending::Forced).await
    }

    /// The release of `lock` by the acquisition that holds it (a session's
    /// end): deletes nothing where another acquisition of its request id
    /// took it over ([`claim`](super::claim)).
    pub async fn release_held(&self, lock: &Lock) -> Result<bool, LockError> {
        self.release_as(&lock.resource, &lock.token, lock.epoch, Ending::Released)
            .await
    }

    /// [`Redlock::release_held`] that deletes whatever the grant's
    /// `hold_at_least`, and ends its `lock_delay`: a grant nobody received.
    pub(crate) async fn release_held_now(&self, lock: &Lock) -> Result<bool, LockError> {
        self.release_as(&lock.resource, &lock.token, lock.epoch, Ending::Forced)
            .await
    }

    /// What is left of a lost `lock` (a session's, a leadership's), once
    /// its last validity is over: deleted whatever the grant's
    /// `hold_at_least`, but its `lock_delay` stays on the masters
    /// ([`Ending::Lapsed`]), as after any lock that ran out.
    pub(crate) async fn release_lapsed(&self, lock: &Lock) -> Result<bool, LockError> {
        self.release_as(&lock.resource, &lock.token, lock.epoch, Ending::Lapsed)
            .await
    }

    pub(super) async fn release_as(
        &self,
        resource: &str,
        token: &Token,
        epoch: Option<Epoch>,
        ending: Ending,
    ) -> Result<bool, LockError> {
        self.held.forget(token);
        match token::members(token) {
            Some(members) => self.release_multi(resource, &members, token, ending).await,
            None => self.release_one(resource, token, epoch, ending).await,
        }
    }

    /// [`Redlock::release_as`] of one resource's key.
    pub(super) async fn release_one(
        &self,
        resource: &str,
        token: &Token,
        epoch: Option<Epoch>,
        ending: Ending,
    ) -> Result<bool, LockError> {
        self.recreations.cancel(resource, token).await;
        let subject = self.subject_of(resource, token.clone(), epoch);
        let deadline = self.round_deadline(Instant::now());
        let tally = self
            .release_everywhere(
                &subject,
                WakeWaiters::AtOnce,
                ending,
                deadline,
                self.silent_vote(),
            )
            .await;
        match tally.decision() {
            Decision::Reached => Ok(true),
            _ if tally.refused_by_majority() => Ok(false),
            _ => Err(LockError::no_quorum(tally)),
        }
    }

    /// Whether `token` holds the lock on a majority, and for how much longer
    /// at least: the quorum-th largest remaining PTTL, less the time the round
    /// took and the drift allowance over that remaining time.
    pub async fn validate(
        &self,
        resource: &str,
        token: &Token,
    ) -> Result<Option<Duration>, LockError> {
        match token::members(token) {
            Some(members) => self.validate_multi(resource, &members, token).await,
            None => self.validate_one(resource, token).await,
        }
    }

    /// [`Redlock::validate`] of one resource's key.
    pub(super) async fn validate_one(
        &self,
        resource: &str,
        token: &Token,
    ) -> Result<Option<Duration>, LockError> {
        let subject = self.subject(resource, token.clone());
        let start = validity::Started::now();
        let mut remaining: Vec<Duration> = Vec::with_capacity(self.nodes.len());
        let votes = self
            .round(
                &subject,
                self.all(),
                Command::Check,
                |_, reply, tally| match reply {
                    Reply::Held(Some(pttl)) => {
                        tally.count(Vote::Yes);
                        remaining.push(pttl);
                    }
                    _ => tally.count(Vote::No),
                },
            )
            .await;
        match votes.decision() {
            Decision::Reached => {
                remaining.sort_unstable_by(|a, b| b.cmp(a));
                let quorum_th = remaining
                    .get(self.quorum.needed() - 1)
                    .copied()
                    .unwrap_or_default();
                Ok(validity::validity(
                    quorum_th,
                    start.elapsed(),
                    self.settings.drift_factor,
                ))
            }
            _ if votes.refused_by_majority() => Ok(None),
            _ => Err(LockError::no_quorum(votes)),
        }
    }

    /// Sends a compare-and-delete to every master and waits for all of them
    /// until `deadline`, so that when it returns nothing of this token is
    /// left on a master that answered. Every master publishes
    /// the release where it deleted; this replica's waiters are woken as
    /// `wake` says. A master still silent at `deadline` counts as `silent`
    /// (see [`Redlock::listen`]).
    pub(super) async fn release_everywhere(
        &self,
        subject: &Arc<Subject>,
        wake: WakeWaiters,
        ending: Ending,
        deadline: Instant,
        silent: Vote,
    ) -> Tally {
        let notice = Notice::new(&subject.resource);
        self.release_noticed(subject, notice, wake, ending, deadline, silent)
            .await
    }

    /// [`Redlock::release_everywhere`] announcing itself with `notice`
    /// (its caller knows the id: `multi`'s waiters tell their own
    /// clean-up's wake-ups from a holder's release by it).
    pub(super) async fn release_noticed(
        &self,
        subject: &Arc<Subject>,
        notice: Notice,
        wake: WakeWaiters,
        ending: Ending,
        deadline: Instant,
        silent: Vote,
    ) -> Tally {
        let command = Command::Release {
            notice: notice.encode().into(),
            ending,
        };
        let mut pending = self.send_to(subject, self.all(), &command);
        if wake == WakeWaiters::AtOnce {
            // Every delete is queued for its master ahead of anything the
            // woken waiter sends, so its SETs land after them.
            self.wake_waiters(&notice, true);
        }
        let mut tally = Tally::new(self.quorum);
        self.listen(
            &mut pending,
            deadline,
            silent,
            &mut tally,
            round::Until::AllAnswered,
            |_, reply, tally| match reply {
                Reply::Released(true) => tally.count(Vote::Yes),
                _ => tally.count(Vote::No),
            },
        )
        .await;
        if wake == WakeWaiters::IfDeleted && tally.yes() > 0 {
            self.wake_waiters(&notice, false);
        }
        if wake == WakeWaiters::NotSelf {
            if let Ok(mut seen) = self.seen_notices.lock() {
                seen.first_sighting(notice.id);
            }
        }
        tally
    }
}
