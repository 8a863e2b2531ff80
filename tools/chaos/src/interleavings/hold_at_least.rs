//! A grant's `hold_at_least`, forced: each round, on a fresh resource, a
//! plain lock asked with a hold of 100-250 ms is released at once; then a
//! second client asks (a plain lock, or a permit of limit 2, which
//! conflicts with it) and waits. The masters keep the first lock until
//! its hold ran, so the second grant must not be answered before the
//! hold's certain end: the send of the first Acquire plus the hold, less
//! the daemon's drift allowance (`granted_inside_hold_at_least`). A permit
//! asked while the plain lock is held is refused FAILED_PRECONDITION
//! (lock.proto, `limit`): counted, an honest answer.

use super::rig::{release, validity, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use crate::hold_at_least::allowance;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, Lock};
use std::time::Duration;
use tokio::time::Instant;

async fn acquire(
    rig: &Rig,
    resource: &str,
    limit: u32,
    hold_at_least: Duration,
) -> Result<Lock, tonic::Status> {
    let request = AcquireRequest {
        resource: resource.to_owned(),
        ttl: prost_types::Duration::try_from(Duration::from_secs(1)).ok(),
        wait: prost_types::Duration::try_from(Duration::from_secs(1)).ok(),
        owner: "chaos-interleavings".to_owned(),
        limit,
        hold_at_least: (!hold_at_least.is_zero())
            .then(|| prost_types::Duration::try_from(hold_at_least).ok())
            .flatten(),
        ..Default::default()
    };
    let mut client = LockServiceClient::new(rig.channel.clone());
    let answer = tokio::time::timeout(Duration::from_secs(3), client.acquire(request))
        .await
        .map_err(|_| tonic::Status::deadline_exceeded("no answer"))??;
    let lock = answer
        .into_inner()
        .lock
        .ok_or_else(|| tonic::Status::internal("granted without a lock"))?;
    if validity(&lock).is_zero() {
        return Err(tonic::Status::internal("granted without validity"));
    }
    Ok(lock)
}

/// Runs rounds for `duration` on `rig`.
pub(crate) async fn run(rig: &Rig, seed: u64, duration: Duration) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("hold_at_least");
    let mut rng = StdRng::seed_from_u64(seed ^ 0x401d);
    let end = Instant::now() + duration;
    let (mut rounds, mut judged, mut other, mut refused) = (0u64, 0u64, 0u64, 0u64);
    // The shortest time from a hold's certain end to the next grant (ms,
    // negative inside the hold).
    let mut closest = i64::MAX;
    while Instant::now() < end {
        rounds += 1;
        let resource = format!("interleavings/{seed}/hold-at-least/{rounds}");
        let hold = Duration::from_millis(rng.random_range(100..=250));
        let sent = Instant::now();
        let Ok(first) = acquire(rig, &resource, 0, hold).await else {
            other += 1;
            continue;
        };
        let released = release(rig.channel.clone(), &first).await;
        let certain_end = sent + hold - allowance(hold);
        if Instant::now() >= certain_end || !matches!(released, Ok(true)) {
            // Released too late, or not known to have been held: nothing
            // to judge.
            other += 1;
            continue;
        }
        let limit = if rounds % 2 == 0 { 2 } else { 0 };
        let second = match acquire(rig, &resource, limit, Duration::ZERO).await {
            Ok(second) => second,
            Err(status) if limit > 0 && status.code() == tonic::Code::FailedPrecondition => {
                refused += 1;
                continue;
            }
            Err(_) => {
                other += 1;
                continue;
            }
        };
        let answered = Instant::now();
        let _ = release(rig.channel.clone(), &second).await;
        judged += 1;
        let margin_ms = if answered >= certain_end {
            (answered - certain_end).as_millis() as i64
        } else {
            -((certain_end - answered).as_millis() as i64)
        };
        closest = closest.min(margin_ms);
        if answered < certain_end {
            outcome.violation(
                "granted_inside_hold_at_least",
                format!(
                    "round {rounds}: a {} granted {:.1} ms before the end of the {hold:?} \
                     hold_at_least of the plain lock released before it",
                    if limit == 0 {
                        "plain lock"
                    } else {
                        "permit of limit 2"
                    },
                    (certain_end - answered).as_secs_f64() * 1e3
                ),
            );
        }
    }
    outcome.figure("rounds", rounds);
    outcome.figure("holds_judged", judged);
    outcome.figure("permits_refused_while_held", refused);
    outcome.figure("other_outcomes", other);
    outcome.figure("closest_grant_after_hold_ms", closest);
    if judged == 0 {
        outcome.violation(
            "proves_nothing",
            format!("no hold released early in {rounds} rounds"),
        );
    }
    Ok(outcome)
}
