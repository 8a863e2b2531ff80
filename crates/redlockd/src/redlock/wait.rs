//! Acquiring a resource that may be held: waiting without blind polling.
//!
//! A caller that may wait joins the resource's local queue
//! ([`super::waiters`]); only the front waiter attempts (and, once on
//! joining, an acquisition with a request id whose token already holds the
//! lock the others wait for: [`Redlock::holds_already`]). After a refused
//! attempt it sleeps until the earliest of:
//! - a release of the resource, through this replica or (via a release
//!   notice on the masters' pub/sub) any other;
//! - the moment the holder's keys expire on enough masters (the refusing
//!   masters report their remaining PTTL);
//! - `wait_fallback`, in case a notice was lost;
//!
//! plus a small random jitter that breaks ties between replicas. An
//! attempt that split the vote (someone else holds part of the masters, but
//! no majority: [`is_split`]) backs off for longer than a round
//! ([`super::retry::after_split`]), and no wake-up cuts that back-off short:
//! the release notice of the other contender's failed attempt would
//! otherwise wake both again within the same millisecond, and they could
//! split again and again. Releases publish notices only
//! while some replica has a waiter: the front waiter's refused attempts set
//! the resource's waiter marker on the masters that refused (atomically
//! with the refusal, so a release after it sees the marker), and the
//! release script publishes only where it finds one. When the
//! front waiter gets the lock, the next one moves up and waits for the next
//! release. With `wake_on_release` off the engine behaves like a Redlock
//! library: every waiter retries after a jittered pause.

use super::attempt::{AttemptStats, Claimant, Failure};
use super::retry;
use super::waiters::Wake;
use super::{Lock, LockError, Redlock};
use rand::Rng;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// Upper bound of the jitter added to wake-ups, to break ties between
/// replicas whose waiters were woken by the same release.
pub(super) const TIE_BREAK_JITTER: Duration = Duration::from_millis(1);

impl Redlock {
    /// The queue: first come first served, woken by releases and expiries.
    pub(super) async fn wait_in_queue(
        &self,
        resource: &str,
        who: Claimant<'_>,
        ttl: Duration,
        give_up_at: Instant,
        stop: impl Future<Output = ()>,
        stats: &mut AttemptStats,
    ) -> Result<Lock, LockError> {
        let mut place = self.waiters.join(resource)?;
        tokio::pin!(stop);
        let mut out_of_turn = !place.is_front() && self.holds_already(resource, who).await;
        let mut try_at = (place.is_front() || out_of_turn).then(Instant::now);
        let mut last_error = None;
        // After a split vote: no attempt before this, whatever wakes us.
        let mut backing_off_until: Option<Instant> = None;
        // When the holder's lock ended, as far as this waiter knows: when
        // its keys expire (a refused attempt's `holder_free_in`, or the
        // lock granted to the waiter ahead), or a release heard before.
        let mut free_since: Option<Instant> = None;
        loop {
            // Due now: attempt without going through a timer (tokio's timer
            // rounds every sleep up to its 1 ms tick).
            let turn = place.is_front() || out_of_turn;
            if turn && try_at.is_some_and(|at| at <= Instant::now()) {
                let started = Instant::now();
                // The queue's attempt under way is its front's only.
                let front = place.is_front();
                if front {
                    place.attempting();
                }
                out_of_turn = false;
                match self
                    .attempt(resource, who, ttl, stats, true, stop.as_mut())
                    .await
                {
                    Ok(granted) => {
                        let now = Instant::now();
                        stats.stood_free =
                            free_since.map(|since| now.saturating_duration_since(since));
                        // A semaphore's next waiter tries at once: other
                        // permits may be free (see `super::kinds::semaphore`).
                        if who.holder.limit <= 1 {
                            place.granted(now + ttl);
                        }
                        return Ok(granted);
                    }
                    Err(failure) => {
                        if front {
                            place.attempted(match failure.error {
                                LockError::NoQuorum(votes) => Some(votes),
                                _ => None,
                            });
                        }
                        let now = Instant::now();
                        if now >= give_up_at || ends_the_wait(&failure.error) {
                            return Err(failure.error);
                        }
                        if let (LockError::Contended(_), Some(free_in)) =
                            (&failure.error, failure.holder_free_in)
                        {
                            free_since = Some(now + free_in);
                        }
                        let pause = self.pause_after(&failure, now - started);
                        try_at = Some(now + pause);
                        backing_off_until = is_split(&failure.error).then_some(now + pause);
                        last_error = Some(failure.error);
                    }
                }
            }
            let due = try_at.filter(|_| place.is_front());
            tokio::select! {
                () = sleep_until_some(due) => {}
                wake = place.woken() => {
                    let now = Instant::now();
                    free_since = match wake {
                        Wake::Released { .. } => Some(free_since.map_or(now, |since| since.min(now))),
                        Wake::Front { holder_expires } => holder_expires.or(free_since),
                    };
                    let woken_at = match wake {
                        Wake::Released { at_once: true, .. } | Wake::Front { holder_expires: None } => now,
                        Wake::Released { at_once: false, .. } => now + jitter(TIE_BREAK_JITTER),
                        Wake::Front { holder_expires: Some(expires) } => {
                            expires.min(now + self.settings.wait_fallback) + jitter(TIE_BREAK_JITTER)
                        }
                    };
                    try_at = Some(backing_off_until.map_or(woken_at, |until| until.max(woken_at)));
                }
                () = tokio::time::sleep_until(give_up_at) => {
                    if let Some(error) = last_error {
                        return Err(error);
                    }
                    // Never attempted (others were ahead): the front's
                    // latest outage, or too many masters silent now, if
                    // that is what stood in the way; else the resource
                    // stayed held. With the front's attempt still under
                    // way (its masters may be hung), its outcome first,
                    // for at most a round's longest deadline.
                    let outage = || place.outage().or_else(|| self.silent_majority());
                    let mut found = outage();
                    if found.is_none() {
                        tokio::select! {
                            () = place.attempt_ended() => {}
                            () = tokio::time::sleep(self.longest_round()) => {}
                            () = &mut stop => return Err(LockError::Cancelled),
                        }
                        found = outage();
                    }
                    return Err(found.map_or(LockError::StillHeld, LockError::NoQuorum));
                }
                () = &mut stop => return Err(LockError::Cancelled),
            }
        }
    }

