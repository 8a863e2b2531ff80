//! Observers of the mix's elections (`crate::elections`): one per replica
//! and election, following it with `Observe` (a new stream when one ends),
//! and the checks that none was ever told a step going back (in a stream,
//! each leader's (term, value version) above the last; across streams,
//! never a term below one told), nor a value its term never had.

use crate::clients::Shared;
use crate::findings::{Check, Findings, Violation};
use crate::history::{Grant, Kind, Time};
use crate::hold_stream::PATIENCE;
use redlockd_proto::pb::election_service_client::ElectionServiceClient;
use redlockd_proto::pb::ObserveRequest;
use std::collections::{BTreeMap, HashMap};
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
    /// The election's resource in the history (`crate::election_values::resource`).
    pub resource: String,
    /// The leader's term, or none.
    pub term: Option<u64>,
    /// The leader's value version (a Proclaim's, 0 as elected).
    pub version: u64,
    /// The leader's value.
    pub value: String,
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
                Ok(Ok(Some(change))) => {
                    let leader = change.leader.filter(|_| change.has_leader);
                    seen.push(Observed {
                        observer: id,
                        stream,
                        at: clock.now(),
                        resource: crate::election_values::resource(&name),
                        term: leader.as_ref().map(|l| l.term),
                        version: leader.as_ref().map_or(0, |l| l.value_version),
                        value: leader.map(|l| l.value).unwrap_or_default(),
                    });
                }
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
        // The highest term told in all streams, and the last (term,
        // version) in the current one. Across streams a term's version may
        // seem to go back: a Proclaim that failed may have been written
        // where one read found it and not where the next did.
        let (mut highest, mut in_stream, mut stream) = (0, None, 0);
        for change in changes {
            if change.stream != stream {
                (stream, in_stream) = (change.stream, None);
            }
            let Some(term) = change.term else { continue };
            let step = (term, change.version);
            if term < highest || in_stream.is_some_and(|last| step <= last) {
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
            in_stream = Some(step);
        }
    }
    observed.len()
}

/// Holds every value observers were told to its term: a leader elected
/// with version 0 has the value its candidate campaigned with
/// (`candidate-ID`), and with a version above 0 one its leader proclaimed
/// for that term (`candidate-ID/term-T/...`, see
/// `crate::election_values::proclaimed`); and every observer told one
/// version of a term was told the same value for it. A term whose grant
/// the history lacks (a candidate elected after it withdrew) is only held
/// to the second.
pub(crate) fn check_values(observed: &[Observed], grants: &[Grant], findings: &mut Findings) {
    let leaders: HashMap<(&str, u64), u32> = grants
        .iter()
        .filter(|g| g.kind == Kind::Leader)
        .map(|g| ((g.resource.as_str(), g.fence), g.client))
        .collect();
    check_order(observed, findings);
    // One value per version of a term, whoever was told it.
    let mut values: HashMap<(&str, u64, u64), &str> = HashMap::new();
    for o in observed {
        let Some(term) = o.term else { continue };
        let told = values
            .entry((o.resource.as_str(), term, o.version))
            .or_insert(o.value.as_str());
        if *told != o.value {
            findings.violations.push(Violation {
                check: Check::ObserverWrongValue,
                detail: format!(
                    "observer {} (stream {}) was told {:?} as version {} of term {term} of {} \
                     at {:.3}s; another was told {:?} for it",
                    o.observer,
                    o.stream,
                    o.value,
                    o.version,
                    o.resource,
                    o.at.as_secs_f64(),
                    told,
                ),
            });
        }
        let Some(&client) = leaders.get(&(o.resource.as_str(), term)) else {
            continue;
        };
        let campaigned = crate::election_values::campaign_value(client);
        let fits = match o.version {
            0 => o.value == campaigned,
            _ => o.value.starts_with(&format!("{campaigned}/term-{term}/")),
        };
        if !fits {
            findings.violations.push(Violation {
                check: Check::ObserverWrongValue,
                detail: format!(
                    "observer {} (stream {}) was told {:?} (version {}) for term {term} of \
                     {} at {:.3}s; its leader campaigned as {campaigned:?}",
                    o.observer,
                    o.stream,
                    o.value,
                    o.version,
                    o.resource,
                    o.at.as_secs_f64(),
                ),
            });
        }
    }
}

