//! Locks on several resources at once (`AcquireRequest.resources`).
//!
//! # Guarantee
//!
//! All or none: one grant, one token, one fence per resource. While the
//! grant is valid, every one of its resources is held by its token on a
//! majority of masters, exactly as a plain lock on that resource would be,
//! so a plain lock (or another multi-resource lock) on any of them
//! conflicts as usual; each resource's fence is greater than that of every
//! earlier grant of that resource, plain or not.
//!
//! # How
//!
//! - *One round per attempt, all keys at once.* Each master gets ONE script
//!   call ([`crate::redlock::Master::acquire_all`], `crate::valkey::scripts::multi`)
//!   that reads every key of the lock and, only if all are free, sets all of
//!   them to the token; otherwise it sets none. The script runs atomically, so
//!   on every master the lock's keys are either all ours or none is. A master
//!   that granted counts as a yes; the quorum is the usual majority, of masters
//!   that granted ALL keys.
//! - *Deadlock-free by construction.* Nobody ever holds some keys while
//!   waiting for others: an attempt asks for all at once, and an attempt
//!   without a quorum releases every key on every master before it returns
//!   (as a plain attempt does), before any retry. There is no lock order to
//!   get wrong, and no hold-and-wait. Two contenders whose attempts split
//!   the masters both fail and back off (the split back-off of
//!   `crate::redlock::wait`), as for one resource.
//! - *Fences.* The script returns each resource's own fence counter (the fence
//!   hash `max`, `crate::redlock::fence`) read atomically with its SET, and the
//!   master's clock. Each resource gets `next_fence` over the granting masters'
//!   reads of ITS counter, and is committed with the existing per-resource
//!   commit (`COMMIT_FENCE`, sent to every master, standing once a majority
//!   acknowledged it). The grant stands only when every resource's commit
//!   reached a majority within the validity; otherwise all keys are released.
//!   So each resource's fence argument is the plain one of
//!   `crate::redlock::fence`, unchanged: its grant's SET on a master of the
//!   intersection happened after the earlier holder's key was gone there.
//! - *Finding the other resources.* Extend, Release and Validate name the lock
//!   by ANY one of its resources plus its token. The token itself carries the
//!   list ([`token_for`](crate::redlock::token::token_for)): 32 random hex
//!   characters, `:`, then the resources (joined by `\n`, which no resource may
//!   contain) in lowercase hex. Why not a member list stored on the masters:
//!   the token is what every key holds, so the list is exactly as durable as
//!   the keys (a restarted master that lost them loses nothing extra to
//!   recreate), costs no extra key, no extra round and no expiry to keep in
//!   step, and never puts the token in a key name. It is sound because the
//!   whole string is the secret compared by every script: a token with a
//!   tampered list matches no key anywhere, so it can neither extend nor
//!   release anything (and the service refuses lists over its limits before any
//!   master is asked). The names in the token are the caller's own; the random
//!   part keeps it unguessable (128 bits).
//! - *Extend, Release, Validate* act on every resource with the plain
//!   per-resource round, all at once: Extend succeeds only if every
//!   resource was extended on a majority (the validity is the smallest, the
//!   fences each resource's own, each vouched for as in a plain Extend);
//!   Release reports `was_held` if every resource was still held; Validate
//!   says held only if every resource is, for the shortest validity. A
//!   resource the token does not name is answered "not held".
//! - *Waiting* works as for one resource: the caller joins the local queue
//!   of every resource and attempts when any of them wakes it (a release of
//!   any held resource, through this replica or another), when the
//!   holders' keys expire, or after `wait_fallback`. It does not wait to be
//!   at the front of every queue (two multi waiters queued in opposite
//!   orders would wait for each other); being in the queues only routes
//!   wake-ups. A multi waiter at the front of a queue makes the local plain
//!   waiters behind it wait their turn, first come first served.
//!
//! # Other features, per resource
//!
//! `lock_delay`, `hold_at_least` and `owner` are recorded by each
//! resource's commit and honoured by each resource's own scripts, so they
//! hold per resource (a lock that expires keeps each of its resources for
//! the delay). The admin `Inspect` and `List` see each resource as a lock
//! of its own (same owner, own fence); an operator's `ForceRelease` of one
//! of them releases the whole lock (the token names them all). Idempotent
//! acquisition (`request_id`) is not offered for several resources: the
//! service refuses the combination.

