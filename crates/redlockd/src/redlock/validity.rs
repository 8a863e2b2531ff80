//! How long a lock is guaranteed to be held: `ttl - elapsed - drift`.
//!
//! The masters count a key's time to live on their own clocks, which may run
//! a little faster than ours; `drift` is the allowance for that (Redlock's
//! `ttl * drift_factor + 2 ms`). Everything here is saturating: validity can
//! never exceed the ttl and is `None` once nothing is left.

use std::time::Duration;

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
