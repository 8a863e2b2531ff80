//! Defect 3 of the cross-kind review, forced: fences across kinds. Each
//! round, on a fresh resource, one grant after another, each Acquired only
//! once the one before was released: plain, a permit of limit 2, shared,
//! a permit of limit 3, plain again. Every grant conflicts with the one
//! before it (a permit with a plain or shared lock, or with a permit of
//! another limit), and was requested after it was answered, so its fence
//! must be greater (`fence_not_above_previous_kind`).

use super::rig::{release, validity, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, Lock, LockMode};
use std::time::Duration;
use tokio::time::Instant;

/// The kinds in order: (name, mode, limit).
const STEPS: [(&str, LockMode, u32); 5] = [
    ("plain", LockMode::Exclusive, 0),
    ("permit of limit 2", LockMode::Exclusive, 2),
    ("shared", LockMode::Shared, 0),
    ("permit of limit 3", LockMode::Exclusive, 3),
    ("plain", LockMode::Exclusive, 0),
];

async fn acquire(rig: &Rig, resource: &str, mode: LockMode, limit: u32) -> Result<Lock, BoxError> {
    let request = AcquireRequest {
        resource: resource.to_owned(),
        ttl: prost_types::Duration::try_from(Duration::from_secs(1)).ok(),
        wait: prost_types::Duration::try_from(Duration::from_millis(500)).ok(),
        owner: "chaos-interleavings".to_owned(),
        mode: mode as i32,
        limit,
        ..Default::default()
    };
    let mut client = LockServiceClient::new(rig.channel.clone());
    let answer = tokio::time::timeout(Duration::from_secs(3), client.acquire(request))
        .await
        .map_err(|_| "no answer")??;
    let lock = answer.into_inner().lock.ok_or("granted without a lock")?;
    if validity(&lock).is_zero() {
        return Err("granted without validity".into());
    }
    Ok(lock)
}

/// Runs rounds for `duration` on `rig`.
pub(crate) async fn run(rig: &Rig, seed: u64, duration: Duration) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("kind_fences");
    let end = Instant::now() + duration;
    let (mut rounds, mut pairs, mut other) = (0u64, 0u64, 0u64);
    while Instant::now() < end {
        rounds += 1;
        let resource = format!("interleavings/{seed}/kind-fences/{rounds}");
        let mut previous: Option<(&str, u64)> = None;
        for (name, mode, limit) in STEPS {
            let Ok(lock) = acquire(rig, &resource, mode, limit).await else {
                other += 1;
                break;
            };
            let _ = release(rig.channel.clone(), &lock).await;
            if let Some((before, fence)) = previous {
                pairs += 1;
                if lock.fence <= fence {
                    outcome.violation(
                        "fence_not_above_previous_kind",
                        format!(
                            "round {rounds}: {name} granted fence {} after {before} with fence \
                             {fence} was released",
                            lock.fence
                        ),
                    );
                }
            }
            previous = Some((name, lock.fence));
        }
    }
    outcome.figure("rounds", rounds);
    outcome.figure("ordered_pairs", pairs);
    outcome.figure("other_outcomes", other);
    if pairs == 0 {
        outcome.violation(
            "proves_nothing",
            format!("no pair of grants in {rounds} rounds"),
        );
    }
    Ok(outcome)
}
