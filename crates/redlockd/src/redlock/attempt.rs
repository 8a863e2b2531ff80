//! One acquisition attempt: the acquire round, then, unless the acquire
//! took the proposed fence on the whole counted quorum, the fence commit
//! round (see [`super::fence`]). Whatever goes wrong, the token is released on
//! every master before the attempt returns.

use super::admission::Admitted;
use super::fence::{self, FenceRead};
use super::master::{AcquireVote, Ending};
use super::quorum::Vote;
use super::round::{Command, Reply, Subject};
use super::{
    validity, Deadline, Decision, Holder, Lock, LockError, Quorum, Redlock, Token, WakeWaiters,
};
use crate::metrics;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

mod resume;

/// Why an attempt failed, and when the current holder's lock frees up at the
/// latest, if the refusing masters said.
#[derive(Debug)]
pub(crate) struct Failure {
    /// What to tell the caller if this was the last attempt.
    pub error: LockError,
    /// Time until enough of the holder's keys expire for a majority to be
    /// free (see [`holder_free_in`]).
    pub holder_free_in: Option<Duration>,
    /// Some masters refused because the attempt's own token (a request
    /// id's) holds the key there: an earlier acquisition of the request id
    /// holds the lock. The attempt was not cleaned up; its caller resumes
    /// that lock ([`Redlock::attempt`]).
    pub own: bool,
}

impl From<LockError> for Failure {
    fn from(error: LockError) -> Failure {
        Failure {
            error,
            holder_free_in: None,
            own: false,
        }
    }
}

/// When a majority of masters will be free of the holder's keys: the
/// masters that granted us are free once we release; of the refusing ones,
/// the earliest expiries must make up the rest of the quorum.
pub(crate) fn holder_free_in(
    quorum: Quorum,
    granted: usize,
    mut refusals: Vec<Duration>,
) -> Option<Duration> {
    let missing = quorum.needed().saturating_sub(granted).max(1);
    refusals.sort_unstable();
    refusals.get(missing - 1).copied()
}

/// What one acquisition's attempts ran into, for metrics.
#[derive(Debug, Default)]
pub(crate) struct AttemptStats {
    /// Attempts made.
    pub attempts: u32,
    /// Whether any attempt found the resource held.
    pub contended: bool,
    /// The notice ids of the last failed attempt's clean-up releases (a lock on
    /// several resources, `super::kinds::multi`): its waiter tells their
    /// wake-ups from a holder's release by them.
    pub cleanup_notices: Vec<u64>,
    /// For a grant after a wait behind a holder: how long the resource
    /// stood free before it, as the waiter learned of the holder's end
    /// (see `Redlock::wait_in_queue`). For an election, the time without
    /// a leader.
    pub stood_free: Option<Duration>,
}

/// Whom an acquisition is for: the holder its grant records beside the
/// token, and the token a request id fixes (none: a fresh one per attempt).
#[derive(Clone, Copy)]
pub(super) struct Claimant<'a> {
    /// Owner and kind, recorded with the grant.
    pub(super) holder: &'a Arc<Holder>,
    /// The token derived from the request id, if any.
    pub(super) fixed: Option<&'a Token>,
    /// The acquisition waits (an exclusive one then sets the
    /// writer-waiting marker where readers refuse it, `super::kinds::rw`).
    pub(super) waits: bool,
}

impl Redlock {
    /// How long a failed attempt waits for its cleanup release: until the
    /// attempt has used `node_timeout` in all, and at least a tenth of it.
    /// The release is queued for every master at once and reaches each
    /// before anything sent later, so waiting only lets the answer say the
    /// keys are gone where masters are quick; with masters hung, the caller
    /// hears UNAVAILABLE about `node_timeout` after it asked, not twice that.
    pub(super) fn cleanup_deadline(&self, start: Instant) -> Instant {
        let timeout = self.settings.node_timeout;
        (start + timeout).max(Instant::now() + timeout / 10)
    }

