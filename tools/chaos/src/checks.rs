//! The checkers: pure functions over a [`History`]. Each one only flags what
//! the history proves: intervals are taken on the safe side of the client's
//! own latency (see [`crate::history::Window`]), and orders are only used
//! where they are certain (one call answered before the other was sent).

use crate::exclusion;
use crate::findings::{describe, Check, Findings, KindFigures, Violation};
use crate::history::{Fault, Grant, History, Kind, ReleaseRecord, Time, Workload};
use crate::hold_at_least::hold_at_least;
use crate::lock_delay;
use crate::register_checks;
use std::collections::{BTreeMap, HashMap};

/// Runs every checker over `history`.
pub(crate) fn check(history: &History) -> Findings {
    let mut findings = Findings::default();
    let mut kinds = KindFigures::default();
    let mut by_resource: BTreeMap<&str, Vec<&Grant>> = BTreeMap::new();
    for grant in &history.grants {
        by_resource.entry(&grant.resource).or_default().push(grant);
        findings.empty_windows += usize::from(grant.windows.iter().any(|w| w.is_empty()));
        findings.paused += usize::from(grant.paused);
        findings.overran += usize::from(grant.overran());
    }
    for grants in by_resource.values() {
        exclusion::exclusion(grants, &mut findings, &mut kinds);
        hold_at_least(grants, &mut findings, &mut kinds);
        lock_delay::left_to_expire(grants, &history.faults, &mut findings, &mut kinds);
        if grants.len() > 1 {
            exclusion::fence_order(grants, &mut findings);
            critical_sections(grants, &mut findings);
            held_elsewhere(grants, &mut findings);
            expiry_margin(grants, &mut findings);
        }
    }
    findings.kinds = kinds;
    released_not_held(&history.grants, &history.faults, &mut findings);
    let by_id: HashMap<u64, &Grant> = history.grants.iter().map(|g| (g.id, g)).collect();
    for log in &history.registers {
        register_checks::plain(log, &mut findings);
        register_checks::fenced(log, &by_id, &mut findings);
    }
    findings
}

/// The two largest `(end, grant)` among distinct grants seen so far, so that
/// "the largest end of any OTHER grant" is known in O(1).
#[derive(Debug, Clone, Copy, Default)]
struct TopTwo {
    first: Option<(Time, u64)>,
    second: Option<(Time, u64)>,
}

impl TopTwo {
    fn add(&mut self, end: Time, grant: u64) {
        match (self.first, self.second) {
            (Some((e, g)), _) if g == grant => self.first = Some((e.max(end), g)),
            (Some(first), _) if end > first.0 => {
                self.second = Some(first);
                self.first = Some((end, grant));
            }
            (Some(_), Some((e, g))) if g == grant => self.second = Some((e.max(end), g)),
            (Some(_), Some((e, _))) if end <= e => {}
            (Some(_), _) => self.second = Some((end, grant)),
            (None, _) => self.first = Some((end, grant)),
        }
    }

    /// The largest end of a grant other than `grant`.
    fn other_than(&self, grant: u64) -> Option<(Time, u64)> {
        match self.first {
            Some((_, g)) if g == grant => self.second,
            first => first,
        }
    }
}

/// Critical sections of holders that stayed within their validity do not
/// overlap.
fn critical_sections(grants: &[&Grant], findings: &mut Findings) {
    let mut sections: Vec<&Grant> = grants
        .iter()
        .copied()
        .filter(|g| {
            g.workload == Workload::Contended
                && exclusive(g)
                && !g.paused
                && !g.overran()
                && !g.stale_on_arrival()
        })
        .collect();
    sections.sort_by_key(|g| g.received);
    let mut latest: Option<&Grant> = None;
    for g in sections {
        // Equal tokens are one lock (a Hold retried with its request id).
        if let Some(previous) = latest.filter(|p| g.received < p.cs_end && p.token != g.token) {
            findings.violations.push(Violation {
                check: Check::CriticalSections,
                detail: format!(
                    "{}: {} entered while {} was inside until {:.3}s",
                    g.resource,
                    describe(g),
                    describe(previous),
                    previous.cs_end.as_secs_f64()
                ),
            });
        }
        if latest.is_none_or(|p| g.cs_end > p.cs_end) {
            latest = Some(g);
        }
    }
}

