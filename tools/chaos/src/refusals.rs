//! Two figures of answers the history cannot prove wrong but that a
//! healthy daemon should not give (cross-kind review items 4 and 6):
//! - readers refused while free: a shared Acquire answered ABORTED while
//!   no grant that excludes readers (any kind but shared) had a window
//!   overlapping the call (a stale or unknown holder may still have held
//!   the lock, so only a figure);
//! - a Release answered UNAVAILABLE while every master was answering: no
//!   master was down, stopped, slowed or cut off during the call (restart
//!   quarantines may be running: the masters answer all the same), and no
//!   daemon replica was killed or drained (a client's channel to a dead
//!   replica answers UNAVAILABLE itself, before any daemon sees the call).

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

/// Whether a daemon replica was killed or draining in `[from, to]`.
fn replica_out(faults: &[Fault], from: Time, to: Time) -> bool {
    faults
        .iter()
        .any(|f| !f.kind.on_master() && f.start <= to && f.end >= from)
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
        if !master_out(&history.faults, r.sent, r.received)
            && !replica_out(&history.faults, r.sent, r.received)
        {
            out.release_unavailable.1 += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::figures;
    use crate::checks_tests::grant;
    use crate::history::{Failure, Fault, FaultKind, History, ReleaseRecord};
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn fault(kind: FaultKind, start: u64, end: u64) -> Fault {
        Fault {
            kind,
            target: 0,
            start: ms(start),
            end: ms(end),
            counts_until: ms(end + 1000),
            three_phase: false,
        }
    }

    /// A Release UNAVAILABLE counts as "every master answering" only when
    /// no master and no replica was out during the call: seed 41's one
    /// such Release took 0.1 ms, refused by the client's channel to a
    /// replica killed a moment before.
    #[test]
    fn release_unavailable_beside_a_dead_replica_is_not_the_daemons() {
        let unavailable = |id, at| {
            let mut g = grant(id, id, at, at + 1, 1000, at + 100);
            g.release = Some(ReleaseRecord {
                sent: ms(at + 100),
                received: ms(at + 101),
                outcome: Err(Failure::Status(tonic::Code::Unavailable)),
                calls: 1,
                first_failure: None,
            });
            g
        };
        let history = History {
            grants: vec![
                unavailable(1, 0),
                unavailable(2, 1000),
                unavailable(3, 2000),
            ],
            faults: vec![
                fault(FaultKind::ReplicaKill, 1050, 1500),
                fault(FaultKind::MasterPause, 2050, 2500),
            ],
            ..History::default()
        };
        assert_eq!(figures(&history).release_unavailable, (3, 1));
    }
}
