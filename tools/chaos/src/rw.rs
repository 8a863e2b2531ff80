//! Read-write locks under faults (`--rw N`, issue 19): N clients take
//! shared and exclusive grants (three shared for one exclusive) of two hot
//! resources of their own through both replicas, sometimes extend them,
//! and release them, while the schedule injects its faults. [`check`] then
//! holds the history to the read-write guarantee:
//! - no exclusive window overlaps any other grant's window (two exclusive
//!   holders, or an exclusive beside a shared one): [`Check::Overlap`];
//! - among conflicting grants (at least one exclusive), one requested after
//!   the other was received has the higher fence: [`Check::FenceOrder`].
//!
//! Shared windows overlapping each other are the point, and are counted
//! ([`RwFigures::shared_overlaps`]) so a run shows readers really shared.
//! Windows are taken on the safe side as for the mutex
//! ([`crate::history::Window`]: from the answer to send + validity, cut at
//! the Release's send).

use crate::checks::{Check, Findings, Violation};
use crate::clients::Shared;
use crate::history::{Time, Window};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, ExtendRequest, Lock, LockMode, ReleaseRequest};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// First client id of the read-write clients (apart from the others').
pub(crate) const FIRST_ID: u32 = 30_000;

/// The lock's ttl (below the run's default `max_ttl` of 3 s).
const TTL: Duration = Duration::from_millis(1_500);

/// How long a client waits for a grant.
const WAIT: Duration = Duration::from_millis(1_500);

/// A call's own bound beyond the wait.
const CALL_SLACK: Duration = Duration::from_secs(2);

/// One grant of the read-write workload.
#[derive(Debug, Clone)]
pub(crate) struct RwGrant {
    /// Unique in the run (the run's grant counter).
    pub id: u64,
    /// The resource locked.
    pub resource: String,
    /// A shared (read) grant; else exclusive.
    pub shared: bool,
    /// Its fence.
    pub fence: u64,
    /// The Acquire was sent.
    pub sent: Time,
    /// The grant was received.
    pub received: Time,
    /// The Acquire's window, then one per successful Extend, each cut at
    /// the Release's send.
    pub windows: Vec<Window>,
}

/// What the read-write workload did.
#[derive(Debug, Clone, Default)]
pub(crate) struct RwFigures {
    /// Shared grants.
    pub shared: usize,
    /// Exclusive grants.
    pub exclusive: usize,
    /// Pairs of shared grants whose windows overlapped (readers shared).
    pub shared_overlaps: usize,
    /// Violations these checks found (also in the run's findings).
    pub violations: usize,
}

fn proto(d: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(d).ok()
}

