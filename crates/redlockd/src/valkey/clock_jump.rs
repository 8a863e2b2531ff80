//! Clock jumps on a master: between two readings of its `TIME`, did its
//! wall clock move as far as our monotonic clock did, within the drift
//! allowance?
//!
//! Why it matters: a master expires keys by its own clock, so a master
//! whose clock jumps forward expires every lock early, and a lock granted
//! before the jump may be granted again. A jump quarantines the master
//! (`super::state::NodeState::quarantine_now`), so the check must not
//! mistake the daemon's own slowness for a jump.
//!
//! # The measurement's uncertainty
//!
//! Each reading asks at our `asked` and gets the answer `rtt` later; the
//! master read its clock somewhere in between. Comparing the *midpoints*
//! of two readings, the master's true movement may differ from ours by up
//! to half of each round trip. Both count: a reading taken during a burst
//! (the `TIME` waited behind batches on the master's connection, or its
//! answer waited unread in a busy daemon) can be hundreds of milliseconds
//! late, and the *next* brisk reading would then see the master's clock
//! move that much less than ours. Counting only the later reading's round
//! trip turned a slow spell (every master 250 ms slower each way for a few
//! seconds, `node_timeout` 1 s: `tests/clock_offset.rs`) into a quarantine
//! of every master.
//!
//! # Slow readings
//!
//! A reading whose round trip exceeds `node_timeout` is inconclusive
//! (`super::offset::Offset::conclusive`, the same rule for the offset):
//! it never becomes the baseline ([`JumpWatch`]), since every later
//! comparison would carry its large uncertainty. It is still compared with
//! the last conclusive baseline, with half its round trip in the allowance:
//! under sustained load every reading may be slow, and skipping them all
//! (as the check did before) left a master's clock unwatched for as long
//! as the load lasted. A jump larger than the readings' uncertainty is
//! caught then too; a smaller one waits for the next brisk reading, which
//! is compared with the last brisk one over a longer interval. A reading
//! that failed outright (no answer within the reading's own, longer
//! timeout) leaves the baseline as it was: it says nothing about the
//! clock.

use std::time::Duration;
use tokio::time::Instant;

/// One reading of a master's wall clock, against our monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClockReading {
    /// When we sent `TIME` (monotonic).
    pub asked: Instant,
    /// How long its answer took to come back.
    pub rtt: Duration,
    /// The master's clock, as time since the Unix epoch.
    pub master: Duration,
}

/// What [`compare`] found between two readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ClockCheck {
    /// How far the master's clock moved, minus how far ours did, per unit
    /// of ours (the `redlock_node_clock_skew` gauge).
    pub rate: f64,
    /// Whether the difference is beyond the drift allowance plus the
    /// readings' uncertainty: a jump.
    pub jumped: bool,
}

/// The jump check's memory between readings (`super::watch`): the last
/// conclusive reading, against which every later one is compared.
#[derive(Debug, Default)]
pub(crate) struct JumpWatch {
    baseline: Option<ClockReading>,
}

impl JumpWatch {
    /// Compares `reading` with the baseline, whatever its round trip (the
    /// allowance counts half of each), and makes it the baseline if it is
    /// `conclusive`. `None` before any baseline.
    pub(crate) fn observe(
        &mut self,
        reading: ClockReading,
        conclusive: bool,
        drift_factor: f64,
    ) -> Option<(ClockReading, ClockCheck)> {
        let check = self
            .baseline
            .map(|then| (then, compare(&then, &reading, drift_factor)));
        if conclusive {
            self.baseline = Some(reading);
        }
        check
    }
}

impl ClockReading {
    /// The reading's midpoint on our monotonic clock.
    fn midpoint(&self) -> Instant {
        self.asked + self.rtt / 2
    }
}

