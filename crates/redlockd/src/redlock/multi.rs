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
//! - *One round per attempt, all keys at once.* Each master gets ONE
//!   script call ([`super::Node::acquire_all`], `crate::valkey::scripts::multi`) that
//!   reads every key of the lock and, only if all are free, sets all of
//!   them to the token; otherwise it sets none. The script runs
//!   atomically, so on every master the lock's keys are either all ours or
//!   none is. A master that granted counts as a yes; the quorum is the
//!   usual majority, of masters that granted ALL keys.
//! - *Deadlock-free by construction.* Nobody ever holds some keys while
//!   waiting for others: an attempt asks for all at once, and an attempt
//!   without a quorum releases every key on every master before it returns
//!   (as a plain attempt does), before any retry. There is no lock order to
//!   get wrong, and no hold-and-wait. Two contenders whose attempts split
//!   the masters both fail and back off (the split back-off of
//!   `super::wait`), as for one resource.
//! - *Fences.* The script returns each resource's own fence counter (the
//!   fence hash `max`, `super::fence`) read atomically with its SET, and the
//!   master's clock. Each resource gets `next_fence` over the granting
//!   masters' reads of ITS counter, and is committed with the existing
//!   per-resource commit (`COMMIT_FENCE`, sent to every master, standing
//!   once a majority acknowledged it). The grant stands only when every
//!   resource's commit reached a majority within the validity; otherwise
//!   all keys are released. So each resource's fence argument is the plain
//!   one of `super::fence`, unchanged: its grant's SET on a master of the
//!   intersection happened after the earlier holder's key was gone there.
//! - *Finding the other resources.* Extend, Release and Validate name the
//!   lock by ANY one of its resources plus its token. The token itself
//!   carries the list ([`token_for`]): 32 random hex characters, `:`, then
//!   the resources (joined by `\n`, which no resource may contain) in
//!   lowercase hex. Why not a member list stored on the masters: the token
//!   is what every key holds, so the list is exactly as durable as the
//!   keys (a restarted master that lost them loses nothing extra to
//!   recreate), costs no extra key, no extra round and no expiry to keep
//!   in step, and never puts the token in a key name. It is sound because
//!   the whole string is the secret compared by every script: a token with
//!   a tampered list matches no key anywhere, so it can neither extend nor
//!   release anything (and the service refuses lists over its limits
//!   before any master is asked). The names in the token are the caller's
//!   own; the random part keeps it unguessable (128 bits).
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

use super::attempt::{AttemptStats, Failure};
use super::node::AcquireAllVote;
use super::notices::Notice;
use super::quorum::Vote;
use super::round::{Command, Pending, Reply, Until};
use super::validity;
use super::wait::{jitter, DetachedAcquire, TIE_BREAK_JITTER};
use super::waiters::Wake;
use super::{
    Claim, Decision, Holder, Lock, LockError, LockKeys, Redlock, Tally, Token, WakeWaiters,
};
use crate::metrics;
use futures::future::{join_all, FutureExt};
use futures::stream::{FuturesUnordered, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Between the random part of a multi-resource token and its resources.
const SEPARATOR: char = ':';

/// Between two resources in a token's list (a control character: no
/// resource name contains it).
const BETWEEN: char = '\n';

/// Longest token accepted at all (the service holds a token's list to
/// `redlock.max_resources_per_lock` and `max_resource_len` as well).
const MAX_TOKEN_LEN: usize = 1 << 20;

/// One resource of a lock on several resources, with its own fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The resource.
    pub resource: String,
    /// Its fence: greater than that of every earlier grant of it.
    pub fence: u64,
}

/// The token of a lock on `resources`: `random`'s text, [`SEPARATOR`], then
/// the resources joined by [`BETWEEN`], in lowercase hex (module doc).
pub(crate) fn token_for(random: &Token, resources: &[String]) -> Token {
    let list = resources.join(&BETWEEN.to_string());
    let text = format!("{}{SEPARATOR}{}", random.expose(), hex::encode(list));
    Token::of_kind(text, super::token::TokenKind::Multi)
}

/// The resources a multi-resource token names, in the order asked; `None`
/// for a plain token.
pub(crate) fn members(token: &Token) -> Option<Vec<String>> {
    match token.kind() {
        super::token::TokenKind::Multi => decode(token.expose()),
        _ => None,
    }
}

/// Whether `text` has the shape of a multi-resource token (see
/// [`token_for`]): for `Token::parse`.
pub(super) fn well_formed(text: &str) -> bool {
    text.len() <= MAX_TOKEN_LEN && decode(text).is_some()
}

