//! Observers of the mix's elections (`crate::elections`): one per replica
//! and election, following it with `Observe` (a new stream when one ends),
//! and the check that none was ever told a term going back.

use crate::clients::Shared;
use crate::findings::{Check, Findings, Violation};
use crate::history::Time;
use crate::hold_stream::PATIENCE;
use redlockd_proto::pb::election_service_client::ElectionServiceClient;
use redlockd_proto::pb::ObserveRequest;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// What one observer was told, in order.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    /// Which observer (replica and election).
    pub observer: u32,
    /// Which of its Observe streams (it opens another when one ends).
    pub stream: u32,
    /// When it arrived.
    pub at: Time,
    /// The leader's term, or none.
    pub term: Option<u64>,
}

/// One observer of `election` on `replica` until the deadline: every
/// change it is told, across the streams it opens (one after another
/// when one ends: the replica was killed or drained).
pub(crate) async fn observer(
    id: u32,
    shared: Arc<Shared>,
    replica: usize,
    election: usize,
) -> Vec<Observed> {
    let clock = shared.clock;
    let name = shared.hot[election].clone();
    let (mut seen, mut stream) = (Vec::new(), 0);
    while clock.now() < shared.deadline {
        stream += 1;
        let (_, channel) = shared.routes.pick(replica);
        let mut client = ElectionServiceClient::new(channel);
        let request = ObserveRequest { name: name.clone() };
        let Ok(Ok(answer)) = tokio::time::timeout(PATIENCE, client.observe(request)).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let mut changes = answer.into_inner();
        loop {
            let left = shared.deadline.saturating_sub(clock.now());
            match tokio::time::timeout(left, changes.message()).await {
                Ok(Ok(Some(change))) => seen.push(Observed {
                    observer: id,
                    stream,
                    at: clock.now(),
                    term: change.leader.filter(|_| change.has_leader).map(|l| l.term),
                }),
                Err(_) => break,
                Ok(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    break;
                }
            }
        }
    }
    seen
}

/// Holds every observer to never going back (see the module doc); the
/// number of changes observed.
pub(crate) fn check(observed: &[Observed], findings: &mut Findings) -> usize {
    let mut by_observer: BTreeMap<u32, Vec<&Observed>> = BTreeMap::new();
    for o in observed {
        by_observer.entry(o.observer).or_default().push(o);
    }
    for changes in by_observer.values() {
        // The highest term told in all streams, and in the current one.
        let (mut highest, mut in_stream, mut stream) = (0, None, 0);
        for change in changes {
            if change.stream != stream {
                (stream, in_stream) = (change.stream, None);
            }
            let Some(term) = change.term else { continue };
            if term < highest || in_stream.is_some_and(|last| term <= last) {
                findings.violations.push(Violation {
                    check: Check::ObserverWentBack,
                    detail: format!(
                        "observer {} (stream {}) was told term {term} at {:.3}s after term {} \
                         ({:?} in this stream)",
                        change.observer,
                        change.stream,
                        change.at.as_secs_f64(),
                        highest,
                        in_stream
                    ),
                });
            }
            highest = highest.max(term);
            in_stream = Some(term);
        }
    }
    observed.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told(observer: u32, stream: u32, term: Option<u64>) -> Observed {
        Observed {
            observer,
            stream,
            at: Time::ZERO,
            term,
        }
    }

    /// Forward is fine, a new stream may repeat the current term; a lower
    /// term, or the same twice in one stream, is a violation.
    #[test]
    fn observers_never_go_back() {
        let mut findings = Findings::default();
        let fine = [
            told(1, 1, None),
            told(1, 1, Some(3)),
            told(1, 1, None),
            told(1, 1, Some(5)),
            told(1, 2, Some(5)),
            told(1, 2, Some(9)),
            told(2, 1, Some(4)),
        ];
        assert_eq!(check(&fine, &mut findings), 7);
        assert!(findings.violations.is_empty(), "{:?}", findings.violations);
        for bad in [
            vec![told(1, 1, Some(5)), told(1, 1, Some(4))],
            vec![told(1, 1, Some(5)), told(1, 1, Some(5))],
            vec![told(1, 1, Some(5)), told(1, 2, Some(4))],
        ] {
            let mut findings = Findings::default();
            check(&bad, &mut findings);
            assert_eq!(findings.violations.len(), 1, "{bad:?}");
            assert_eq!(findings.violations[0].check, Check::ObserverWentBack);
        }
    }
}
