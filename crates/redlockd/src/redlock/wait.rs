//! Acquiring a resource that may be held: waiting without blind polling.
//!
//! A caller that may wait joins the resource's local queue
//! ([`super::waiters`]); only the front waiter attempts. After a refused
//! attempt it sleeps until the earliest of:
//! - a release of the resource, through this replica or (via a release
//!   notice on the masters' pub/sub) any other;
//! - the moment the holder's keys expire on enough masters (the refusing
//!   masters report their remaining PTTL);
//! - `wait_fallback`, in case a notice was lost;
//!
//! plus a small random jitter that breaks ties between replicas. Releases
//! publish notices only while some replica has a waiter: the front waiter's
//! refused attempts set the resource's waiter marker on the masters that
//! refused (atomically with the refusal, so a release after it sees the
//! marker), and the release script publishes only where it finds one. When the
//! front waiter gets the lock, the next one moves up and waits for the next
//! release. With `wake_on_release` off the engine behaves like a Redlock
//! library: every waiter retries after a jittered pause.

use super::attempt::{AttemptStats, Failure};
use super::waiters::Wake;
use super::{Lock, LockError, Redlock};
use crate::metrics;
use rand::Rng;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Upper bound of the jitter added to wake-ups, to break ties between
/// replicas whose waiters were woken by the same release.
const TIE_BREAK_JITTER: Duration = Duration::from_millis(1);

