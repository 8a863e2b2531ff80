//! The pause between two acquisition attempts while a resource is held.
//!
//! Redlock asks for a random delay so that contenders that collided do not
//! collide again in lock-step. The RNG is a parameter so the arithmetic can be
//! tested; the engine's wait loop calls [`RetryPolicy::delay`] between
//! attempts when `wake_on_release` is off; with it on, only after an
//! attempt that masters failed (unreachable or too slow), since a refused
//! one waits for a release or the holder's expiry instead (see
//! [`super::wait`]).

use rand::Rng;
use std::time::Duration;

/// Bounds of the jittered delay between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Shortest pause between attempts.
    pub min: Duration,
    /// Longest pause between attempts.
    pub max: Duration,
}

impl RetryPolicy {
    /// A uniformly random delay in `[min, max]`, never past `remaining`.
    pub fn delay(&self, rng: &mut impl Rng, remaining: Duration) -> Duration {
        let (lo, hi) = if self.min <= self.max {
            (self.min, self.max)
        } else {
            (self.max, self.min)
        };
        let span = u64::try_from((hi - lo).as_micros()).unwrap_or(u64::MAX);
        let jitter = Duration::from_micros(rng.random_range(0..=span));
        (lo + jitter).min(remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{rngs::StdRng, SeedableRng};

    proptest! {
        /// Delays stay inside the bounds and never overrun the wait.
        #[test]
        fn delay_in_bounds(seed: u64, min_ms in 0u64..1000, extra_ms in 0u64..1000, remaining_ms in 0u64..3000) {
            let policy = RetryPolicy { min: Duration::from_millis(min_ms), max: Duration::from_millis(min_ms + extra_ms) };
            let remaining = Duration::from_millis(remaining_ms);
            let d = policy.delay(&mut StdRng::seed_from_u64(seed), remaining);
            prop_assert!(d <= remaining);
            prop_assert!(d <= policy.max);
            prop_assert!(d >= policy.min.min(remaining));
        }
    }

    /// Different seeds spread contenders apart.
    #[test]
    fn delays_are_jittered() {
        let policy = RetryPolicy {
            min: Duration::from_millis(5),
            max: Duration::from_millis(50),
        };
        let mut rng = StdRng::seed_from_u64(7);
        let delays: std::collections::HashSet<_> = (0..20)
            .map(|_| policy.delay(&mut rng, Duration::MAX))
            .collect();
        assert!(delays.len() > 10);
    }
}
