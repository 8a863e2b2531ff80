//! Acquiring a lock: the engine's entry points (`acquire`, and the
//! detached acquisition a caller may drop at any time, with or without a
//! request id), up to the attempts ([`super::attempt`]) and the waiting
//! between them ([`super::wait`]).

use super::attempt::{AttemptStats, Claimant};
use super::turns::Turn;
use super::{keys, Claim, Epoch, Holder, Lock, LockError, Redlock, RequestId, Token};
use crate::metrics;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Redlock {
    /// Takes the lock on `resource` for `ttl`, waiting up to `wait` while it
    /// is held elsewhere or masters are unreachable (zero: one attempt).
    pub async fn acquire(
        &self,
        resource: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lock, LockError> {
        let holder = Arc::new(Holder::default());
        self.acquire_until_stopped(resource, None, ttl, wait, &holder, std::future::pending())
            .await
    }

    /// [`Redlock::acquire_detached_as`] for an anonymous holder, without a
    /// request id: the unit tests' shorthand.
    #[cfg(test)]
    pub(crate) fn acquire_detached(
        self: &Arc<Self>,
        resource: String,
        ttl: Duration,
        wait: Duration,
    ) -> DetachedAcquire {
        self.acquire_detached_as(resource, None, ttl, wait, Holder::default())
    }

    /// [`Redlock::acquire`] on a task of its own, so that dropping the returned
    /// future (the caller cancelled, or its deadline passed) never leaves a
    /// lock behind: the task stops waiting, and a grant that completes after
    /// the caller has gone is released at once. `holder`'s owner and kind
    /// are recorded beside the token; idempotent when `request_id` is given
    /// (`AcquireRequest.request_id`).
    ///
    /// The lock's token is then [`Token::derive`]d from the request id and
    /// the resource, and:
    /// - the acquisition first tries to extend that token's lock: if it is
    ///   held on a majority (an earlier call with this request id got it,
    ///   through any replica), the answer is that lock, with its own fence
    ///   as granted and a fresh validity, not ABORTED. If the masters no
    ///   longer know its fence, the answer is the Extend's error;
    ///   the lock keeps the terms of the grant (`lock_delay`,
    ///   `hold_at_least`), whatever the retry asked, and its own
    ///   lock-delay does not stand in the way (the masters honour the
    ///   not-before time only for a free key, and the Extend moves it);
    ///   once that grant has expired, though, the delay refuses its own
    ///   request id too: the retry would be a new holder;
    /// - when a majority answers that the token does not hold the lock,
    ///   every attempt uses the derived token; when the Extend cannot tell
    ///   (too few masters answered), the call fails with its error: an
    ///   attempt's clean-up would release the token everywhere, and with it
    ///   this lock if it were held;
    /// - a grant the caller did not stay for (its deadline's cut-off
    ///   passed, it cancelled, its connection dropped) is released, as
    ///   without a request id: the contract promises that nothing is left
    ///   locked after DEADLINE_EXCEEDED. What a request id covers is what
    ///   the daemon cannot see: an answer sent but lost on its way (the
    ///   connection broke after the daemon wrote it). The caller then
    ///   retries with the same request id and gets that lock, or releases
    ///   or validates it with the derived token.
    ///
    /// Each acquisition with a request id takes its turn first
    /// ([`super::turns`]) and keeps it until its outcome is settled: its
    /// answer delivered, or its late grant released. A retry through the
    /// same replica therefore starts only after the previous call's
    /// release, and finds the resource free. Through ANOTHER replica the
    /// calls can overlap (a retry sent right after an error that made this
    /// replica release, or a `Hold` moved while its first stream lingers);
    /// each acquisition then acts under an epoch of its own
    /// ([`super::claim`]): a resuming Extend takes the lock over, and the
    /// earlier acquisition's late release, clean-up or commit finds another
    /// epoch recorded and leaves the lock alone, so the retry is never
    /// answered a lock that is then released under it. (Before epochs,
    /// that window was about 3 × `node_timeout` after the caller's error
    /// by design, and longer under load.)
    ///
    /// Why one token for all attempts stays sound, where the engine
    /// otherwise draws a token per attempt (see [`Redlock::attempt`]): a
    /// failed attempt releases its token everywhere, and its release is
    /// queued on each master's connection before any later attempt's
    /// commands, so a later attempt of this replica finds nothing of it.
    /// Where it did not land (the connection dropped in between), the later
    /// attempt's fence commit, if it has one, sent to every master,
    /// overwrites the record beside the token (where the failed attempt's
    /// key still stands, the token holds it, so the commit lands there). A
    /// one-round grant ([`super::fence`]) has no commit: it writes its
    /// record only where its own SET succeeded and took the proposal, and
    /// the failed attempt's key, still standing, refuses that SET (the key
    /// is the token's own; that master is simply not counted, and the
    /// token's Extend and release reach it as any other). Left over,
    /// therefore: a master that missed both the clean-up and any commit
    /// (with one-round grants: any master that missed the clean-up and did
    /// not take the later proposal) may keep the failed attempt's fence
    /// beside the token, and an Extend reaching it reports the larger of
    /// the two fences. Both belong to the same holder; a later holder's
    /// fence is above the one written on a majority (committed, or taken
    /// with the SETs), so a fence-checking resource can at worst refuse
    /// that later holder (a liveness loss, never two writers).
    ///
    /// Two calls with one request id must not run at once: the clean-up of
    /// a failed attempt of one deletes the token, so it can delete the
    /// other's grant. On one replica the turns ensure it; clients retry
    /// only after the previous call ended.
    pub fn acquire_detached_as(
        self: &Arc<Self>,
        resource: String,
        request_id: Option<&RequestId>,
        ttl: Duration,
        wait: Duration,
        holder: Holder,
    ) -> DetachedAcquire {
        let fixed = request_id.map(|id| match holder.shared {
            true => Token::derive(id, &resource).into_shared(),
            false => Token::derive(id, &resource),
        });
        // Each acquisition of a request id is an epoch of its lock (see
        // `super::claim`): it can take the lock over from an earlier one,
        // and an earlier one can no longer delete it.
        let holder = Holder {
            epoch: fixed.as_ref().map(|_| Epoch::generate()),
            ..holder
        };
        let engine = Arc::clone(self);
        let holder = Arc::new(holder);
        let (mut answer, answered) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let turn = match &fixed {
                Some(token) => tokio::select! {
                    turn = engine.turns.take(&resource, token) => Some(turn),
                    () = answer.closed() => return,
                },
                None => None,
            };
            let result = engine
                .acquire_until_stopped(
                    &resource,
                    fixed.as_ref(),
                    ttl,
                    wait,
                    &holder,
                    answer.closed(),
                )
                .await;
            // The turn goes with the answer: released by whoever settles
            // the grant (the caller receiving it, or the orphan's release).
            if let Err((Ok(orphan), turn)) = answer.send((result, turn)) {
                engine.release_orphan(orphan, turn);
            }
        });
        DetachedAcquire {
            answered,
            engine: Arc::clone(self),
        }
    }

    /// Releases a grant nobody will receive, in the background. Best effort:
    /// if this fails too, the lock expires with its ttl.
    /// With a request id, its `turn` is held until the release has ended.
    pub(super) fn release_orphan(self: &Arc<Self>, orphan: Lock, turn: Option<Turn>) {
        tracing::debug!(resource = %orphan.resource, "caller left during acquire; releasing");
        metrics::abandoned_grant();
        let engine = Arc::clone(self);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = engine.release_held_now(&orphan).await;
                drop(turn);
            });
        }
    }

    /// Releases a grant whose answer was handed over but never left: the
    /// caller reset its call, or its connection closed, as the grant came
    /// (see `service::delivery`). With a request id (the lock has an
    /// epoch) the release first takes the request id's turn again, which
    /// the acquisition gave up when its answer was handed over: a retry
    /// through this replica then starts only after this release, as after
    /// any other (see [`Redlock::acquire_detached_as`]), instead of racing
    /// it for the same token's keys. A retry that took the turn first is
    /// safe either way: its epoch keeps this late release off its lock.
    pub(crate) fn release_undelivered(self: &Arc<Self>, lock: Lock) {
        if lock.epoch.is_none() {
            return self.release_orphan(lock, None);
        }
        let engine = Arc::clone(self);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let turn = engine.turns.take(&lock.resource, &lock.token).await;
                engine.release_orphan(lock, Some(turn));
            });
        }
    }

    /// Attempts until a grant, until `wait` elapses, or until `stop`
    /// completes. `stop` is only heeded between attempts: an attempt always
    /// runs to its end, which cleans up after itself.
    pub(super) async fn acquire_until_stopped(
        &self,
        resource: &str,
        fixed: Option<&Token>,
        ttl: Duration,
        wait: Duration,
        holder: &Arc<Holder>,
        stop: impl Future<Output = ()>,
    ) -> Result<Lock, LockError> {
        tokio::pin!(stop);
        // All but the plain attempt are boxed: this future is a detached task's
        // for as long as its caller waits, and inline it would be as large
        // as its largest branch, while a burst of callers waits for
        // admission.
        // A shared grant with a request id resumes first: its attempt would
        // add the token to the readers of masters where the earlier grant
        // already is. An exclusive one resumes lazily, only if its attempt
        // finds its own token's key (`Redlock::resume_own`): no Extend round
        // before the first attempt.
        let wait = match (fixed, holder.epoch) {
            (Some(token), Some(epoch)) if holder.shared => {
                let resumed = self.resume(resource, token, epoch, ttl, wait, &mut stop);
                match Box::pin(resumed).await? {
                    Resumed::Held(lock) => return Ok(lock),
                    Resumed::NotHeld { wait_left } => wait_left,
                }
            }
            _ => wait,
        };
        let who = Claimant {
            holder,
            fixed,
            waits: !wait.is_zero(),
        };
        let mut stats = AttemptStats::default();
        let result = if wait.is_zero() {
            self.attempt(resource, who, ttl, &mut stats, false, stop)
                .await
                .map_err(|f| f.error)
        } else {
            let started = Instant::now();
            let give_up_at = started + wait;
            let result = if self.settings.wake_on_release {
                Box::pin(self.wait_in_queue(resource, who, ttl, give_up_at, stop, &mut stats)).await
            } else {
                Box::pin(self.poll(resource, who, ttl, give_up_at, stop, &mut stats)).await
            };
            metrics::waited(started.elapsed());
            if let (Ok(_), Some(gap)) = (&result, stats.stood_free) {
                metrics::stood_free(keys::is_election(resource), gap);
            }
            result
        };
        metrics::acquisition(stats.attempts, stats.contended);
        result
    }

    /// The first step of a shared acquisition with a request id (an
    /// exclusive one resumes lazily, `Redlock::resume_own`): extend the
    /// derived token's lock, taking it over (`super::claim`). Held on a majority: that lock is the answer.
    /// A majority says "not ours": the attempts may start, with what is
    /// left of the wait. Too few answers to tell: try again after a
    /// jittered pause while the wait lasts, else fail with the Extend's
    /// error (UNAVAILABLE). Never an attempt while it cannot tell: a failed
    /// attempt releases its token everywhere, and with it this lock if it
    /// were held.
    ///
    /// The cost: one Extend round before the first attempt of every shared
    /// acquisition with a request id (the masters answer "not here" at
    /// once for a new one).
    async fn resume<S: Future<Output = ()>>(
        &self,
        resource: &str,
        token: &Token,
        epoch: Epoch,
        ttl: Duration,
        wait: Duration,
        stop: &mut std::pin::Pin<&mut S>,
    ) -> Result<Resumed, LockError> {
        let give_up_at = Instant::now() + wait;
        loop {
            let take = Claim::Take(epoch);
            match self.extend_claiming(resource, token, ttl, take).await {
                Ok(lock) => return Ok(Resumed::Held(lock)),
                Err(LockError::NotHeld(_)) => {
                    let wait_left = give_up_at.saturating_duration_since(Instant::now());
                    return Ok(Resumed::NotHeld { wait_left });
                }
                Err(LockError::NoQuorum(votes)) => {
                    let remaining = give_up_at.saturating_duration_since(Instant::now());
                    if remaining.is_zero() {
                        return Err(LockError::NoQuorum(votes));
                    }
                    let pause = self.settings.retry.delay(&mut rand::rng(), remaining);
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = stop.as_mut() => return Err(LockError::Cancelled),
                    }
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// What [`Redlock::resume`] found.
enum Resumed {
    /// The request id's lock, held on a majority and extended.
    Held(Lock),
    /// A majority said the request id holds nothing: attempt, waiting at
    /// most this long.
    NotHeld { wait_left: Duration },
}

/// The answer of [`Redlock::acquire_detached_as`]. Dropping it before it
/// completes releases whatever the acquisition still grants: a grant already
/// handed over but not yet received included.
pub struct DetachedAcquire {
    /// The outcome, with the request id's turn (if any) until it is settled.
    pub(super) answered: tokio::sync::oneshot::Receiver<(Result<Lock, LockError>, Option<Turn>)>,
    pub(super) engine: Arc<Redlock>,
}

impl Future for DetachedAcquire {
    type Output = Result<Lock, LockError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.answered)
            .poll(cx)
            .map(|answer| match answer {
                // Delivered: the turn passes on.
                Ok((result, _turn)) => {
                    if let Ok(lock) = &result {
                        self.engine.held.hold(&lock.token, lock.deadline);
                    }
                    result
                }
                Err(_) => Err(LockError::Internal(
                    "the acquisition task ended without an answer",
                )),
            })
    }
}

impl Drop for DetachedAcquire {
    fn drop(&mut self) {
        // After `close`, the task's send fails (and it releases by itself),
        // or its answer is already here and is released now.
        self.answered.close();
        if let Ok((Ok(orphan), turn)) = self.answered.try_recv() {
            self.engine.release_orphan(orphan, turn);
        }
    }
}
