//! The checks of the two registers (see `registers.rs`): the plain one
//! loses no acknowledged update; the fenced one refuses no valid holder and
//! applies no write of a superseded one.

use crate::findings::{describe, Check, Findings, Violation};
use crate::history::{Grant, RegisterLog, Time};
use std::collections::HashMap;

/// Acknowledged writes read distinct values and all survive.
fn lost_updates(
    register: &str,
    resource: &str,
    reads: &mut [(u64, u64)],
    last: u64,
    findings: &mut Findings,
) {
    reads.sort_unstable();
    let mut lost = 0;
    for pair in reads.windows(2) {
        if pair[0].0 == pair[1].0 {
            lost += 1;
            findings.violations.push(Violation {
                check: Check::LostUpdates,
                detail: format!(
                    "{resource}: {register} register: grants #{} and #{} both read {} and \
                     wrote {}: one acknowledged update lost",
                    pair[0].1,
                    pair[1].1,
                    pair[0].0,
                    pair[0].0 + 1
                ),
            });
        }
    }
    if lost == 0 && last != reads.len() as u64 {
        findings.violations.push(Violation {
            check: Check::LostUpdates,
            detail: format!(
                "{resource}: {register} register holds {last} after {} acknowledged increments",
                reads.len()
            ),
        });
    }
}

/// The plain register lost no acknowledged increment.
pub(crate) fn plain(log: &RegisterLog, findings: &mut Findings) {
    let mut reads: Vec<(u64, u64)> = log.plain_writes.iter().map(|w| (w.read, w.grant)).collect();
    lost_updates(
        "plain",
        &log.resource,
        &mut reads,
        log.plain_final,
        findings,
    );
}

/// The fenced register refused no valid holder, applied no write of a
/// superseded one, and lost no applied write.
pub(crate) fn fenced(log: &RegisterLog, grants: &HashMap<u64, &Grant>, findings: &mut Findings) {
    // Over the holders that checked in so far: the latest Acquire sent, and
    // the latest grant received with a non-empty window. A holder that
    // checked in is certainly newer than grant G if it sent its Acquire
    // after G was received, or if it received a live grant after G's
    // guarantee ended (had it been granted before G, G could only have
    // been granted after its lock ended, which is after it was received;
    // anything else is an overlap, flagged on its own).
    let (mut latest_sent, mut latest_live_received) = (Time::ZERO, Time::ZERO);
    let mut applied: Vec<(u64, u64)> = Vec::new();
    for op in &log.fenced_ops {
        let holder = grants.get(&op.grant);
        let paused = holder.is_some_and(|g| g.paused);
        if !op.write {
            if let Some(g) = holder {
                latest_sent = latest_sent.max(g.sent);
                if g.windows.first().is_some_and(|w| !w.is_empty()) {
                    latest_live_received = latest_live_received.max(g.received);
                }
            }
        } else if paused {
            findings.paused_writes_applied += usize::from(op.accepted);
            findings.paused_writes_refused += usize::from(!op.accepted);
        }
        if op.accepted && op.write {
            applied.push((op.read, op.grant));
            // `max(valid_until, received)`: a grant whose validity, counted
            // from its send, had run out on arrival (an empty window) ends
            // before it was received; a holder received before it may be
            // an older one.
            let superseded = |g: &&&Grant| {
                latest_sent > g.received || latest_live_received >= g.valid_until.max(g.received)
            };
            if let Some(g) = holder.filter(superseded) {
                findings.violations.push(Violation {
                    check: Check::StaleWrites,
                    detail: format!(
                        "{}: write of {} applied at {:.3}s after a newer holder had checked in",
                        log.resource,
                        describe(g),
                        op.at.as_secs_f64()
                    ),
                });
            }
        }
        if !op.accepted && op.within_validity {
            let who = holder.map_or_else(|| format!("grant#{}", op.grant), |g| describe(g));
            findings.violations.push(Violation {
                check: Check::FencedValidHolder,
                detail: format!(
                    "{}: {} {} with fence {} refused at {:.3}s, within its validity",
                    log.resource,
                    if op.write { "write" } else { "check-in" },
                    who,
                    op.fence,
                    op.at.as_secs_f64()
                ),
            });
        }
    }
    lost_updates(
        "fenced",
        &log.resource,
        &mut applied,
        log.fenced_final,
        findings,
    );
}
