//! A master's wall-clock offset from this host's, and
//! the bound beyond which the master is not trusted.
//!
//! # Why the wall clock matters
//!
//! Lock validity uses only elapsed time (monotonic clocks, plus the drift
//! allowance for rates), but fences do not: when a resource's fence hash is
//! gone (expired after `fence_ttl`, or lost by a majority restarting
//! empty), the next fence has only its floor, the granting masters' `TIME`
//! in microseconds (`crate::redlock::fence`). A master whose clock runs
//! ahead by X puts fences up to X ahead of the true time; after the hashes
//! are lost, a later grant from masters with correct clocks gets a smaller
//! fence than an earlier one unless more than X separates them.
//!
//! # The rule
//!
//! At each (re)connection and every few seconds the watcher reads the
//! master's `TIME` between two readings of this host's wall clock, `sent`
//! and `received`. The offset is `master - (sent + received) / 2`, known
//! within half the round trip. The master is refused (does not count
//! toward a quorum; its `TIME` then feeds no fence) while `|offset| +
//! rtt / 2 > max_clock_offset`, that is while it *may* be beyond the
//! bound, and trusted again at the first reading within it. A master whose
//! offset is unknown (no reading yet) is not refused for it. A reading
//! whose round trip exceeds `node_timeout` is not used at all
//! ([`Offset::conclusive`]): on a busy daemon its uncertainty is the
//! daemon's slowness, not the master's clock.
//!
//! # The bound (default 1 s)
//!
//! With every trusted master within B of this host's clock, and the
//! daemons' hosts NTP-synchronised (milliseconds), any floor is within B
//! of true time, so fences stay ordered across a loss of the fence hashes
//! whenever the two grants are more than 2B apart: with B = 1 s, 2 s,
//! where a lost majority must restart, reconnect and wait out its restart
//! quarantine. The bound is far below `max_ttl` (1 h, enforced: it must be
//! below `max_ttl`) and `fence_ttl` (7 days), the scale the fence design
//! already assumes clocks keep to. Smaller bounds risk refusing masters for
//! ordinary NTP corrections and scheduling noise (the round trip is part
//! of the measurement); larger ones widen the window above.
//!
//! The check compares absolute clocks only; clock *jumps* on a master
//! (steps between two readings) are caught by the rate check in
//! `super::watch` and quarantine the master (its keys may have expired).

use std::time::Duration;

/// One reading of a master's clock against ours (all since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Offset {
    /// The master's clock minus ours at the midpoint, in seconds.
    pub(crate) seconds: f64,
    /// Half the round trip, in seconds: how far the true offset may be from
    /// `seconds`.
    pub(crate) uncertainty: f64,
}

impl Offset {
    /// The offset of `master`, read between our `sent` and `received`.
    /// A `received` before `sent` (our clock stepped back) counts as a
    /// zero round trip at `sent`.
    pub(crate) fn measure(master: Duration, sent: Duration, received: Duration) -> Offset {
        let (sent, received) = (
            sent.as_secs_f64(),
            received.as_secs_f64().max(sent.as_secs_f64()),
        );
        let midpoint = (sent + received) / 2.0;
        Offset {
            seconds: master.as_secs_f64() - midpoint,
            uncertainty: (received - sent) / 2.0,
        }
    }

    /// Whether the reading is precise enough to act on: its round trip
    /// within `node_timeout`. A slower one (a `TIME` that waited behind a
    /// burst's batches, or an answer a busy daemon read late) would refuse
    /// a master for the daemon's own slowness, and is left unused, by the
    /// offset bound and the jump check alike (`super::clock_jump`).
    pub(crate) fn conclusive(&self, node_timeout: Duration) -> bool {
        self.uncertainty * 2.0 <= node_timeout.as_secs_f64()
    }

    /// Whether the master's offset may exceed `bound`.
    pub(crate) fn beyond(&self, bound: Duration) -> bool {
        self.seconds.abs() + self.uncertainty > bound.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// The offset is taken at the midpoint of the round trip; a master
    /// ahead or behind by more than the bound (round trip included) is
    /// beyond it; one within it, even with a round trip, is not.
    #[test]
    fn offset_arithmetic() {
        let base = Duration::from_secs(1_700_000_000);
        let same = Offset::measure(base + MS(5), base, base + MS(10));
        assert!(same.seconds.abs() < 1e-6 && (same.uncertainty - 0.005).abs() < 1e-6);
        assert!(!same.beyond(Duration::from_secs(1)));
        let ahead = Offset::measure(base + MS(1_500), base, base + MS(2));
        assert!((ahead.seconds - 1.499).abs() < 1e-6);
        assert!(ahead.beyond(Duration::from_secs(1)));
        let behind = Offset::measure(base - MS(1_200), base, base);
        assert!((behind.seconds + 1.2).abs() < 1e-6);
        assert!(behind.beyond(Duration::from_secs(1)));
        // 991 ms ahead, 20 ms round trip: possibly 1.001 s: beyond; the
        // same reading with a 2 ms round trip is within.
        let edge = Offset::measure(base + MS(1_001), base, base + MS(20));
        assert!(edge.beyond(Duration::from_secs(1)));
        let within = Offset::measure(base + MS(991), base, base + MS(2));
        assert!(!within.beyond(Duration::from_secs(1)));
        // The same clock, but any round trip exceeds a zero-ish bound.
        assert!(same.beyond(Duration::from_micros(1)));
        // Our clock stepped back between the readings: no negative trip.
        let stepped = Offset::measure(base, base + MS(3), base);
        assert!(stepped.uncertainty == 0.0 && (stepped.seconds + 0.003).abs() < 1e-6);
    }

    /// A reading whose round trip exceeds node_timeout is left unused: a
    /// 2.4 s round trip (a burst) would otherwise refuse a master whose
    /// clock is exact, since it *may* be 1.2 s off.
    #[test]
    fn slow_readings_are_inconclusive() {
        let base = Duration::from_secs(1_700_000_000);
        let burst = Offset::measure(base + MS(1_200), base, base + MS(2_400));
        assert!(burst.beyond(Duration::from_secs(1)));
        assert!(!burst.conclusive(MS(50)));
        let brisk = Offset::measure(base + MS(25), base, base + MS(50));
        assert!(brisk.conclusive(MS(50)));
    }
}