    /// One attempt on `resource`, once admitted (see [`super::admission`]),
    /// with a token of its own; on success the lock. `stop` (the caller
    /// left) is heeded before and while the attempt waits for admission: once its
    /// commands are out, it runs to its end, which cleans up after itself.
    ///
    /// Why a token per attempt, not per acquisition: a failed attempt can
    /// leave its fence on a minority of masters beside its token (a commit
    /// that landed there before the attempt gave up). Under a token of its
    /// own, no later attempt's lock, and no Extend of it, can ever be taken
    /// for that attempt's, so an Extend only ever reports the fence of the
    /// grant it extends.
    ///
    /// With a request id (`who.fixed`, the token derived from it), every
    /// attempt uses that one token instead: see [`Redlock::acquire_detached_as`]
    /// for why that stays sound.
    ///
    /// `front`: the attempt is the queue's front waiter's; where refused,
    /// it sets the resource's waiter marker (see [`super::Master::acquire`]),
    /// so that the holder's release announces itself.
    pub(super) async fn attempt<S: Future<Output = ()>>(
        &self,
        resource: &str,
        who: Claimant<'_>,
        ttl: Duration,
        stats: &mut AttemptStats,
        front: bool,
        mut stop: Pin<&mut S>,
    ) -> Result<Lock, Failure> {
        let admitted = tokio::select! {
            // A caller that has left gets no new attempt, even one that
            // would be admitted at once: its grant would only be released.
            biased;
            () = stop.as_mut() => return Err(LockError::Cancelled.into()),
            admitted = self.admission.acquisition() => admitted?,
        };
        stats.attempts += 1;
        // The queue's front waiter's clean-up must not wake itself.
        let (cleanup, waiter_marker) = match front {
            true => (WakeWaiters::NotSelf, self.waiter_marker_ttl()),
            false => (WakeWaiters::IfDeleted, Duration::ZERO),
        };
        if who.holder.limit > 1 {
            let result = Box::pin(self.attempt_permit(
                resource,
                ttl,
                waiter_marker,
                who.holder,
                &admitted,
                cleanup,
            ))
            .await;
            match &result {
                Ok(lock) => metrics::grant(lock.validity, ttl),
                Err(failure) => stats.contended |= matches!(failure.error, LockError::Contended(_)),
            }
            return result;
        }
        let token = match who.fixed {
            Some(token) => token.clone(),
            None if who.holder.shared => Token::generate().map_err(LockError::from)?.into_shared(),
            None => Token::generate().map_err(LockError::from)?,
        };
        let subject = self.subject_marking(resource, token, who.waits, who.holder.epoch);
        // Boxed: the round's state (its futures, tallies, replies) is then
        // allocated only once admitted, not carried inline by every caller's
        // future while it waits in the admission queue. With 10,000 `Hold`
        // sessions opened at once, ~9,900 wait there at the peak.
        let result = Box::pin(self.attempt_plain(
            &subject,
            ttl,
            waiter_marker,
            who.holder,
            &admitted,
            cleanup,
        ))
        .await;
        match &result {
            Ok(lock) => metrics::grant(lock.validity, ttl),
            Err(failure) => stats.contended |= matches!(failure.error, LockError::Contended(_)),
        }
        result
    }

