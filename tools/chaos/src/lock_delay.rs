//! A grant left to expire with a `lock_delay`: its client never releases
//! it, as a holder that vanished would not, so the masters keep the
//! resource from every conflicting grant until the lock's expiry plus the
//! delay (lock.proto, `lock_delay`), whatever kind the holder and the
//! others are ([`Check::LockDelay`]). The mix leaves some of its permits
//! so (`crate::mix`); `crate::frozen` judges the other direction, a plain
//! holder frozen, against the mix's kinds.
//!
//! The delay's end is taken on the safe side: the masters count the ttl
//! and the delay from the acquisition, which is after the Acquire's send,
//! by clocks the daemon allows to run fast by its drift. Not judged where a
//! master was restarted without its data between the send (less a lease)
//! and that end:
//! it forgets the delay (the quarantine covers the lock's ttl, not its
//! delay; lock.proto calls the delay an availability feature), and with
//! the masters that never took part in the grant it may make a quorum.

use crate::exclusion::conflict;
use crate::findings::{describe, Check, Findings, KindFigures, Violation};
use crate::history::{Fault, FaultKind, Grant, Time};
use crate::hold_at_least::allowance;

/// The end of `g`'s lock_delay that is certain, if it was left to expire
/// with one.
pub(crate) fn certain_end(g: &Grant) -> Option<Time> {
    let (ttl, delay) = g.left_to_expire?;
    Some((g.sent + ttl + delay).saturating_sub(allowance(ttl + delay)))
}

/// No conflicting grant answered after a grant left to expire with a
/// lock_delay and before its delay certainly ended, over the grants of
/// one resource.
pub(crate) fn left_to_expire(
    grants: &[&Grant],
    faults: &[Fault],
    findings: &mut Findings,
    figures: &mut KindFigures,
) {
    for g in grants {
        let (Some((ttl, delay)), Some(end)) = (g.left_to_expire, certain_end(g)) else {
            continue;
        };
        // Restarted after it may have written the delay (a lease before the
        // send, on the safe side): one that restarted earlier and sat out
        // the grant never had it, as a master the grant did not reach.
        let forgotten = faults.iter().any(|f| {
            f.kind == FaultKind::MasterRestart && f.start + ttl >= g.sent && f.start <= end
        });
        if forgotten {
            continue;
        }
        figures.delays_left_to_expire += 1;
        for other in grants {
            if other.received > g.received && other.received < end && conflict(g, other) {
                findings.violations.push(Violation {
                    check: Check::LockDelay,
                    detail: format!(
                        "{}: {} answered {:.1} ms before the lock_delay of {} ({:?} after a \
                         {:?} ttl, never released) certainly ended at {:.3}s",
                        g.resource,
                        describe(other),
                        (end - other.received).as_secs_f64() * 1e3,
                        describe(g),
                        delay,
                        ttl,
                        end.as_secs_f64()
                    ),
                });
            }
        }
    }
}