use crate::metrics;
use crate::redlock::acquire::DetachedAcquire;
use crate::redlock::attempt::{AttemptStats, Failure};
use crate::redlock::master::{AcquireAllVote, Ending};
use crate::redlock::notices::Notice;
use crate::redlock::quorum::Vote;
use crate::redlock::round::{Command, Pending, Reply, Until};
use crate::redlock::validity;
use crate::redlock::{
    Decision, Holder, Lock, LockError, LockKeys, Redlock, Tally, Token, WakeWaiters,
};
use futures::future::{join_all, FutureExt};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

mod lease;
mod wait;

/// One resource of a lock on several resources, with its own fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    /// The resource.
    pub resource: String,
    /// Its fence: greater than that of every earlier grant of it.
    pub fence: u64,
}

impl Redlock {
    /// [`Redlock::acquire_detached_as`] for a lock on all of `resources`
    /// (at least one, no duplicates: checked at the door) at once; see the
    /// module doc. Dropping the answer releases whatever it still grants.
    pub(crate) fn acquire_detached_multi(
        self: &Arc<Self>,
        resources: Vec<String>,
        ttl: Duration,
        wait: Duration,
        holder: Holder,
    ) -> DetachedAcquire {
        let engine = Arc::clone(self);
        let holder = Arc::new(holder);
        let (mut answer, answered) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let result = engine
                .acquire_multi_until_stopped(&resources, ttl, wait, &holder, answer.closed())
                .await;
            if let Err((Ok(orphan), turn)) = answer.send((result, None)) {
                engine.release_orphan(orphan, turn);
            }
        });
        DetachedAcquire {
            answered,
            engine: Arc::clone(self),
        }
    }

    /// Attempts until a grant, until `wait` elapses, or until `stop`.
    pub(in crate::redlock) async fn acquire_multi_until_stopped(
        &self,
        resources: &[String],
        ttl: Duration,
        wait: Duration,
        holder: &Arc<Holder>,
        stop: impl Future<Output = ()>,
    ) -> Result<Lock, LockError> {
        tokio::pin!(stop);
        let mut stats = AttemptStats::default();
        let started = Instant::now();
        let result = if wait.is_zero() {
            self.attempt_multi(resources, holder, ttl, Duration::ZERO, &mut stats, stop)
                .await
                .map_err(|f| f.error)
        } else {
            let result = self
                .wait_multi(resources, holder, ttl, started + wait, stop, &mut stats)
                .await;
            metrics::waited(started.elapsed());
            result
        };
        metrics::acquisition(stats.attempts, stats.contended);
        result
    }

    /// One attempt on all of `resources` with a fresh token: the
    /// all-or-none acquire round, then each resource's fence commit. A
    /// waiting caller's attempt (`waiter_marker` non-zero) sets the waiter
    /// marker of each resource held where it is refused, so that their
    /// releases on any replica wake it (every waiter of a multi-resource
    /// lock attempts, so each sets it, not only a queue's front). Any
    /// failure releases every key on every master before returning.
    async fn attempt_multi<S: Future<Output = ()>>(
        &self,
        resources: &[String],
        holder: &Arc<Holder>,
        ttl: Duration,
        waiter_marker: Duration,
        stats: &mut AttemptStats,
        mut stop: Pin<&mut S>,
    ) -> Result<Lock, Failure> {
        let admitted = tokio::select! {
            biased;
            () = stop.as_mut() => return Err(LockError::Cancelled.into()),
            admitted = self.admission.acquisition() => admitted?,
        };
        let random = Token::generate().map_err(LockError::from)?;
        let token = crate::redlock::token::token_for(&random, resources);
        stats.attempts += 1;
        let subjects: Vec<_> = resources
            .iter()
            .map(|r| self.subject(r, token.clone()))
            .collect();
        let keys: Vec<LockKeys> = subjects.iter().map(|s| s.keys.clone()).collect();
        let start = validity::Started::now();
        let deadline = self.round_deadline(Instant::now());
        let mut pending: Pending = self
            .all()
            .map(|index| {
                let reply = self.nodes[index].acquire_all(&keys, &token, ttl, waiter_marker);
                async move { (index, reply.await.map(Reply::AcquireAll)) }.boxed()
            })
            .collect();
        let mut granted: Vec<Vec<crate::redlock::FenceRead>> = Vec::with_capacity(self.nodes.len());
        let mut refusals: Vec<Duration> = Vec::new();
        let mut votes = Tally::new(self.quorum);
        self.listen(
            &mut pending,
            deadline,
            self.silent_vote(),
            &mut votes,
            Until::Decided,
            |_, reply, tally| match reply {
                Reply::AcquireAll(AcquireAllVote::Granted(reads)) if reads.len() == keys.len() => {
                    tally.count(Vote::Yes);
                    granted.push(reads);
                }
                Reply::AcquireAll(AcquireAllVote::Refused {
                    holder_ttl,
                    delayed: by_delay,
                }) => {
                    tally.count(if by_delay { Vote::Delayed } else { Vote::No });
                    refusals.extend(holder_ttl);
                }
                _ => tally.count(Vote::Failed),
            },
        )
        .await;
        admitted.round_took(start.elapsed());
        let cleanup_deadline = self.cleanup_deadline(start.mono());
        if votes.decision() != Decision::Reached {
            let notices = self.release_all_of(&subjects, cleanup_deadline).await;
            stats.cleanup_notices.extend(notices);
            if votes.delayed() > 0 && votes.refused_by_majority() {
                metrics::lock_delay_refusal();
            }
            let failure = if votes.held() {
                stats.contended = true;
                Failure {
                    holder_free_in: crate::redlock::attempt::holder_free_in(
                        self.quorum,
                        votes.yes(),
                        refusals,
                    ),
                    error: LockError::Contended(votes),
                    own: false,
                }
            } else {
                LockError::no_quorum(votes).into()
            };
            return Err(failure);
        }

        let fences: Vec<u64> = (0..resources.len())
            .map(|i| {
                crate::redlock::fence::next_fence(
                    crate::redlock::fence::Proposal::NONE,
                    granted.iter().map(|reads| reads[i]),
                )
            })
            .collect();
        let commits = join_all(subjects.iter().zip(&fences).map(|(subject, &fence)| {
            let commit = Command::CommitFence {
                fence,
                fence_ttl: self.settings.fence_ttl,
                ttl,
                holder: Arc::clone(holder),
            };
            self.round(subject, self.all(), commit, |_, reply, tally| match reply {
                Reply::Committed(true) => tally.count(Vote::Yes),
                _ => tally.count(Vote::No),
            })
        }))
        .await;
        let validity = start.validity(ttl, self.settings.drift_factor);
        let failed = commits
            .into_iter()
            .find(|tally| tally.decision() != Decision::Reached);
        match (failed, validity) {
            (None, Some((validity, deadline))) => {
                metrics::grant(validity, ttl);
                let members: Vec<Member> = resources
                    .iter()
                    .zip(&fences)
                    .map(|(resource, &fence)| Member {
                        resource: resource.clone(),
                        fence,
                    })
                    .collect();
                Ok(Lock {
                    resource: resources[0].clone(),
                    token,
                    fence: fences[0],
                    validity,
                    deadline,
                    members,
                    epoch: None,
                })
            }
            (failed, _) => {
                let notices = self.release_all_of(&subjects, cleanup_deadline).await;
                stats.cleanup_notices.extend(notices);
                Err(match failed {
                    None => LockError::Expired(votes),
                    Some(tally) => LockError::no_quorum(tally),
                }
                .into())
            }
        }
    }

    /// A failed attempt's clean-up: every key of it released on every
    /// master (see `Redlock::release_everywhere`). The ids of its notices,
    /// by which the attempter tells their wake-ups from a holder's release.
    async fn release_all_of(
        &self,
        subjects: &[Arc<crate::redlock::round::Subject>],
        deadline: Instant,
    ) -> Vec<u64> {
        let notices: Vec<Notice> = subjects
            .iter()
            .map(|subject| Notice::new(&subject.resource))
            .collect();
        let ids = notices.iter().map(|notice| notice.id).collect();
        join_all(subjects.iter().zip(notices).map(|(subject, notice)| {
            self.release_noticed(
                subject,
                notice,
                WakeWaiters::IfDeleted,
                Ending::Forced,
                deadline,
                Vote::Failed,
            )
        }))
        .await;
        ids
    }
}
