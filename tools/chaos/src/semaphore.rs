//! Semaphores under faults (issue 19): [`CLIENTS`] clients take permits of
//! one semaphore of [`LIMIT`] through both replicas for the whole run
//! (`full` schedule), each holding a permit a few milliseconds and
//! releasing it. Their grants are kept apart from the plain locks' history
//! (whose checks would rightly flag two holders of one resource) and
//! checked by [`check`]:
//! - never more than [`LIMIT`] validity windows at once, and never two of
//!   one permit ([`Check::SemaphoreLimit`]);
//! - of two grants of one permit, one certainly after the other (answered
//!   before the other was sent), the later has the greater fence
//!   ([`Check::SemaphoreFence`]). Fences of different permits are not
//!   ordered, by design (`redlock::semaphore` in the daemon).
//!
//! Windows are taken as for plain locks ([`Window::of_call`], cut when the
//! Release is sent), on the safe side of the client's latency.

use crate::checks::{Check, Findings, Violation};
use crate::clients::Shared;
use crate::history::{Time, Window};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, ReleaseRequest};
use std::sync::Arc;
use std::time::Duration;

/// Clients contending for the semaphore.
pub(crate) const CLIENTS: u32 = 4;
/// The semaphore's limit: below [`CLIENTS`], so permits are contended.
pub(crate) const LIMIT: u32 = 2;
/// A permit's lease.
const TTL: Duration = Duration::from_secs(1);
/// How long a client waits for a permit.
const WAIT: Duration = Duration::from_secs(1);
/// Bound on one call beyond its wait.
const CALL_SLACK: Duration = Duration::from_millis(1500);

/// One permit granted to a checking client.
#[derive(Debug, Clone)]
pub(crate) struct PermitGrant {
    /// The client.
    pub client: u32,
    /// Which permit.
    pub permit: u32,
    /// Its fence.
    pub fence: u64,
    /// The Acquire was sent.
    pub sent: Time,
    /// Its answer arrived.
    pub received: Time,
    /// Its validity window, cut when the Release was sent.
    pub window: Window,
}

/// What the semaphore clients did, for the report.
#[derive(Debug, Clone, Default)]
pub(crate) struct SemaphoreFigures {
    /// Permits granted.
    pub grants: usize,
    /// The most validity windows open at once.
    pub most_at_once: usize,
}

/// One client: permits until the run's deadline.
pub(crate) async fn client(id: u32, shared: Arc<Shared>, seed: u64) -> Vec<PermitGrant> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5e4a_0000 ^ u64::from(id));
    let resource = format!("{}/semaphore", shared.tag);
    let home = id as usize;
    let mut grants = Vec::new();
    while shared.clock.now() < shared.deadline {
        let (_, channel) = shared.routes.pick(home);
        let mut grpc = LockServiceClient::new(channel);
        let request = AcquireRequest {
            resource: resource.clone(),
            ttl: prost_types::Duration::try_from(TTL).ok(),
            wait: prost_types::Duration::try_from(WAIT).ok(),
            owner: "chaos-semaphore".to_owned(),
            limit: LIMIT,
            ..Default::default()
        };
        let sent = shared.clock.now();
        let answer = tokio::time::timeout(WAIT + CALL_SLACK, grpc.acquire(request)).await;
        let received = shared.clock.now();
        let Some(lock) = answer
            .ok()
            .and_then(Result::ok)
            .and_then(|a| a.into_inner().lock)
        else {
            tokio::time::sleep(Duration::from_millis(rng.random_range(5..=50))).await;
            continue;
        };
        let validity = lock
            .validity
            .and_then(|v| Duration::try_from(v).ok())
            .unwrap_or_default();
        let mut window = Window::of_call(sent, received, validity);
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..=20))).await;
        window.end = window.end.min(shared.clock.now());
        let (_, channel) = shared.routes.pick(home);
        let release = ReleaseRequest {
            resource: lock.resource.clone(),
            token: lock.token.clone(),
        };
        let _ = tokio::time::timeout(CALL_SLACK, LockServiceClient::new(channel).release(release))
            .await;
        grants.push(PermitGrant {
            client: id,
            permit: lock.permit,
            fence: lock.fence,
            sent,
            received,
            window,
        });
    }
    grants
}