/// `was_held = true` is impossible while another holder's guarantee covers
/// the whole Release call: both tokens cannot be on a majority at once.
fn held_elsewhere(grants: &[&Grant], findings: &mut Findings) {
    // One key per token (a retry's grants are one lock): its first grant.
    let mut lock_of: HashMap<&str, u64> = HashMap::new();
    for g in grants {
        lock_of.entry(&g.token).or_insert(g.id);
    }
    let lock = |g: &Grant| lock_of.get(g.token.as_str()).copied().unwrap_or(g.id);
    // Each window, cut at its holder's Release: (start, guaranteed until).
    let mut windows: Vec<(Time, Time, u64)> = grants
        .iter()
        .flat_map(|g| {
            let cut = g.release.map_or(Time::MAX, |r| r.sent);
            let id = lock(g);
            g.windows.iter().map(move |w| (w.start, w.end.min(cut), id))
        })
        .filter(|(start, end, _)| start < end)
        .collect();
    windows.sort_by_key(|(start, _, _)| *start);
    // prefix[i]: the two largest ends among windows[..=i].
    let prefix: Vec<TopTwo> = windows
        .iter()
        .scan(TopTwo::default(), |top, (_, end, id)| {
            top.add(*end, *id);
            Some(*top)
        })
        .collect();
    // Only an exclusive lock's Release: every other grant conflicts with it.
    for g in grants.iter().filter(|g| exclusive(g)) {
        let Some(release) = g.release.filter(|r| r.outcome == Ok(true)) else {
            continue;
        };
        let started = windows.partition_point(|(start, _, _)| *start <= release.sent);
        let Some(top) = started.checked_sub(1).and_then(|i| prefix.get(i)) else {
            continue;
        };
        let own = lock(g);
        if let Some((end, other)) = top.other_than(own).filter(|(e, _)| *e >= release.received) {
            findings.violations.push(Violation {
                check: Check::WasHeld,
                detail: format!(
                    "{}: {} released with was_held=true at {:.3}s..{:.3}s while grant#{other} \
                     was guaranteed until {:.3}s",
                    g.resource,
                    describe(g),
                    release.sent.as_secs_f64(),
                    release.received.as_secs_f64(),
                    end.as_secs_f64()
                ),
            });
        }
    }
}

/// The gap between a window that ran out (no Release before the next
/// grant) and the next grant.
fn expiry_margin(grants: &[&Grant], findings: &mut Findings) {
    let mut sorted: Vec<&Grant> = grants.iter().copied().filter(|g| exclusive(g)).collect();
    sorted.sort_by_key(|g| g.received);
    for pair in sorted.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let expired = a.release.is_none_or(|r| r.sent >= b.received);
        if let Some(gap) = b.received.checked_sub(a.valid_until).filter(|_| expired) {
            findings.tightest_expiry = Some(findings.tightest_expiry.map_or(gap, |t| t.min(gap)));
        }
    }
}

/// Whether `g` is an exclusive lock (plain, a member of a lock on several
/// resources, a leadership): every other grant of its resource conflicts
/// with it.
pub(crate) fn exclusive(g: &Grant) -> bool {
    matches!(g.kind, Kind::Plain | Kind::Multi | Kind::Leader)
}

/// Whether any fault was in effect during `[from, to]`.
fn faulted(faults: &[Fault], from: Time, to: Time) -> bool {
    faults
        .iter()
        .any(|f| f.start <= to && f.counts_until >= from)
}

/// `was_held = false` for a Release made within the holder's validity is a
/// contradiction when no fault could have taken the key away, unless
/// another grant of the same token (a retry with the request id, which
/// takes the lock over: the daemon's `redlock::claim`) was received before
/// the release was sent: the superseded grant no longer holds it, and its
/// release rightly deletes nothing.
fn released_not_held(grants: &[Grant], faults: &[Fault], findings: &mut Findings) {
    for g in grants {
        let first_call = |r: &ReleaseRecord| r.outcome == Ok(false) && r.calls == 1;
        let Some(release) = g.release.filter(first_call) else {
            continue;
        };
        if release.received > g.valid_until {
            continue;
        }
        let superseded = grants
            .iter()
            .any(|o| o.id != g.id && o.token == g.token && o.received <= release.sent);
        if superseded {
            continue;
        }
        if faulted(faults, g.sent, release.received) {
            findings.not_held_under_faults += 1;
            continue;
        }
        findings.violations.push(Violation {
            check: Check::WasHeld,
            detail: format!(
                "{}: {} released with was_held=false at {:.3}s..{:.3}s, within its validity, \
                 with no fault in effect",
                g.resource,
                describe(g),
                release.sent.as_secs_f64(),
                release.received.as_secs_f64()
            ),
        });
    }
}