    /// One acquire round and one commit round for `subject`'s keys: the
    /// fence and the validity of the grant.
    pub(super) async fn attempt_once(
        &self,
        subject: &Arc<Subject>,
        ttl: Duration,
        waiter_marker: Duration,
        holder: &Arc<Holder>,
        admitted: &Admitted<'_>,
        cleanup: WakeWaiters,
    ) -> Result<(u64, (Duration, Deadline)), Failure> {
        // No proposal while a master is untrusted (see `fence`: attempts
        // turned away then must not raise horizons).
        let proposal = self
            .proposer
            .propose(self.nodes.iter().all(|node| node.trusted()));
        let start = validity::Started::now();
        let mut granted: Vec<(usize, FenceRead)> = Vec::with_capacity(self.nodes.len());
        let mut refusals: Vec<Duration> = Vec::new();
        let mut conflicts = 0;
        let mut own = 0;
        let votes = self
            .round(
                subject,
                self.all(),
                Command::Acquire {
                    ttl,
                    proposal,
                    waiter_marker,
                    holder: Arc::clone(holder),
                },
                |index, reply, tally| match reply {
                    Reply::Acquire(AcquireVote::Granted(read)) => {
                        tally.count(Vote::Yes);
                        granted.push((index, read));
                    }
                    Reply::Acquire(AcquireVote::Refused {
                        holder_ttl,
                        delayed: by_delay,
                    }) => {
                        tally.count(if by_delay { Vote::Delayed } else { Vote::No });
                        refusals.extend(holder_ttl);
                    }
                    Reply::Acquire(AcquireVote::Conflict) => {
                        tally.count(Vote::No);
                        conflicts += 1;
                    }
                    Reply::Acquire(AcquireVote::Own) => {
                        tally.count(Vote::No);
                        own += 1;
                    }
                    _ => tally.count(Vote::No),
                },
            )
            .await;
        admitted.round_took(start.elapsed());
        if votes.decision() != Decision::Reached && own > 0 {
            // An earlier acquisition of this request id holds the key on
            // some masters: no clean-up (the caller resumes that lock and
            // takes what this attempt set with it, `Redlock::resume_own`).
            return Err(Failure {
                error: LockError::Contended(votes),
                holder_free_in: None,
                own: true,
            });
        }
        if votes.decision() != Decision::Reached {
            self.release_everywhere(
                subject,
                cleanup,
                Ending::Forced,
                self.cleanup_deadline(start.mono()),
                Vote::Failed,
            )
            .await;
            if votes.delayed() > 0 && votes.refused_by_majority() {
                // Refused (also) because a vanished holder's lock-delay
                // still runs on some master: counted once per attempt.
                metrics::lock_delay_refusal();
            }
            if conflicts >= self.quorum.needed() {
                return Err(LockError::LimitConflict.into());
            }
            return Err(if votes.held() {
                Failure {
                    holder_free_in: holder_free_in(self.quorum, votes.yes(), refusals),
                    error: LockError::Contended(votes),
                    own: false,
                }
            } else {
                LockError::no_quorum(votes).into()
            });
        }

        let reads = || granted.iter().map(|&(_, read)| read);
        self.proposer.observe(reads());
        if fence::one_round(proposal, reads()) {
            // Every counted master wrote the proposal atomically with its
            // SET: the fence is on a majority already (see `fence`).
            return match start.validity(ttl, self.settings.drift_factor) {
                Some(validity) => {
                    metrics::fence_round(false);
                    Ok((proposal.fence, validity))
                }
                None => {
                    self.release_everywhere(
                        subject,
                        cleanup,
                        Ending::Forced,
                        self.cleanup_deadline(start.mono()),
                        Vote::Failed,
                    )
                    .await;
                    Err(LockError::Expired(votes).into())
                }
            };
        }
        self.commit_rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        metrics::fence_round(true);
        let fence = fence::next_fence(proposal, reads());
        let commit = Command::CommitFence {
            fence,
            fence_ttl: self.settings.fence_ttl,
            ttl,
            holder: Arc::clone(holder),
        };
        // To every master, not only those whose grant was counted: each
        // master has our SET before the commit (see `Master`), and commits only
        // where our token holds the lock, so a straggler that granted late
        // commits too and can stand in for a master that fails now.
        let commits = self
            .round(subject, self.all(), commit, |_, reply, tally| match reply {
                Reply::Committed(true) => tally.count(Vote::Yes),
                _ => tally.count(Vote::No),
            })
            .await;
        let validity = start.validity(ttl, self.settings.drift_factor);
        match (commits.decision(), validity) {
            (Decision::Reached, Some(validity)) => Ok((fence, validity)),
            (decision, _) => {
                self.release_everywhere(
                    subject,
                    cleanup,
                    Ending::Forced,
                    self.cleanup_deadline(start.mono()),
                    Vote::Failed,
                )
                .await;
                Err(match decision {
                    Decision::Reached => LockError::Expired(commits),
                    _ => LockError::no_quorum(commits),
                }
                .into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// All five refuse: the third-earliest expiry frees a majority.
    #[test]
    fn all_refused() {
        let q = Quorum::majority(5).expect("5 > 0");
        let refusals = vec![MS(50), MS(10), MS(40), MS(20), MS(30)];
        assert_eq!(holder_free_in(q, 0, refusals), Some(MS(30)));
    }

    /// Two masters granted us (released after the attempt): one more expiry
    /// is enough.
    #[test]
    fn partly_granted() {
        let q = Quorum::majority(5).expect("5 > 0");
        assert_eq!(
            holder_free_in(q, 2, vec![MS(70), MS(60), MS(90)]),
            Some(MS(60))
        );
    }

    /// Not enough known expiries: no hint.
    #[test]
    fn unknown() {
        let q = Quorum::majority(5).expect("5 > 0");
        assert_eq!(holder_free_in(q, 0, vec![MS(70), MS(60)]), None);
        assert_eq!(holder_free_in(q, 0, vec![]), None);
    }
}