/// Compares two readings of one master, `then` before `now`: the master's
/// movement against ours, allowed `drift_factor` of the interval, plus
/// 2 ms, plus half of each reading's round trip. A master clock that went
/// backwards moved "zero": a jump too.
pub(crate) fn compare(then: &ClockReading, now: &ClockReading, drift_factor: f64) -> ClockCheck {
    let local = now
        .midpoint()
        .saturating_duration_since(then.midpoint())
        .as_secs_f64();
    let master = now
        .master
        .checked_sub(then.master)
        .unwrap_or_default()
        .as_secs_f64();
    let rate = if local > 0.0 {
        (master - local) / local
    } else {
        0.0
    };
    let uncertainty = (then.rtt + now.rtt).as_secs_f64() / 2.0;
    let allowance = local * drift_factor + 0.002 + uncertainty;
    ClockCheck {
        rate,
        jumped: (master - local).abs() > allowance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// A reading asked `at` ms after `origin` and answered `rtt` ms later,
    /// in which the master's clock read `master_at` ms (past a fixed epoch).
    fn reading(origin: Instant, at: u64, rtt: u64, master_at: u64) -> ClockReading {
        ClockReading {
            asked: origin + MS(at),
            rtt: MS(rtt),
            master: Duration::from_secs(1_700_000_000) + MS(master_at),
        }
    }

    /// Steady clocks pass; the rate is reported.
    #[test]
    fn steady_clocks_pass() {
        let o = Instant::now();
        let check = compare(&reading(o, 0, 2, 1), &reading(o, 5_000, 2, 5_002), 0.01);
        assert!(!check.jumped);
        assert!((check.rate - 0.0002).abs() < 1e-9, "{}", check.rate);
    }

    /// A one-second jump either way is caught.
    #[test]
    fn jumps_are_caught() {
        let o = Instant::now();
        let forward = compare(&reading(o, 0, 1, 0), &reading(o, 5_000, 1, 6_000), 0.01);
        assert!(forward.jumped);
        let backward = compare(&reading(o, 0, 1, 0), &reading(o, 5_000, 1, 4_000), 0.01);
        assert!(backward.jumped);
        let behind_start = compare(&reading(o, 0, 1, 5_000), &reading(o, 5_000, 1, 0), 0.01);
        assert!(
            behind_start.jumped,
            "a clock that went backwards past the start"
        );
    }

    /// The case that quarantined every master after a slow spell: the
    /// earlier reading took 300 ms (the master read its clock 290 ms after
    /// our ask), the later one was brisk. The
    /// master's clock moved 5 s less 290 ms while ours moved 5 s, which is
    /// within the earlier reading's uncertainty: no jump.
    #[test]
    fn a_slow_earlier_reading_is_not_a_jump() {
        let o = Instant::now();
        let then = reading(o, 0, 300, 290);
        let now = reading(o, 5_000, 1, 5_000);
        assert!(!compare(&then, &now, 0.01).jumped);
        // Counting only the later round trip, as before, called it a jump:
        // 290 ms off, against 50 ms of drift + 2 ms + 1 ms.
        let only_later = 5.0 * 0.01 + 0.002 + 0.001;
        assert!(0.290 > only_later);
    }

    /// Under sustained load every reading is slow: each is still compared
    /// with the last brisk baseline, so a jump larger than the readings'
    /// uncertainty is caught; a slow reading never becomes the baseline,
    /// and steady clocks read slowly are never called a jump.
    #[test]
    fn slow_readings_are_compared_but_never_the_baseline() {
        let o = Instant::now();
        let mut watch = JumpWatch::default();
        assert!(watch.observe(reading(o, 0, 2, 1), true, 0.01).is_none());
        // Steady clock, every reading 300 ms slow (the master answers at
        // any point of it): never a jump.
        for (i, at) in [5_000u64, 10_000, 15_000].into_iter().enumerate() {
            let answered_at = at + 100 * i as u64;
            let (then, check) = watch
                .observe(reading(o, at, 300, answered_at + 1), false, 0.01)
                .expect("compared");
            assert_eq!(then.asked, o, "the brisk baseline stays");
            assert!(!check.jumped, "a steady clock read slowly at {at} ms");
        }
        // The clock jumps 2 s ahead: caught although the reading is slow.
        let (_, check) = watch
            .observe(reading(o, 20_000, 300, 22_150), false, 0.01)
            .expect("compared");
        assert!(check.jumped);
    }

    /// The uncertainty does not hide a jump larger than itself.
    #[test]
    fn a_jump_beyond_the_uncertainty_is_still_caught() {
        let o = Instant::now();
        let then = reading(o, 0, 40, 20);
        let now = reading(o, 5_000, 40, 5_020 + 500);
        assert!(compare(&then, &now, 0.01).jumped);
    }
}