/// Holds the versions of each term to the order its leader proclaimed
/// in: a leader proclaims one value after another (`p1`, `p2`, ...), so a
/// higher version never carries an earlier value, whoever was told it.
fn check_order(observed: &[Observed], findings: &mut Findings) {
    /// A term's versions, each with its Proclaim's index and who was told it.
    type Versions<'a> = BTreeMap<u64, (u32, &'a Observed)>;
    let mut by_term: BTreeMap<(&str, u64), Versions> = BTreeMap::new();
    for o in observed {
        let Some(term) = o.term else { continue };
        let n = o
            .value
            .rsplit_once("/p")
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0);
        by_term
            .entry((o.resource.as_str(), term))
            .or_default()
            .insert(o.version, (n, o));
    }
    for versions in by_term.values() {
        let mut last: Option<(u64, u32)> = None;
        for (&version, &(n, o)) in versions {
            if let Some((before, earlier_n)) = last.filter(|&(_, earlier_n)| n < earlier_n) {
                findings.violations.push(Violation {
                    check: Check::ObserverWrongValue,
                    detail: format!(
                        "term {} of {}: version {version} carries {:?} (Proclaim {n}), above \
                         version {before} of Proclaim {earlier_n}",
                        o.term.unwrap_or_default(),
                        o.resource,
                        o.value,
                    ),
                });
            }
            last = Some((version, n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told(observer: u32, stream: u32, term: Option<u64>) -> Observed {
        Observed {
            observer,
            stream,
            at: Time::ZERO,
            resource: "election:e".into(),
            term,
            version: 0,
            value: String::new(),
        }
    }

    fn told_version(observer: u32, stream: u32, term: u64, version: u64) -> Observed {
        Observed {
            version,
            ..told(observer, stream, Some(term))
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
            told_version(1, 2, 9, 2),
            told_version(1, 3, 9, 1),
            told(2, 1, Some(4)),
        ];
        assert_eq!(check(&fine, &mut findings), 9);
        assert!(findings.violations.is_empty(), "{:?}", findings.violations);
        for bad in [
            vec![told(1, 1, Some(5)), told(1, 1, Some(4))],
            vec![told(1, 1, Some(5)), told(1, 1, Some(5))],
            vec![told(1, 1, Some(5)), told(1, 2, Some(4))],
            vec![told_version(1, 1, 5, 2), told_version(1, 1, 5, 1)],
            vec![told_version(1, 1, 5, 2), told_version(1, 1, 5, 2)],
        ] {
            let mut findings = Findings::default();
            check(&bad, &mut findings);
            assert_eq!(findings.violations.len(), 1, "{bad:?}");
            assert_eq!(findings.violations[0].check, Check::ObserverWentBack);
        }
    }

    /// A value fits its term: the leader's campaign value at version 0, a
    /// value it proclaimed for that term above 0; anything else, and only
    /// terms the history knows, is a violation.
    #[test]
    fn observers_are_told_their_terms_values() {
        let grant = |client: u32, fence: u64| {
            let mut grant = crate::checks_tests::grant(u64::from(client), fence, 0, 1, 100, 50);
            (grant.kind, grant.resource, grant.client, grant.fence) =
                (Kind::Leader, "election:e".into(), client, fence);
            grant
        };
        let grants = [grant(4001, 7), grant(4002, 9)];
        let value = |term: u64, version: u64, value: &str| Observed {
            value: value.into(),
            ..told_version(1, 1, term, version)
        };
        let fine = [
            value(7, 0, "candidate-4001"),
            value(7, 3, "candidate-4001/term-7/p1"),
            value(9, 0, "candidate-4002"),
            value(11, 0, "anyone: term 11 is not in the history"),
        ];
        let mut findings = Findings::default();
        check_values(&fine, &grants, &mut findings);
        assert!(findings.violations.is_empty(), "{:?}", findings.violations);
        let split = [
            value(7, 3, "candidate-4001/term-7/p1"),
            value(7, 3, "candidate-4001/term-7/p2"),
        ];
        let mut findings = Findings::default();
        check_values(&split, &grants, &mut findings);
        assert_eq!(findings.violations.len(), 1, "one version, two values");
        let reordered = [
            value(7, 3, "candidate-4001/term-7/p2"),
            value(7, 5, "candidate-4001/term-7/p1"),
        ];
        let mut findings = Findings::default();
        check_values(&reordered, &grants, &mut findings);
        assert_eq!(
            findings.violations.len(),
            1,
            "a later version, an earlier value"
        );
        for bad in [
            value(7, 0, "candidate-4002"),
            value(9, 1, "candidate-4001/term-7/p1"),
            value(9, 2, "candidate-4002/term-7/p1"),
            value(7, 0, "candidate-4001/term-7/p1"),
            value(7, 1, "candidate-4001"),
        ] {
            let mut findings = Findings::default();
            check_values(std::slice::from_ref(&bad), &grants, &mut findings);
            assert_eq!(findings.violations.len(), 1, "{bad:?}");
            assert_eq!(findings.violations[0].check, Check::ObserverWrongValue);
        }
    }
}
