//! Defect 2 of the cross-kind review, forced: a rolling restart under a
//! held permit. A `Hold` session takes a permit of limit 2 of a fresh
//! resource; masters 0, 1 and 2 are then restarted empty one after
//! another, each only once the replica has quarantined it and let it vote
//! again, the session's extensions carrying the permit across (they put
//! the permit's key back on a returned master). With the permit still
//! held, a plain Acquire and a permit of limit 3 of the resource must
//! both be refused: a grant of either is two conflicting holders
//! (`granted_beside_permit`).

use super::hold;
use super::rig::{acquire, release, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::AcquireRequest;
use std::time::Duration;
use tokio::time::Instant;

/// The permit session's ttl (extended by the daemon).
const TTL: Duration = Duration::from_secs(1);
/// Masters restarted, one after another.
const ROLLED: [usize; 3] = [0, 1, 2];
/// Gauge of a quarantined master.
const QUARANTINED: &str = "redlock_node_quarantined";

fn permit(resource: &str, limit: u32, wait: Duration) -> AcquireRequest {
    AcquireRequest {
        resource: resource.to_owned(),
        ttl: prost_types::Duration::try_from(TTL).ok(),
        wait: prost_types::Duration::try_from(wait).ok(),
        owner: "chaos-interleavings".to_owned(),
        limit,
        ..Default::default()
    }
}

/// Runs rounds (about 15 s each) for at least `duration` on `rig`.
pub(crate) async fn run(
    rig: &Rig,
    seed: u64,
    duration: Duration,
    max_ttl: Duration,
) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("rolling_permit");
    let end = Instant::now() + duration;
    let (mut rounds, mut complete, mut quarantines) = (0u64, 0u64, 0u64);
    loop {
        rounds += 1;
        let resource = format!("interleavings/{seed}/rolling-permit/{rounds}");
        let mut session =
            hold::open(rig.channel.clone(), permit(&resource, 2, Duration::ZERO)).await?;
        let mut held = true;
        for master in ROLLED {
            rig.restart_empty(master).await?;
            let restarted = Instant::now();
            let (mut seen, mut back) = (false, false);
            // Bounded: the quarantine lasts about max_ttl.
            while held && restarted.elapsed() < max_ttl * 4 {
                held = session.follow(Duration::from_millis(200)).await;
                let q = rig.gauge(QUARANTINED, master).await?;
                seen |= q == Some(1.0);
                if seen && q == Some(0.0) {
                    back = true;
                    break;
                }
            }
            quarantines += u64::from(seen && back);
            // One more extension, on the returned master too.
            held = held && session.follow(TTL).await;
            if !held {
                break;
            }
        }
        if held {
            complete += 1;
            let plain = acquire(rig.channel.clone(), &resource, TTL, Duration::ZERO, None).await;
            let mut client = LockServiceClient::new(rig.channel.clone());
            let other_limit = tokio::time::timeout(
                Duration::from_secs(3),
                client.acquire(permit(&resource, 3, Duration::ZERO)),
            )
            .await;
            let at = Instant::now();
            let still = session.follow(Duration::from_millis(1)).await && at < session.until;
            if let Ok(lock) = &plain {
                if still {
                    outcome.violation(
                        "granted_beside_permit",
                        format!(
                            "round {rounds}: a plain lock of {resource} was granted (fence {}) \
                             while a permit of limit 2 was held, after masters {ROLLED:?} \
                             were restarted empty one after another",
                            lock.fence
                        ),
                    );
                }
                let _ = release(rig.channel.clone(), lock).await;
            }
            if let Ok(Ok(answer)) = other_limit {
                if let Some(lock) = answer.into_inner().lock {
                    if still {
                        outcome.violation(
                            "granted_beside_permit",
                            format!(
                                "round {rounds}: a permit of limit 3 of {resource} was granted \
                                 while a permit of limit 2 was held, after the rolling restart"
                            ),
                        );
                    }
                    let _ = release(rig.channel.clone(), &lock).await;
                }
            }
        }
        let _ = session.half_close().await;
        if Instant::now() >= end {
            break;
        }
    }
    outcome.figure("rounds", rounds);
    outcome.figure("permit_held_across_rolling_restart", complete);
    outcome.figure("quarantines_seen", quarantines);
    if complete == 0 {
        outcome.violation(
            "proves_nothing",
            format!("the permit did not outlast a rolling restart in {rounds} rounds"),
        );
    }
    Ok(outcome)
}
