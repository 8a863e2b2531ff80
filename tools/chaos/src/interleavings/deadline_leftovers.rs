//! Defect 5 of the cross-kind review, forced: nothing is left locked after
//! an Acquire's deadline runs out. Each round, with every master healthy,
//! [`CALLS`] Acquires of resources nobody else uses go out at once, each
//! with a gRPC deadline of 1-20 ms (`Request::set_timeout`); after one
//! ends DEADLINE_EXCEEDED (or CANCELLED, the client's own expiry), the
//! masters are read directly [`leftovers::SETTLE`] later. A lock key still
//! on a majority of them is `left_locked` (the contract: "nothing is left
//! locked by this call"). Keys on a minority are only counted.

use super::rig::{acquire, release, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use crate::leftovers;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::time::Instant;

/// Acquires per round, at once.
const CALLS: usize = 20;

/// Runs rounds for `duration` on `rig`.
pub(crate) async fn run(rig: &Rig, seed: u64, duration: Duration) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("deadline_leftovers");
    let ports = rig.master_ports();
    let mut rng = StdRng::seed_from_u64(seed);
    let end = Instant::now() + duration;
    let (mut rounds, mut expired, mut granted, mut minority) = (0u64, 0u64, 0u64, 0u64);
    while Instant::now() < end {
        rounds += 1;
        let calls = (0..CALLS).map(|i| {
            let resource = format!("interleavings/{seed}/deadline/{rounds}/{i}");
            let deadline = Duration::from_millis(rng.random_range(1..=20));
            let channel = rig.channel.clone();
            async move {
                let answer = acquire(
                    channel,
                    &resource,
                    leftovers::TTL,
                    Duration::ZERO,
                    Some(deadline),
                )
                .await;
                (resource, deadline, answer)
            }
        });
        let answers = futures::future::join_all(calls).await;
        tokio::time::sleep(leftovers::SETTLE).await;
        for (resource, deadline, answer) in answers {
            let code = match answer {
                Ok(lock) => {
                    granted += 1;
                    let _ = release(rig.channel.clone(), &lock).await;
                    continue;
                }
                Err(status) => status.code(),
            };
            if !matches!(code, tonic::Code::DeadlineExceeded | tonic::Code::Cancelled) {
                continue;
            }
            expired += 1;
            let (answered, present) = leftovers::read(&ports, &resource).await;
            if present * 2 > ports.len() {
                outcome.violation(
                    "left_locked",
                    format!(
                        "round {rounds}: {resource}: an Acquire with a {deadline:?} deadline \
                         ended {code:?}; {present} of {answered} masters still held its lock \
                         key {:?} later, every master healthy",
                        leftovers::SETTLE
                    ),
                );
            } else if present > 0 {
                minority += 1;
            }
        }
    }
    outcome.figure("rounds", rounds);
    outcome.figure("deadline_ran_out", expired);
    outcome.figure("granted_in_time", granted);
    outcome.figure("keys_left_on_a_minority", minority);
    if expired == 0 {
        outcome.violation(
            "proves_nothing",
            format!("no Acquire's deadline ran out in {rounds} rounds"),
        );
    }
    Ok(outcome)
}
