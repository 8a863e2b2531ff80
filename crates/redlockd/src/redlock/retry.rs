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
pub(crate) struct RetryPolicy {
    /// Shortest pause between attempts.
    pub min: Duration,
    /// Longest pause between attempts.
    pub max: Duration,
}

impl RetryPolicy {
    /// A uniformly random delay in `[min, max]`, never past `remaining`.
    pub(crate) fn delay(&self, rng: &mut impl Rng, remaining: Duration) -> Duration {
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

/// How many rounds the back-off after a split vote spreads over, beyond
/// the one round it always waits (see [`after_split`]).
pub(crate) const SPLIT_SPREAD: u32 = 7;

/// The pause after a split vote: an attempt that found the resource partly
/// taken by someone else, but by no majority (neither side can win this
/// round). Redlock asks for "a random delay longer than the time it takes
/// to reach a majority", so that one contender finishes its next round
/// before the other starts: uniformly random between `round` and
/// `(1 + SPLIT_SPREAD) × round`, where `round` is how long the split
/// attempt took (its acquire round and clean-up; at least 1 ms, tokio's
/// timer tick). Two contenders that drew delays less than a round apart
/// may split again; with a spread of 7 rounds that happens with
/// probability below 1 - (6/7)² < 27 % each time, so a run of k splits has
/// probability below 0.27^k.
pub(crate) fn after_split(rng: &mut impl Rng, round: Duration) -> Duration {
    let round = round.max(Duration::from_millis(1));
    let span = u64::try_from((round * SPLIT_SPREAD).as_micros()).unwrap_or(u64::MAX);
    round + Duration::from_micros(rng.random_range(0..=span))
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

    proptest! {
        /// After a split, the pause is longer than a round and bounded.
        #[test]
        fn split_backoff_longer_than_a_round(seed: u64, round_us in 0u64..200_000) {
            let round = Duration::from_micros(round_us);
            let d = after_split(&mut StdRng::seed_from_u64(seed), round);
            let floor = round.max(Duration::from_millis(1));
            prop_assert!(d >= floor);
            prop_assert!(d <= floor * (1 + SPLIT_SPREAD));
        }
    }

    /// Two contenders that split draw pauses more than a round apart most
    /// of the time, so their next rounds do not overlap: measured over many
    /// draws, at least 60 % (the arithmetic says 73 %).
    #[test]
    fn split_backoffs_separate_contenders() {
        let round = Duration::from_millis(10);
        let mut rng = StdRng::seed_from_u64(11);
        let trials = 10_000;
        let apart = (0..trials)
            .filter(|_| {
                let a = after_split(&mut rng, round);
                let b = after_split(&mut rng, round);
                a.abs_diff(b) > round
            })
            .count();
        assert!(apart * 10 >= trials * 6, "only {apart} of {trials} apart");
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