impl Redlock {
    /// Takes the lock on `resource` for `ttl`, waiting up to `wait` while it
    /// is held elsewhere or masters are unreachable (zero: one attempt).
    pub async fn acquire(
        &self,
        resource: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lock, LockError> {
        self.acquire_until_stopped(resource, ttl, wait, std::future::pending())
            .await
    }

    /// [`Redlock::acquire`] on a task of its own, so that dropping the returned
    /// future (the caller cancelled, or its deadline passed) never leaves a
    /// lock behind: the task stops waiting, and a grant that completes after
    /// the caller has gone is released at once.
    pub fn acquire_detached(
        self: &Arc<Self>,
        resource: String,
        ttl: Duration,
        wait: Duration,
    ) -> DetachedAcquire {
        let engine = Arc::clone(self);
        let (mut answer, answered) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let result = engine
                .acquire_until_stopped(&resource, ttl, wait, answer.closed())
                .await;
            if let Err(Ok(orphan)) = answer.send(result) {
                engine.release_orphan(orphan);
            }
        });
        DetachedAcquire {
            answered,
            engine: Arc::clone(self),
        }
    }

    /// Releases a grant nobody will receive, in the background. Best effort:
    /// if this fails too, the lock expires with its ttl.
    fn release_orphan(self: &Arc<Self>, orphan: Lock) {
        tracing::debug!(resource = %orphan.resource, "caller left during acquire; releasing");
        let engine = Arc::clone(self);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = engine.release(&orphan.resource, &orphan.token).await;
            });
        }
    }

    /// Attempts until a grant, until `wait` elapses, or until `stop`
    /// completes. `stop` is only heeded between attempts: an attempt always
    /// runs to its end, which cleans up after itself.
    async fn acquire_until_stopped(
        &self,
        resource: &str,
        ttl: Duration,
        wait: Duration,
        stop: impl Future<Output = ()>,
    ) -> Result<Lock, LockError> {
        let mut stats = AttemptStats::default();
        let result = if wait.is_zero() {
            tokio::pin!(stop);
            self.attempt(resource, ttl, Duration::ZERO, &mut stats, stop)
                .await
                .map_err(|f| f.error)
        } else {
            let started = Instant::now();
            let give_up_at = started + wait;
            let result = if self.settings.wake_on_release {
                self.wait_in_queue(resource, ttl, give_up_at, stop, &mut stats)
                    .await
            } else {
                self.poll(resource, ttl, give_up_at, stop, &mut stats).await
            };
            metrics::waited(started.elapsed());
            result
        };
        metrics::acquisition(stats.attempts, stats.contended);
        result
    }

    /// The queue: first come first served, woken by releases and expiries.
    async fn wait_in_queue(
        &self,
        resource: &str,
        ttl: Duration,
        give_up_at: Instant,
        stop: impl Future<Output = ()>,
        stats: &mut AttemptStats,
    ) -> Result<Lock, LockError> {
        let mut place = self.waiters.join(resource)?;
        tokio::pin!(stop);
        let mut try_at = place.is_front().then(Instant::now);
        let mut last_error = None;
        loop {
            // Due now: attempt without going through a timer (tokio's timer
            // rounds every sleep up to its 1 ms tick).
            if place.is_front() && try_at.is_some_and(|at| at <= Instant::now()) {
                let marker = self.waiter_marker_ttl();
                match self
                    .attempt(resource, ttl, marker, stats, stop.as_mut())
                    .await
                {
                    Ok(granted) => {
                        place.granted(Instant::now() + ttl);
                        return Ok(granted);
                    }
                    Err(failure) => {
                        let now = Instant::now();
                        if now >= give_up_at {
                            return Err(failure.error);
                        }
                        try_at = Some(now + self.pause_after(&failure));
                        last_error = Some(failure.error);
                    }
                }
            }
            let due = try_at.filter(|_| place.is_front());
            tokio::select! {
                () = sleep_until_some(due) => {}
                wake = place.woken() => {
                    let now = Instant::now();
                    try_at = Some(match wake {
                        Wake::Released { at_once: true } | Wake::Front { holder_expires: None } => now,
                        Wake::Released { at_once: false } => now + jitter(TIE_BREAK_JITTER),
                        Wake::Front { holder_expires: Some(expires) } => {
                            expires.min(now + self.settings.wait_fallback) + jitter(TIE_BREAK_JITTER)
                        }
                    });
                }
                () = tokio::time::sleep_until(give_up_at) => {
                    return Err(last_error.unwrap_or(LockError::StillHeld));
                }
                () = &mut stop => return Err(LockError::Cancelled),
            }
        }
    }

    /// Plain Redlock: retry after a jittered pause, no queue, no wake-ups.
    async fn poll(
        &self,
        resource: &str,
        ttl: Duration,
        give_up_at: Instant,
        stop: impl Future<Output = ()>,
        stats: &mut AttemptStats,
    ) -> Result<Lock, LockError> {
        tokio::pin!(stop);
        loop {
            let attempt = self.attempt(resource, ttl, Duration::ZERO, stats, stop.as_mut());
            let failure = match attempt.await {
                Ok(granted) => return Ok(granted),
                Err(failure) => failure,
            };
            let remaining = give_up_at.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(failure.error);
            }
            let pause = self.settings.retry.delay(&mut rand::rng(), remaining);
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
    fn waiter_marker_ttl(&self) -> Duration {
        self.settings.wait_fallback * 2 + self.settings.node_timeout * 4 + Duration::from_secs(1)
    }

    /// How long the front waiter sleeps after a failed attempt, unless woken.
    fn pause_after(&self, failure: &Failure) -> Duration {
        let fallback = self.settings.wait_fallback;
        match (&failure.error, failure.holder_free_in) {
            (LockError::Contended(_), Some(free_in)) => {
                free_in.min(fallback) + jitter(TIE_BREAK_JITTER)
            }
            (LockError::Contended(_), None) => fallback + jitter(TIE_BREAK_JITTER),
            // Masters unreachable or too slow: back off like a library would.
            _ => self.settings.retry.delay(&mut rand::rng(), fallback),
        }
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn jitter(max: Duration) -> Duration {
    let micros = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
    Duration::from_micros(rand::rng().random_range(0..=micros))
}

/// The answer of [`Redlock::acquire_detached`]. Dropping it before it
/// completes releases whatever the acquisition still grants: a grant already
/// handed over but not yet received included.
pub struct DetachedAcquire {
    answered: tokio::sync::oneshot::Receiver<Result<Lock, LockError>>,
    engine: Arc<Redlock>,
}

impl Future for DetachedAcquire {
    type Output = Result<Lock, LockError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.answered)
            .poll(cx)
            .map(|answer| {
                answer.unwrap_or(Err(LockError::Internal(
                    "the acquisition task ended without an answer",
                )))
            })
    }
}

impl Drop for DetachedAcquire {
    fn drop(&mut self) {
        // After `close`, the task's send fails (and it releases by itself),
        // or its answer is already here and is released now.
        self.answered.close();
        if let Ok(Ok(orphan)) = self.answered.try_recv() {
            self.engine.release_orphan(orphan);
        }
    }
}
