//! Cross-kind exclusion and cross-kind fence order, over the grants of one
//! resource of every kind (plain, shared, permits of any limit, members of
//! locks on several resources), by the conflict relation of `HISTORY.md`
//! ([`Kind::conflicts`]): equal tokens are one lock (a retry with a
//! request id) and never conflict.
//!
//! - [`exclusion`]: no two conflicting grants' windows (cut at their
//!   Release's send) overlap ([`Check::Overlap`]), and at no moment are
//!   more than L permits of limit L held ([`Check::SemaphoreLimit`]).
//! - [`fence_order`]: a grant requested after a conflicting grant was
//!   received (certainly later) has a greater fence, and two conflicting
//!   grants never share one ([`Check::FenceOrder`]).

use crate::findings::{describe, Check, Findings, KindFigures, Violation};
use crate::history::{Grant, Kind, Time};
use std::collections::{HashMap, HashSet};

/// Whether `a` and `b` exclude each other: distinct tokens and
/// conflicting kinds.
pub(crate) fn conflict(a: &Grant, b: &Grant) -> bool {
    a.token != b.token && a.kind.conflicts(a.permit, b.kind, b.permit)
}

/// A grant's windows, each cut at its Release's send; empty ones dropped.
fn windows(g: &Grant) -> impl Iterator<Item = (Time, Time)> + '_ {
    let cut = g.release.map_or(Time::MAX, |r| r.sent);
    g.windows
        .iter()
        .map(move |w| (w.start, w.end.min(cut)))
        .filter(|(start, end)| start < end)
}

/// No two conflicting grants of one resource held at once; at most L
/// permits of limit L.
pub(crate) fn exclusion(grants: &[&Grant], findings: &mut Findings, figures: &mut KindFigures) {
    let mut all: Vec<(Time, Time, &Grant)> = grants
        .iter()
        .flat_map(|g| windows(g).map(move |(s, e)| (s, e, *g)))
        .collect();
    all.sort_by_key(|(start, _, _)| *start);
    // Windows still open at the sweep's point.
    let mut open: Vec<(Time, &Grant)> = Vec::new();
    let (mut flagged, mut together) = (HashSet::new(), HashSet::new());
    // Limits already reported over, until they come back under.
    let mut over: HashSet<u32> = HashSet::new();
    for (start, end, g) in all {
        open.retain(|(e, _)| *e > start);
        for (other_end, other) in &open {
            if other.id == g.id || other.token == g.token {
                continue;
            }
            let pair = (other.id.min(g.id), other.id.max(g.id));
            if conflict(g, other) {
                if flagged.insert(pair) {
                    findings.violations.push(Violation {
                        check: Check::Overlap,
                        detail: format!(
                            "{}: {} {} overlaps {} {} by {:.1} ms",
                            g.resource,
                            label(g),
                            describe(g),
                            label(other),
                            describe(other),
                            ((*other_end).min(end) - start).as_secs_f64() * 1e3
                        ),
                    });
                }
            } else if together.insert(pair) {
                match (g.kind, other.kind) {
                    (Kind::Shared, Kind::Shared) => figures.shared_overlaps += 1,
                    _ => figures.pairs_held_together += 1,
                }
            }
        }
        open.push((end, g));
        if let Kind::Permit(limit) = g.kind {
            let held: HashSet<&str> = open
                .iter()
                .filter(|(_, o)| o.kind == g.kind)
                .map(|(_, o)| o.token.as_str())
                .collect();
            let most = figures.most_permits.entry(limit).or_default();
            *most = (*most).max(held.len());
            if held.len() <= limit as usize {
                over.remove(&limit);
            } else if over.insert(limit) {
                let holders: Vec<String> = open
                    .iter()
                    .filter(|(_, o)| o.kind == g.kind)
                    .map(|(_, o)| describe(o))
                    .collect();
                findings.violations.push(Violation {
                    check: Check::SemaphoreLimit,
                    detail: format!(
                        "{}: {} permits of limit {limit} held at {:.3}s: {}",
                        g.resource,
                        held.len(),
                        start.as_secs_f64(),
                        holders.join("; ")
                    ),
                });
            }
        }
    }
}

