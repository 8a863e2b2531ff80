//! A grant's `hold_at_least` kept (ShedLock's lockAtLeastFor): a Release
//! sent before the hold has run shortens the lock to end then instead of
//! deleting it (lock.proto, `hold_at_least`), so no conflicting grant may
//! be answered between that Release's send and the hold's end
//! ([`Check::HoldAtLeast`]).
//!
//! The hold's end is taken on the safe side: the masters count it from the
//! acquisition, which is after the Acquire's send (with a request id, the
//! first call's: a retry takes over what an earlier call acquired, and the
//! hold with it, `Grant::hold_from`), by their own clocks,
//! which the daemon allows to run fast by its drift (1% and 2 ms); and it
//! is never taken past the grant's first window (the mix asks holds
//! shorter than the lease). A grant released after its hold ended, or
//! never released, is judged by the window checks alone
//! (`crate::exclusion`).

use crate::exclusion::conflict;
use crate::findings::{describe, Check, Findings, KindFigures, Violation};
use crate::history::{Grant, Time};
use std::time::Duration;

/// The drift the daemon allows the masters' clocks by default
/// (`redlock.drift_factor`), and its fixed part.
const DRIFT: f64 = 0.01;
const DRIFT_FIXED: Duration = Duration::from_millis(2);

/// What the masters' clocks may take off a hold of `hold` (the daemon's
/// drift allowance).
pub(crate) fn allowance(hold: Duration) -> Duration {
    hold.mul_f64(DRIFT) + DRIFT_FIXED
}

/// The end of `g`'s hold that is certain, if it asked for one.
pub(crate) fn certain_end(g: &Grant) -> Option<Time> {
    if g.hold_at_least.is_zero() {
        return None;
    }
    let end = (g.hold_from + g.hold_at_least).saturating_sub(allowance(g.hold_at_least));
    Some(g.windows.first().map_or(end, |w| end.min(w.end)))
}

/// No conflicting grant answered inside a hold its holder released early,
/// over the grants of one resource.
pub(crate) fn hold_at_least(grants: &[&Grant], findings: &mut Findings, figures: &mut KindFigures) {
    for g in grants {
        let (Some(end), Some(release)) = (certain_end(g), g.release) else {
            continue;
        };
        if release.sent >= end {
            continue;
        }
        figures.holds_released_early += 1;
        for other in grants {
            if other.received > release.sent && other.received < end && conflict(g, other) {
                findings.violations.push(Violation {
                    check: Check::HoldAtLeast,
                    detail: format!(
                        "{}: {} answered {:.1} ms into the hold_at_least of {} ({:?}), \
                         released at {:.3}s, its hold certain until {:.3}s",
                        g.resource,
                        describe(other),
                        (other.received - release.sent).as_secs_f64() * 1e3,
                        describe(g),
                        g.hold_at_least,
                        release.sent.as_secs_f64(),
                        end.as_secs_f64()
                    ),
                });
            }
        }
    }
}
