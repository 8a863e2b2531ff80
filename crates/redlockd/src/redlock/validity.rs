//! How long a lock is guaranteed to be held: `ttl - elapsed - drift`.
//!
//! The masters count a key's time to live on their own clocks, which may run
//! a little faster than ours; `drift` is the allowance for that (Redlock's
//! `ttl * drift_factor + 2 ms`). Everything here is saturating: validity can
//! never exceed the ttl and is `None` once nothing is left.
//!
//! An operation's validity and its [`Deadline`] come from one reading of
//! the clocks ([`Started::validity`]), so everything downstream (a session's
//! `lost`, the validity it reports) counts from that instant, not from
//! whenever the answer reached it. The time an operation took counts a host
//! suspend (CLOCK_BOOTTIME, see [`super::boottime`]): the masters' keys kept
//! expiring while the host was suspended.

use super::boottime;
use std::time::Duration;
use tokio::time::Instant;

/// When a lock stops being guaranteed: `start + ttl - drift` of the
/// operation that granted or extended it, on the monotonic clock and on the
/// boot clock (which counts a host suspend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deadline {
    /// On the monotonic clock (tokio's, so paused time in tests).
    pub mono: Instant,
    /// On the boot clock.
    pub(crate) boot: Duration,
}

impl Deadline {
    /// Guaranteed time left now (zero once passed), on the earlier of the
    /// two clocks.
    pub(crate) fn left(&self) -> Duration {
        let mono = self.mono.saturating_duration_since(Instant::now());
        let boot = self.boot.saturating_sub(boottime::now());
        mono.min(boot)
    }

    /// Whether the boot clock has passed it (after a suspend, before the
    /// monotonic clock does).
    pub(crate) fn passed_on_boot_clock(&self) -> bool {
        boottime::now() >= self.boot
    }
}

/// The start of an operation on both clocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started {
    mono: Instant,
    boot: Duration,
}

impl Started {
    /// Now.
    pub(crate) fn now() -> Started {
        Started {
            mono: Instant::now(),
            boot: boottime::now(),
        }
    }

    /// The start on the monotonic clock.
    pub(crate) fn mono(&self) -> Instant {
        self.mono
    }

    /// Time since the start, a host suspend included.
    pub(crate) fn elapsed(&self) -> Duration {
        self.elapsed_at(Instant::now(), boottime::now())
    }

    fn elapsed_at(&self, mono: Instant, boot: Duration) -> Duration {
        mono.saturating_duration_since(self.mono)
            .max(boot.saturating_sub(self.boot))
    }

    /// The validity left now of a lease of `ttl` granted since the start,
    /// and its deadline, from one reading of the clocks; `None` when nothing
    /// is left.
    pub(crate) fn validity(
        &self,
        ttl: Duration,
        drift_factor: f64,
    ) -> Option<(Duration, Deadline)> {
        let (mono, boot) = (Instant::now(), boottime::now());
        let left = validity(ttl, self.elapsed_at(mono, boot), drift_factor)?;
        Some((
            left,
            Deadline {
                mono: mono + left,
                boot: boot + left,
            },
        ))
    }
}

/// Fixed part of the drift allowance: covers the masters' millisecond
/// granularity of key expiry.
pub(crate) const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// The clock drift allowance for a lease of length `ttl`.
pub(crate) fn drift(ttl: Duration, drift_factor: f64) -> Duration {
    // `drift_factor` is validated to be finite and in [0, 0.5) at start-up;
    // `try_from_secs_f64` still guards against anything else.
    let proportional =
        Duration::try_from_secs_f64(ttl.as_secs_f64() * drift_factor).unwrap_or(Duration::MAX);
    proportional.saturating_add(DRIFT_FLOOR)
}

/// The validity left after an operation that took `elapsed` granted a lease of
/// `ttl`; `None` when the lease is already used up (the lock must not be
/// reported as held).
pub(crate) fn validity(ttl: Duration, elapsed: Duration, drift_factor: f64) -> Option<Duration> {
    ttl.checked_sub(elapsed)?
        .checked_sub(drift(ttl, drift_factor))
        .filter(|v| !v.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// The textbook example: 10 s ttl, 1% drift, 100 ms elapsed.
    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        assert_eq!(drift(MS(10_000), 0.01), MS(102));
        assert_eq!(validity(MS(10_000), MS(100), 0.01), Some(MS(9_798)));
    }

    /// A lease eaten up by the acquisition itself is no lease.
    #[test]
    fn no_validity_when_elapsed_reaches_ttl() {
        assert_eq!(validity(MS(100), MS(100), 0.01), None);
        assert_eq!(validity(MS(100), MS(97), 0.01), None); // 100 - 97 - 3 = 0
        assert_eq!(validity(MS(100), MS(96), 0.01), Some(MS(1)));
        assert_eq!(validity(MS(100), MS(5_000), 0.01), None);
    }

    /// The deadline is the start plus ttl less drift, on both clocks, and
    /// the time taken counts a suspend of the host.
    #[tokio::test(start_paused = true)]
    async fn deadline_from_the_start_and_suspends_count() {
        let start = Started::now();
        tokio::time::sleep(MS(100)).await;
        let (left, deadline) = start.validity(MS(10_000), 0.01).expect("valid");
        assert_eq!(left, MS(9_798));
        assert_eq!(deadline.mono, start.mono() + MS(10_000) - MS(102));
        assert_eq!(deadline.left(), MS(9_798));
        boottime::suspend_for_test(MS(3_000));
        assert_eq!(start.elapsed(), MS(3_100));
        assert_eq!(deadline.left(), MS(6_798), "the suspend is counted");
        assert!(!deadline.passed_on_boot_clock());
        let (left, _) = start.validity(MS(10_000), 0.01).expect("valid");
        assert_eq!(left, MS(6_798));
        boottime::suspend_for_test(MS(7_000));
        assert!(deadline.passed_on_boot_clock());
        assert_eq!(start.validity(MS(10_000), 0.01), None);
    }

    /// Zero drift factor still keeps the fixed 2 ms.
    #[test]
    fn zero_factor_keeps_floor() {
        assert_eq!(drift(MS(1_000), 0.0), DRIFT_FLOOR);
    }

    proptest! {
        /// Validity is never above ttl - drift, and none once elapsed >= ttl.
        #[test]
        fn validity_is_bounded(ttl_ms in 0u64..10_000_000, elapsed_ms in 0u64..10_000_000, factor in 0.0f64..0.5) {
            let (ttl, elapsed) = (MS(ttl_ms), MS(elapsed_ms));
            match validity(ttl, elapsed, factor) {
                Some(v) => {
                    prop_assert!(v > Duration::ZERO);
                    prop_assert!(v + elapsed + drift(ttl, factor) <= ttl);
                }
                None => prop_assert!(elapsed + drift(ttl, factor) >= ttl),
            }
            if elapsed >= ttl {
                prop_assert!(validity(ttl, elapsed, factor).is_none());
            }
        }
    }
}