/// A grant's kind in evidence.
pub(crate) fn label(g: &Grant) -> String {
    match g.kind {
        Kind::Permit(limit) => format!("permit {} of limit {limit}", g.permit),
        kind => kind.name().to_owned(),
    }
}

/// The class of a grant for the fence bound: grants of one class conflict
/// with the same grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Class {
    kind: Kind,
    permit: u32,
}

impl Class {
    fn of(g: &Grant) -> Class {
        let permit = match g.kind {
            Kind::Permit(_) => g.permit,
            _ => 0,
        };
        Class {
            kind: g.kind,
            permit,
        }
    }
}

/// The two highest fences of a class with distinct tokens, so that "the
/// highest fence of a grant with another token" is known at once.
#[derive(Debug, Clone, Copy, Default)]
struct TopTwo<'a> {
    first: Option<&'a Grant>,
    second: Option<&'a Grant>,
}

impl<'a> TopTwo<'a> {
    fn add(&mut self, g: &'a Grant) {
        let mut entries: Vec<&'a Grant> = [self.first, self.second].into_iter().flatten().collect();
        match entries.iter_mut().find(|e| e.token == g.token) {
            Some(same) if g.fence > same.fence => *same = g,
            Some(_) => {}
            None => entries.push(g),
        }
        entries.sort_by_key(|e| std::cmp::Reverse(e.fence));
        self.first = entries.first().copied();
        self.second = entries.get(1).copied();
    }

    /// The grant with the highest fence whose token is not `token`.
    fn other_than(&self, token: &str) -> Option<&'a Grant> {
        match self.first {
            Some(f) if f.token == token => self.second,
            first => first,
        }
    }
}

/// A grant requested after a conflicting one was received has a greater
/// fence; conflicting grants never share a fence.
pub(crate) fn fence_order(grants: &[&Grant], findings: &mut Findings) {
    let mut by_received: Vec<&Grant> = grants.to_vec();
    by_received.sort_by_key(|g| g.received);
    let mut by_sent: Vec<&Grant> = grants.to_vec();
    by_sent.sort_by_key(|g| g.sent);
    let mut next = 0;
    let mut highest: HashMap<Class, TopTwo> = HashMap::new();
    let mut flagged = HashSet::new();
    for later in by_sent {
        while let Some(g) = by_received.get(next).filter(|g| g.received < later.sent) {
            highest.entry(Class::of(g)).or_default().add(g);
            next += 1;
        }
        let bound = highest
            .iter()
            .filter(|(class, _)| later.kind.conflicts(later.permit, class.kind, class.permit))
            .filter_map(|(_, top)| top.other_than(&later.token))
            .max_by_key(|g| g.fence);
        if let Some(earlier) = bound.filter(|h| h.fence >= later.fence) {
            flagged.insert(later.id);
            findings.violations.push(Violation {
                check: Check::FenceOrder,
                detail: format!(
                    "{}: {} {} requested after {} {} was received",
                    later.resource,
                    label(later),
                    describe(later),
                    label(earlier),
                    describe(earlier)
                ),
            });
        }
    }
    let mut by_fence: HashMap<u64, Vec<&Grant>> = HashMap::new();
    for g in grants {
        by_fence.entry(g.fence).or_default().push(g);
    }
    for same in by_fence.values().filter(|s| s.len() > 1) {
        for (i, a) in same.iter().enumerate() {
            for b in &same[i + 1..] {
                if conflict(a, b) && !flagged.contains(&a.id) && !flagged.contains(&b.id) {
                    flagged.insert(b.id);
                    findings.violations.push(Violation {
                        check: Check::FenceOrder,
                        detail: format!(
                            "{}: fence {} granted twice: {} {} and {} {}",
                            a.resource,
                            a.fence,
                            label(a),
                            describe(a),
                            label(b),
                            describe(b)
                        ),
                    });
                }
            }
        }
    }
}