fn validity(lock: &Lock) -> Duration {
    lock.validity
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// One read-write client until the run's deadline.
pub(crate) async fn client(id: u32, shared: Arc<Shared>, seed: u64) -> Vec<RwGrant> {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0x5E);
    let (home, clock) = (id as usize, shared.clock);
    let mut grants = Vec::new();
    while clock.now() < shared.deadline {
        let resource = format!("{}/rw/{}", shared.tag, rng.random_range(0..2));
        let is_shared = rng.random_bool(0.75);
        let mode = match is_shared {
            true => LockMode::Shared,
            false => LockMode::Exclusive,
        };
        let request = AcquireRequest {
            resource,
            ttl: proto(TTL),
            wait: proto(WAIT),
            owner: "chaos-rw".to_owned(),
            mode: mode as i32,
            ..Default::default()
        };
        let (_, channel) = shared.routes.pick(home);
        let sent = clock.now();
        let answer = tokio::time::timeout(
            WAIT + CALL_SLACK,
            LockServiceClient::new(channel).acquire(request),
        )
        .await;
        let received = clock.now();
        let Some(lock) = answer
            .ok()
            .and_then(|a| a.ok())
            .and_then(|a| a.into_inner().lock)
        else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let first = Window::of_call(sent, received, validity(&lock));
        let mut grant = RwGrant {
            id: shared.next_grant.fetch_add(1, Ordering::Relaxed),
            resource: lock.resource.clone(),
            shared: is_shared,
            fence: lock.fence,
            sent,
            received,
            windows: vec![first],
        };
        let work = Duration::from_millis(rng.random_range(5..=60));
        let room = first.end.saturating_sub(clock.now());
        if rng.random_bool(0.3) {
            tokio::time::sleep(work.min(room) / 2).await;
            let (_, channel) = shared.routes.pick(home);
            let request = ExtendRequest {
                resource: lock.resource.clone(),
                token: lock.token.clone(),
                ttl: proto(TTL),
            };
            let sent = clock.now();
            let answer =
                tokio::time::timeout(CALL_SLACK, LockServiceClient::new(channel).extend(request))
                    .await;
            let received = clock.now();
            if let Some(extended) = answer
                .ok()
                .and_then(|a| a.ok())
                .and_then(|a| a.into_inner().lock)
            {
                grant
                    .windows
                    .push(Window::of_call(sent, received, validity(&extended)));
            }
            tokio::time::sleep(work.min(room) / 2).await;
        } else {
            tokio::time::sleep(work.min(room)).await;
        }
        let release_sent = clock.now();
        for window in &mut grant.windows {
            window.end = window.end.min(release_sent);
        }
        for attempt in 0..2 {
            let (_, channel) = shared.routes.pick(home + attempt);
            let request = ReleaseRequest {
                resource: lock.resource.clone(),
                token: lock.token.clone(),
            };
            let answer =
                tokio::time::timeout(CALL_SLACK, LockServiceClient::new(channel).release(request))
                    .await;
            if matches!(answer, Ok(Ok(_))) {
                break;
            }
        }
        grants.push(grant);
    }
    grants
}

/// Checks the read-write grants (see the module doc); returns the figures.
pub(crate) fn check(grants: &[RwGrant], findings: &mut Findings) -> RwFigures {
    let mut figures = RwFigures::default();
    let before = findings.violations.len();
    let mut by_resource: BTreeMap<&str, Vec<&RwGrant>> = BTreeMap::new();
    for grant in grants {
        match grant.shared {
            true => figures.shared += 1,
            false => figures.exclusive += 1,
        }
        by_resource.entry(&grant.resource).or_default().push(grant);
    }
    for grants in by_resource.values() {
        exclusion(grants, findings, &mut figures);
        fences(grants, findings);
    }
    figures.violations = findings.violations.len() - before;
    figures
}

fn describe(g: &RwGrant) -> String {
    format!(
        "{} grant#{} fence {} sent {:.3}s received {:.3}s",
        if g.shared { "shared" } else { "exclusive" },
        g.id,
        g.fence,
        g.sent.as_secs_f64(),
        g.received.as_secs_f64()
    )
}

/// No exclusive window overlaps another grant's window.
fn exclusion(grants: &[&RwGrant], findings: &mut Findings, figures: &mut RwFigures) {
    let mut windows: Vec<(Window, &RwGrant)> = grants
        .iter()
        .flat_map(|g| g.windows.iter().map(move |w| (*w, *g)))
        .filter(|(w, _)| !w.is_empty())
        .collect();
    windows.sort_by_key(|(w, _)| w.start);
    let mut flagged = std::collections::HashSet::new();
    let mut shared_pairs = std::collections::HashSet::new();
    for (i, (a, ga)) in windows.iter().enumerate() {
        for (b, gb) in windows[i + 1..].iter().take_while(|(b, _)| b.start < a.end) {
            if ga.id == gb.id {
                continue;
            }
            let pair = (ga.id.min(gb.id), ga.id.max(gb.id));
            if ga.shared && gb.shared {
                shared_pairs.insert(pair);
            } else if flagged.insert(pair) {
                findings.violations.push(Violation {
                    check: Check::Overlap,
                    detail: format!(
                        "read-write {}: {} overlaps {} by {:.1} ms",
                        ga.resource,
                        describe(gb),
                        describe(ga),
                        (a.end.min(b.end) - b.start).as_secs_f64() * 1e3
                    ),
                });
            }
        }
    }
    figures.shared_overlaps += shared_pairs.len();
}