    /// Whether an exclusive acquisition with a request id, queued behind
    /// other waiters, may hold the lock already: its token holds the key
    /// on a majority (a read, no attempt). Then it attempts at once,
    /// wherever it stands: the waiters ahead of it wait for that very lock,
    /// and behind them it would wait out its `wait` and be told ABORTED
    /// about its own lock, which would pass to them when the earlier call's
    /// session ended. Its attempt finds its own token's key and takes the
    /// lock over (`Redlock::resume_own`). Only a read: a first call
    /// (clients send a request id with every acquisition) that attempted
    /// ahead of the queue could take a lock just freed from its front
    /// waiter, or split the vote with it.
    async fn holds_already(&self, resource: &str, who: Claimant<'_>) -> bool {
        let exclusive = who.holder.limit <= 1 && !who.holder.shared;
        match who.fixed {
            Some(token) if exclusive => {
                matches!(self.validate_one(resource, token).await, Ok(Some(_)))
            }
            _ => false,
        }
    }

    /// Plain Redlock: retry after a jittered pause, no queue, no wake-ups.
    pub(super) async fn poll(
        &self,
        resource: &str,
        who: Claimant<'_>,
        ttl: Duration,
        give_up_at: Instant,
        stop: impl Future<Output = ()>,
        stats: &mut AttemptStats,
    ) -> Result<Lock, LockError> {
        tokio::pin!(stop);
        loop {
            let started = Instant::now();
            let failure = match self
                .attempt(resource, who, ttl, stats, false, stop.as_mut())
                .await
            {
                Ok(granted) => return Ok(granted),
                Err(failure) => failure,
            };
            let remaining = give_up_at.saturating_duration_since(Instant::now());
            if remaining.is_zero() || ends_the_wait(&failure.error) {
                return Err(failure.error);
            }
            let mut pause = self.settings.retry.delay(&mut rand::rng(), remaining);
            if is_split(&failure.error) {
                let round = Instant::now() - started;
                pause = pause
                    .max(retry::after_split(&mut rand::rng(), round))
                    .min(remaining);
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = &mut stop => return Err(LockError::Cancelled),
            }
        }
    }

    /// How long the waiter marker a refused front waiter sets lives: past
    /// its next attempt, which comes within `wait_fallback` (plus jitter)
    /// of this one's end and refreshes it while the resource stays held.
    /// With it gone, releases stop publishing notices: other replicas'
    /// releases then wake this waiter only through `wait_fallback`.
    pub(super) fn waiter_marker_ttl(&self) -> Duration {
        self.settings.wait_fallback * 2 + self.settings.node_timeout * 4 + Duration::from_secs(1)
    }

    /// How long the front waiter sleeps after a failed attempt that took
    /// `round`, unless woken (a split vote's back-off: not even then).
    pub(super) fn pause_after(&self, failure: &Failure, round: Duration) -> Duration {
        let fallback = self.settings.wait_fallback;
        let mut rng = rand::rng();
        match (&failure.error, failure.holder_free_in) {
            (LockError::Contended(_), Some(free_in)) => {
                free_in.min(fallback) + jitter(TIE_BREAK_JITTER)
            }
            (LockError::Contended(_), None) => fallback + jitter(TIE_BREAK_JITTER),
            (error, _) if is_split(error) => self
                .settings
                .retry
                .delay(&mut rng, fallback)
                .max(retry::after_split(&mut rng, round)),
            // Masters unreachable or too slow: back off like a library would.
            _ => self.settings.retry.delay(&mut rng, fallback),
        }
    }
}

/// Whether a failed attempt split the vote: no majority either way, and
/// at least one master refused because someone else holds the resource
/// there (without a refusal it is an outage, not contention).
pub(crate) fn is_split(error: &LockError) -> bool {
    matches!(error, LockError::NoQuorum(votes) if votes.no() > 0 && !votes.refused_by_majority())
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

pub(super) fn jitter(max: Duration) -> Duration {
    let micros = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
    Duration::from_micros(rand::rng().random_range(0..=micros))
}

/// A refused attempt no wait outlasts: the resource is held under another
/// limit, or the caller left (`stop` completed: a completed future is
/// never polled again, so the wait must not go round once more).
pub(in crate::redlock) fn ends_the_wait(error: &LockError) -> bool {
    matches!(error, LockError::LimitConflict | LockError::Cancelled)
}
