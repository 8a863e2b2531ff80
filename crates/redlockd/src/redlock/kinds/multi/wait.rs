//! Waiting for a lock on several resources (see [`super`]): in the queue
//! of every resource, attempting when any of them wakes the caller, when
//! the holders' keys expire, or after the fallback.

use crate::redlock::attempt::AttemptStats;
use crate::redlock::wait::{is_split, jitter, TIE_BREAK_JITTER};
use crate::redlock::waiters::Wake;
use crate::redlock::{Holder, Lock, LockError, Redlock};
use futures::future::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Redlock {
    /// Waiting (see [`super`]): in every resource's queue, attempting when
    /// any wakes us, when the holders' keys expire, or after the fallback.
    pub(super) async fn wait_multi<S: Future<Output = ()>>(
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
                        if now >= give_up_at || crate::redlock::wait::ends_the_wait(&failure.error)
                        {
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
                        backing_off_until = is_split(&failure.error).then_some(now + pause);
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
}
