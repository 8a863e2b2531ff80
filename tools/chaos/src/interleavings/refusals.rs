//! Defects 4 and 6 of the cross-kind review, forced, on a rig where this
//! scenario is the only client (so "free" is known, not guessed):
//! - readers after a writer: a reader holds a fresh resource, a writer
//!   waits for it (stopping new readers), the reader releases, the writer
//!   is granted and releases; a new reader then asks without waiting. The
//!   resource is free and no writer waits: ABORTED is
//!   `reader_refused_while_free`.
//! - a Release with masters quarantined: a plain lock is taken, three
//!   masters are restarted empty and are in their restart quarantine
//!   (they answer, they do not vote); every master answers, so the
//!   Release must not answer UNAVAILABLE ("fewer than a majority of
//!   masters answered in time") but `was_held` (false: the token is left
//!   on two): `release_unavailable_masters_answering`.

use super::rig::{acquire, release, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, Lock, LockMode};
use std::time::Duration;
use tokio::time::Instant;

/// Masters restarted empty before the Release.
const RESTARTED: [usize; 3] = [0, 1, 2];
/// Gauge of a quarantined master.
const QUARANTINED: &str = "redlock_node_quarantined";

async fn acquire_mode(
    rig: &Rig,
    resource: &str,
    mode: LockMode,
    wait: Duration,
) -> Result<Lock, tonic::Status> {
    let request = AcquireRequest {
        resource: resource.to_owned(),
        ttl: prost_types::Duration::try_from(Duration::from_secs(2)).ok(),
        wait: prost_types::Duration::try_from(wait).ok(),
        owner: "chaos-interleavings".to_owned(),
        mode: mode as i32,
        ..Default::default()
    };
    let mut client = LockServiceClient::new(rig.channel.clone());
    match tokio::time::timeout(wait + Duration::from_secs(3), client.acquire(request)).await {
        Ok(Ok(answer)) => answer
            .into_inner()
            .lock
            .ok_or_else(|| tonic::Status::internal("granted without a lock")),
        Ok(Err(status)) => Err(status),
        Err(_) => Err(tonic::Status::deadline_exceeded("the client's guard")),
    }
}

/// Runs reader rounds for `duration`, then one Release under quarantines.
pub(crate) async fn run(
    rig: &Rig,
    seed: u64,
    duration: Duration,
    max_ttl: Duration,
) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("refusals");
    let end = Instant::now() + duration;
    let (mut rounds, mut handoffs, mut other) = (0u64, 0u64, 0u64);
    while Instant::now() < end {
        rounds += 1;
        let resource = format!("interleavings/{seed}/readers/{rounds}");
        let Ok(reader) = acquire_mode(rig, &resource, LockMode::Shared, Duration::ZERO).await
        else {
            other += 1;
            continue;
        };
        let writer = {
            let (channel, resource) = (rig.channel.clone(), resource.clone());
            tokio::spawn(async move {
                acquire(
                    channel,
                    &resource,
                    Duration::from_secs(2),
                    Duration::from_secs(2),
                    None,
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = release(rig.channel.clone(), &reader).await;
        let Ok(Ok(writer)) = writer.await else {
            other += 1;
            continue;
        };
        let _ = release(rig.channel.clone(), &writer).await;
        let released = Instant::now();
        handoffs += 1;
        match acquire_mode(rig, &resource, LockMode::Shared, Duration::ZERO).await {
            Ok(lock) => {
                let _ = release(rig.channel.clone(), &lock).await;
            }
            Err(status) if status.code() == tonic::Code::Aborted => outcome.violation(
                "reader_refused_while_free",
                format!(
                    "round {rounds}: a reader of {resource} was refused ABORTED {:?} after the \
                     only writer released, with nobody holding or waiting",
                    released.elapsed()
                ),
            ),
            Err(_) => other += 1,
        }
    }
    outcome.figure("rounds", rounds);
    outcome.figure("writer_handoffs", handoffs);
    outcome.figure("other_outcomes", other);
    // A Release while two masters wait out their restart quarantine.
    let resource = format!("interleavings/{seed}/release-quarantine");
    let lock = acquire(
        rig.channel.clone(),
        &resource,
        max_ttl,
        Duration::ZERO,
        None,
    )
    .await?;
    for master in RESTARTED {
        rig.restart_empty(master).await?;
    }
    let (_, quarantined) = rig
        .await_gauge(QUARANTINED, 2, max_ttl, |v| v == 1.0)
        .await?;
    outcome.figure("quarantined_at_release", u8::from(quarantined));
    match release(rig.channel.clone(), &lock).await {
        Err(status) if status.code() == tonic::Code::Unavailable && quarantined => {
            outcome.violation(
                "release_unavailable_masters_answering",
                format!(
                    "Release of {resource} answered UNAVAILABLE ({}) with masters \
                     {RESTARTED:?} restarted and answering in quarantine, the other two healthy",
                    status.message()
                ),
            );
        }
        _ => {}
    }
    if handoffs == 0 || !quarantined {
        outcome.violation(
            "proves_nothing",
            format!(
                "{handoffs} writer hand-offs in {rounds} rounds; quarantine seen: {quarantined}"
            ),
        );
    }
    Ok(outcome)
}
