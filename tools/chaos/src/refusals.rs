//! Two figures of answers the history cannot prove wrong but that a
//! healthy daemon should not give (cross-kind review items 4 and 6):
//! - readers refused while free: a shared Acquire answered ABORTED while
//!   no grant that excludes readers (any kind but shared) had a window
//!   overlapping the call (a stale or unknown holder may still have held
//!   the lock, so only a figure);
//! - a Release answered UNAVAILABLE while every master was answering: no
//!   master was down, stopped, slowed or cut off during the call (restart
//!   quarantines may be running: the masters answer all the same).

use crate::history::{Failure, Fault, FaultKind, Grant, History, Kind, Time};
use std::collections::HashMap;

/// The figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RefusalFigures {
    /// Shared Acquires answered ABORTED, and those with no excluding
    /// window during the call.
    pub shared_aborted: (usize, usize),
    /// The longest such call (ms): how long readers were kept out.
    pub longest_refused_free_ms: u64,
    /// Releases whose (first) call was answered UNAVAILABLE, and those
    /// with every master answering throughout.
    pub release_unavailable: (usize, usize),
}

/// Whether a master was out of reach (not merely quarantined) in
/// `[from, to]`.
fn master_out(faults: &[Fault], from: Time, to: Time) -> bool {
    faults.iter().any(|f| {
        matches!(
            f.kind,
            FaultKind::MasterRestart
                | FaultKind::MasterPause
                | FaultKind::MasterSlow
                | FaultKind::MasterUnreachable
        ) && f.start <= to
            && f.end >= from
    })
}

/// Computes the figures over `history`.
pub(crate) fn figures(history: &History) -> RefusalFigures {
    let mut out = RefusalFigures::default();
    let mut excluding: HashMap<&str, Vec<(Time, Time)>> = HashMap::new();
    for g in history.grants.iter().filter(|g| g.kind != Kind::Shared) {
        let cut = g.release.map_or(Time::MAX, |r| r.sent);
        let spans = excluding.entry(g.resource.as_str()).or_default();
        spans.extend(g.windows.iter().map(|w| (w.start, w.end.min(cut))));
    }
    for call in &history.failed {
        if call.kind != Kind::Shared || call.failure != Failure::Status(tonic::Code::Aborted) {
            continue;
        }
        out.shared_aborted.0 += 1;
        let spans = call
            .resources
            .first()
            .and_then(|r| excluding.get(r.as_str()));
        let held = spans.is_some_and(|spans| {
            spans
                .iter()
                .any(|(start, end)| *start < call.received && *end > call.sent)
        });
        if !held {
            out.shared_aborted.1 += 1;
            let ms = (call.received - call.sent).as_millis() as u64;
            out.longest_refused_free_ms = out.longest_refused_free_ms.max(ms);
        }
    }
    let releases = history.grants.iter().filter_map(|g: &Grant| g.release);
    let unavailable = Err(Failure::Status(tonic::Code::Unavailable));
    let first = |r: &crate::history::ReleaseRecord| match r.first_failure {
        Some(failure) => Err(failure),
        None => r.outcome,
    };
    for r in releases.filter(|r| first(r) == unavailable) {
        out.release_unavailable.0 += 1;
        if !master_out(&history.faults, r.sent, r.received) {
            out.release_unavailable.1 += 1;
        }
    }
    out
}