/// Checks the permits' grants (see the module doc) into `findings`.
pub(crate) fn check(
    grants: &[PermitGrant],
    limit: u32,
    findings: &mut Findings,
) -> SemaphoreFigures {
    let mut events: Vec<(Time, i8, usize)> = Vec::new();
    for (i, g) in grants.iter().enumerate() {
        if g.window.start < g.window.end {
            events.push((g.window.start, 1, i));
            events.push((g.window.end, -1, i));
        }
    }
    // At one instant, ends before starts: windows are half-open.
    events.sort_by_key(|&(at, delta, _)| (at, delta));
    let (mut open, mut most, mut over) = (Vec::<usize>::new(), 0, false);
    for (at, delta, i) in events {
        if delta < 0 {
            open.retain(|&j| j != i);
            over = open.len() > limit as usize;
            continue;
        }
        if let Some(&j) = open.iter().find(|&&j| grants[j].permit == grants[i].permit) {
            findings.violations.push(Violation {
                check: Check::SemaphoreLimit,
                detail: format!(
                    "two holders of permit {} at {:.3}s: {} and {}",
                    grants[i].permit,
                    at.as_secs_f64(),
                    describe(&grants[j]),
                    describe(&grants[i])
                ),
            });
        }
        open.push(i);
        most = most.max(open.len());
        if open.len() > limit as usize && !over {
            over = true;
            let holders: Vec<String> = open.iter().map(|&j| describe(&grants[j])).collect();
            findings.violations.push(Violation {
                check: Check::SemaphoreLimit,
                detail: format!(
                    "{} holders of a limit-{limit} semaphore at {:.3}s: {}",
                    open.len(),
                    at.as_secs_f64(),
                    holders.join("; ")
                ),
            });
        }
    }
    let mut by_permit: std::collections::BTreeMap<u32, Vec<&PermitGrant>> = Default::default();
    for g in grants {
        by_permit.entry(g.permit).or_default().push(g);
    }
    for of_permit in by_permit.values() {
        for a in of_permit {
            for b in of_permit {
                if a.received < b.sent && b.fence <= a.fence {
                    findings.violations.push(Violation {
                        check: Check::SemaphoreFence,
                        detail: format!("{} after {}", describe(b), describe(a)),
                    });
                }
            }
        }
    }
    SemaphoreFigures {
        grants: grants.len(),
        most_at_once: most,
    }
}

fn describe(g: &PermitGrant) -> String {
    format!(
        "client {} permit {} fence {} window {:.3}..{:.3}s",
        g.client,
        g.permit,
        g.fence,
        g.window.start.as_secs_f64(),
        g.window.end.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(client: u32, permit: u32, fence: u64, from_ms: u64, to_ms: u64) -> PermitGrant {
        let at = Duration::from_millis;
        PermitGrant {
            client,
            permit,
            fence,
            sent: at(from_ms.saturating_sub(1)),
            received: at(from_ms),
            window: Window {
                start: at(from_ms),
                end: at(to_ms),
            },
        }
    }

    /// Two holders of a limit-2 semaphore at once, on distinct permits,
    /// then a third handed on in order: clean.
    #[test]
    fn within_the_limit_is_clean() {
        let mut findings = Findings::default();
        let grants = [
            grant(0, 0, 10, 0, 100),
            grant(1, 1, 11, 50, 150),
            grant(2, 0, 20, 100, 200),
        ];
        let figures = check(&grants, 2, &mut findings);
        assert!(findings.violations.is_empty(), "{:?}", findings.violations);
        assert_eq!((figures.grants, figures.most_at_once), (3, 2));
    }

    /// A third holder while two hold a limit-2 semaphore is caught.
    #[test]
    fn a_third_holder_is_caught() {
        let mut findings = Findings::default();
        let grants = [
            grant(0, 0, 10, 0, 100),
            grant(1, 1, 11, 10, 100),
            grant(2, 1, 12, 20, 100),
        ];
        check(&grants, 2, &mut findings);
        assert!(
            findings.count(Check::SemaphoreLimit) >= 1,
            "{:?}",
            findings.violations
        );
        // Its permit was held twice too.
        assert!(findings
            .violations
            .iter()
            .any(|v| v.detail.starts_with("two holders of permit 1")));
    }

    /// A later grant of one permit with a fence not above an earlier one's
    /// is caught; another permit's smaller fence is not a violation.
    #[test]
    fn fence_order_per_permit() {
        let mut findings = Findings::default();
        let grants = [
            grant(0, 0, 10, 0, 100),
            grant(1, 1, 5, 110, 200),
            grant(2, 0, 9, 120, 200),
        ];
        check(&grants, 2, &mut findings);
        assert_eq!(
            findings.count(Check::SemaphoreFence),
            1,
            "{:?}",
            findings.violations
        );
        assert_eq!(findings.count(Check::SemaphoreLimit), 0);
    }
}