fn decode(text: &str) -> Option<Vec<String>> {
    let (random, list) = text.split_once(SEPARATOR)?;
    if random.len() != 32
        || !super::token::is_lower_hex(random)
        || !super::token::is_lower_hex(list)
    {
        return None;
    }
    let list = String::from_utf8(hex::decode(list).ok()?).ok()?;
    let names: Vec<String> = list.split(BETWEEN).map(str::to_owned).collect();
    let mut seen = std::collections::HashSet::new();
    let valid = names
        .iter()
        .all(|n| !n.is_empty() && !n.chars().any(char::is_control) && seen.insert(n.as_str()));
    valid.then_some(names)
}

impl Redlock {
    /// [`Redlock::acquire_detached_as`] for a lock on all of `resources`
    /// (at least one, no duplicates: checked at the door) at once; see the
    /// module doc. Dropping the answer releases whatever it still grants.
    pub fn acquire_detached_multi(
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
    async fn acquire_multi_until_stopped(
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

    /// Waiting (module doc): in every resource's queue, attempting when
    /// any wakes us, when the holders' keys expire, or after the fallback.
    async fn wait_multi<S: Future<Output = ()>>(
        &self,
        resources: &[String],
        holder: &Arc<Holder>,
        ttl: Duration,
        give_up_at: Instant,
        mut stop: Pin<&mut S>,
        stats: &mut AttemptStats,
    ) -> Result<Lock, LockError> {
        let mut places = Vec::with_capacity(resources.len());
        for resource in resources {
            places.push(self.waiters.join(resource)?);
        }
        let mut try_at = Instant::now();
        let mut last_error = None;
        let mut backing_off_until: Option<Instant> = None;
        loop {
            // A holder's release heard while our attempt ran.
            let mut heard = None;
            if try_at <= Instant::now() {
                let started = Instant::now();
                stats.cleanup_notices.clear();
                match self
                    .attempt_multi(
                        resources,
                        holder,
                        ttl,
                        self.waiter_marker_ttl(),
                        stats,
                        stop.as_mut(),
                    )
                    .await
                {
                    Ok(granted) => {
                        let until = Instant::now() + ttl;
                        for place in places {
                            place.granted(until);
                        }
                        return Ok(granted);
                    }
                    Err(failure) => {
                        let now = Instant::now();
                        if now >= give_up_at {
                            return Err(failure.error);
                        }
                        // The attempt's own clean-up woke the front waiters
                        // of its resources, us included: not a release by a
                        // holder, so it must not cut the pause short (else a
                        // refused waiter would retry every round). A
                        // holder's release heard meanwhile must: dropping
                        // it left the waiter asleep until the fallback.
                        for place in &mut places {
                            while let Some(wake) = place.woken().now_or_never() {
                                match wake {
                                    Wake::Released { notice, .. }
                                        if stats.cleanup_notices.contains(&notice) => {}
                                    other => heard = Some(other),
                                }
                            }
                        }
                        let pause = self.pause_after(&failure, now - started);
                        try_at = now + pause;
                        backing_off_until =
                            super::wait::is_split(&failure.error).then_some(now + pause);
                        last_error = Some(failure.error);
                    }
                }
            }
            let wake = match heard {
                Some(wake) => Some(wake),
                None => {
                    let mut wakes: FuturesUnordered<_> =
                        places.iter_mut().map(|place| place.woken()).collect();
                    tokio::select! {
                        () = tokio::time::sleep_until(try_at) => None,
                        wake = wakes.next() => wake,
                        () = tokio::time::sleep_until(give_up_at) => {
                            return Err(last_error.unwrap_or(LockError::StillHeld));
                        }
                        () = &mut stop => return Err(LockError::Cancelled),
                    }
                }
            };
            if let Some(wake) = wake {
                let now = Instant::now();
                let woken_at = match wake {
                    Wake::Released { at_once: true, .. }
                    | Wake::Front {
                        holder_expires: None,
                    } => now,
                    Wake::Released { at_once: false, .. } => now + jitter(TIE_BREAK_JITTER),
                    Wake::Front {
                        holder_expires: Some(expires),
                    } => expires.min(try_at) + jitter(TIE_BREAK_JITTER),
                };
                let woken_at = backing_off_until.map_or(woken_at, |until| until.max(woken_at));
                try_at = try_at.min(woken_at);
            }
        }
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
        let token = token_for(&random, resources);
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
        let mut granted: Vec<Vec<super::FenceRead>> = Vec::with_capacity(self.nodes.len());
        let mut refusals: Vec<Duration> = Vec::new();
        let mut delayed = false;
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
                    tally.count(Vote::No);
                    refusals.extend(holder_ttl);
                    delayed |= by_delay;
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
            if delayed && votes.refused_by_majority() {
                metrics::lock_delay_refusal();
            }
            let failure = if votes.held() {
                stats.contended = true;
                Failure {
                    holder_free_in: super::attempt::holder_free_in(
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
                super::fence::next_fence(
                    super::fence::Proposal::NONE,
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
        subjects: &[Arc<super::round::Subject>],
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
                false,
                deadline,
                Vote::Failed,
            )
        }))
        .await;
        ids
    }

    /// [`Redlock::extend_lease`] of a lock on several resources: every
    /// resource extended (module doc). The fence is the first resource's,
    /// `None` unless every resource's fence is vouched for.
    pub(super) async fn extend_multi(
        &self,
        resource: &str,
        members: &[String],
        token: &Token,
        ttl: Duration,
    ) -> Result<(Option<u64>, Lock), LockError> {
        if !members.iter().any(|m| m == resource) {
            return Err(LockError::NotHeld(Tally::new(self.quorum)));
        }
        let results = join_all(
            members
                .iter()
                .map(|member| self.extend_lease_one(member, token, ttl, Claim::Any)),
        )
        .await;
        let mut extended = Vec::with_capacity(members.len());
        for result in results {
            extended.push(result?);
        }
        let all_known = extended.iter().all(|(fence, _)| fence.is_some());
        let first_fence = extended.first().and_then(|(fence, _)| *fence);
        let shortest = extended
            .iter()
            .map(|(_, lock)| lock.clone())
            .min_by_key(|lock| lock.validity)
            .ok_or(LockError::Internal(
                "a multi-resource token names no resource",
            ))?;
        let members = members
            .iter()
            .zip(&extended)
            .map(|(resource, (fence, _))| Member {
                resource: resource.clone(),
                fence: fence.unwrap_or(0),
            })
            .collect();
        let lock = Lock {
            resource: extended[0].1.resource.clone(),
            members,
            ..shortest
        };
        Ok((first_fence.filter(|_| all_known), lock))
    }

    /// [`Redlock::release_as`] of a lock on several resources: every
    /// resource released; held if every one still was.
    pub(super) async fn release_multi(
        &self,
        resource: &str,
        members: &[String],
        token: &Token,
        honour_minimum: bool,
    ) -> Result<bool, LockError> {
        if !members.iter().any(|m| m == resource) {
            return Ok(false);
        }
        let results = join_all(
            members
                .iter()
                .map(|member| self.release_one(member, token, None, honour_minimum)),
        )
        .await;
        let mut all_held = true;
        for result in results {
            all_held &= result?;
        }
        Ok(all_held)
    }

    /// [`Redlock::validate`] of a lock on several resources: held if every
    /// resource is, for the shortest validity.
    pub(super) async fn validate_multi(
        &self,
        resource: &str,
        members: &[String],
        token: &Token,
    ) -> Result<Option<Duration>, LockError> {
        if !members.iter().any(|m| m == resource) {
            return Ok(None);
        }
        let results = join_all(
            members
                .iter()
                .map(|member| self.validate_one(member, token)),
        )
        .await;
        let mut shortest: Option<Duration> = None;
        for result in results {
            match result? {
                Some(left) => shortest = Some(shortest.map_or(left, |s| s.min(left))),
                None => return Ok(None),
            }
        }
        Ok(shortest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A multi-resource token parses, names its resources in order, and
    /// differs from a plain token; a plain token names none.
    #[test]
    fn token_names_its_resources() {
        let random = Token::generate().expect("OS RNG");
        let token = token_for(&random, &names(&["b/1", "a é", "c"]));
        let parsed = Token::parse(token.expose()).expect("well formed");
        assert_eq!(members(&parsed), Some(names(&["b/1", "a é", "c"])));
        assert!(token.expose().starts_with(random.expose()));
        assert_eq!(members(&random), None);
        assert!(!format!("{token:?}").contains(random.expose()));
    }

    /// Tampered or malformed lists are not tokens.
    #[test]
    fn malformed_lists() {
        let random = "0123456789abcdef0123456789abcdef";
        for bad in [
            format!("{random}:"),
            format!("{random}:zz"),
            format!("{random}:ABCD"),
            format!("{random}:{}", hex::encode("a\n\nb")),
            format!("{random}:{}", hex::encode("a\na")),
            format!("{random}:{}", hex::encode("a\tb")),
            format!("{}:{}", &random[1..], hex::encode("a")),
            format!("{random}:{}", "f".repeat(MAX_TOKEN_LEN)),
        ] {
            assert!(Token::parse(&bad).is_err(), "{bad}");
        }
        assert!(Token::parse(&format!("{random}:{}", hex::encode("a\nb"))).is_ok());
        // A semaphore permit's token (`.`, a decimal limit, `.` and a
        // decimal index) is never read as a list, even where the numbers
        // are valid hex ("41" = "A").
        let permit = Token::parse(&format!("{random}.42.41")).expect("a permit's token");
        assert_eq!(members(&permit), None);
        assert_eq!(permit.permit(), Some(41));
    }
}