/// Among conflicting grants, one requested after the other was received
/// has the higher fence.
fn fences(grants: &[&RwGrant], findings: &mut Findings) {
    let mut by_received: Vec<&RwGrant> = grants.to_vec();
    by_received.sort_by_key(|g| g.received);
    let mut by_sent: Vec<&RwGrant> = grants.to_vec();
    by_sent.sort_by_key(|g| g.sent);
    // The highest fence among grants received so far: of any mode, and of
    // exclusive ones only.
    let (mut next, mut any, mut exclusive): (usize, Option<&RwGrant>, Option<&RwGrant>) =
        (0, None, None);
    for later in by_sent {
        while let Some(g) = by_received.get(next).filter(|g| g.received < later.sent) {
            if any.is_none_or(|h| g.fence > h.fence) {
                any = Some(g);
            }
            if !g.shared && exclusive.is_none_or(|h| g.fence > h.fence) {
                exclusive = Some(g);
            }
            next += 1;
        }
        let bound = match later.shared {
            true => exclusive,
            false => any,
        };
        if let Some(earlier) = bound.filter(|h| h.fence >= later.fence) {
            findings.violations.push(Violation {
                check: Check::FenceOrder,
                detail: format!(
                    "read-write {}: {} requested after {} was received",
                    later.resource,
                    describe(later),
                    describe(earlier)
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Time {
        Duration::from_millis(n)
    }

    fn grant(id: u64, shared: bool, fence: u64, from: u64, to: u64) -> RwGrant {
        RwGrant {
            id,
            resource: "r".into(),
            shared,
            fence,
            sent: ms(from.saturating_sub(1)),
            received: ms(from),
            windows: vec![Window {
                start: ms(from),
                end: ms(to),
            }],
        }
    }

    fn found(grants: &[RwGrant]) -> (Vec<Check>, RwFigures) {
        let mut findings = Findings::default();
        let figures = check(grants, &mut findings);
        (
            findings.violations.iter().map(|v| v.check).collect(),
            figures,
        )
    }

    /// Readers overlapping each other, then a writer after them with a
    /// higher fence, then a reader after it: no violation, and the shared
    /// overlap is counted.
    #[test]
    fn a_clean_history_passes() {
        let (violations, figures) = found(&[
            grant(1, true, 10, 0, 100),
            grant(2, true, 11, 50, 150),
            grant(3, false, 12, 200, 300),
            grant(4, true, 13, 310, 400),
        ]);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(
            (figures.shared, figures.exclusive, figures.shared_overlaps),
            (3, 1, 1)
        );
    }

    /// A writer whose window overlaps a reader's, and one overlapping
    /// another writer's, are both flagged.
    #[test]
    fn an_exclusive_beside_anyone_is_flagged() {
        let (violations, figures) =
            found(&[grant(1, true, 10, 0, 100), grant(2, false, 11, 50, 150)]);
        assert_eq!(violations, vec![Check::Overlap]);
        assert_eq!(figures.violations, 1);
        let (violations, _) = found(&[grant(1, false, 10, 0, 100), grant(2, false, 11, 99, 150)]);
        assert_eq!(violations, vec![Check::Overlap]);
    }

    /// A writer requested after a reader was received with a fence not
    /// above it is flagged; so is a reader after a writer; two readers
    /// may share a fence.
    #[test]
    fn conflicting_fences_out_of_order_are_flagged() {
        let (violations, _) = found(&[grant(1, true, 10, 0, 100), grant(2, false, 10, 200, 300)]);
        assert_eq!(violations, vec![Check::FenceOrder]);
        let (violations, _) = found(&[grant(1, false, 10, 0, 100), grant(2, true, 9, 200, 300)]);
        assert_eq!(violations, vec![Check::FenceOrder]);
        let (violations, _) = found(&[grant(1, true, 10, 0, 100), grant(2, true, 10, 200, 300)]);
        assert!(violations.is_empty(), "{violations:?}");
    }
}
