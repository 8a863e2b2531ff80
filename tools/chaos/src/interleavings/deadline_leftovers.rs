//! Defect 5 of the cross-kind review, forced: nothing is left locked after
//! an Acquire's deadline runs out. Each round, with every master healthy,
//! [`CALLS`] Acquires of resources nobody else uses go out at once, each
//! with a gRPC deadline of 1-20 ms (`Request::set_timeout`), half of them
//! the way the contract asks of clients (lock.proto, DEADLINE_EXCEEDED):
//! with a request id, and, after the deadline ran out in the client (the
//! answer may have been a grant still on its way, which no daemon can
//! know), a Release of the token the request id derives. The masters are
//! then read directly [`leftovers::SETTLE`] later:
//! - such a call's lock key still on a majority of masters is
//!   `left_locked` (the contract: nothing is left locked);
//! - the other half send no request id and cannot clean up: their
//!   leftovers are counted (`raw_left_locked`), the residual the contract
//!   states, not a violation.
//!
//! Keys on a minority are only counted.

use super::rig::{acquire_as, release_token, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use crate::leftovers;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd::redlock::{RequestId, Token};
use std::time::Duration;
use tokio::time::Instant;

/// Acquires per round, at once.
const CALLS: usize = 20;

/// A fresh request id (22 URL-safe characters, 128 random bits).
fn request_id(rng: &mut StdRng) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    (0..22)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Runs rounds for `duration` on `rig`.
pub(crate) async fn run(rig: &Rig, seed: u64, duration: Duration) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("deadline_leftovers");
    let ports = rig.master_ports();
    let mut rng = StdRng::seed_from_u64(seed);
    let end = Instant::now() + duration;
    let (mut rounds, mut expired, mut granted, mut minority) = (0u64, 0u64, 0u64, 0u64);
    let (mut raw_expired, mut raw_left) = (0u64, 0u64);
    while Instant::now() < end {
        rounds += 1;
        let calls = (0..CALLS).map(|i| {
            let resource = format!("interleavings/{seed}/deadline/{rounds}/{i}");
            let deadline = Duration::from_millis(rng.random_range(1..=20));
            let id = (i % 2 == 0).then(|| request_id(&mut rng));
            let channel = rig.channel.clone();
            async move {
                let answer = acquire_as(
                    channel.clone(),
                    &resource,
                    leftovers::TTL,
                    Duration::ZERO,
                    Some(deadline),
                    id.as_deref().unwrap_or(""),
                )
                .await;
                // The contract's recipe: after the deadline ran out, the
                // request id's token is released (a Release of a token
                // that holds nothing is harmless).
                if let (Err(status), Some(id)) = (&answer, &id) {
                    if matches!(
                        status.code(),
                        tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
                    ) {
                        if let Ok(id) = RequestId::parse(id) {
                            let token = Token::derive(&id, &resource);
                            let _ = release_token(channel, &resource, token.expose()).await;
                        }
                    }
                }
                (resource, deadline, id.is_some(), answer)
            }
        });
        let answers = futures::future::join_all(calls).await;
        tokio::time::sleep(leftovers::SETTLE).await;
        for (resource, deadline, recipe, answer) in answers {
            let code = match answer {
                Ok(lock) => {
                    granted += 1;
                    let _ = release_token(rig.channel.clone(), &lock.resource, &lock.token).await;
                    continue;
                }
                Err(status) => status.code(),
            };
            if !matches!(code, tonic::Code::DeadlineExceeded | tonic::Code::Cancelled) {
                continue;
            }
            let (answered, present) = leftovers::read(&ports, &resource).await;
            let on_majority = present * 2 > ports.len();
            if !recipe {
                raw_expired += 1;
                raw_left += u64::from(on_majority);
                continue;
            }
            expired += 1;
            if on_majority {
                outcome.violation(
                    "left_locked",
                    format!(
                        "round {rounds}: {resource}: an Acquire with a request id and a \
                         {deadline:?} deadline ended {code:?} and its token was released; \
                         {present} of {answered} masters still held its lock key {:?} later, \
                         every master healthy",
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
    outcome.figure("raw_deadline_ran_out", raw_expired);
    outcome.figure("raw_left_locked", raw_left);
    if expired == 0 {
        outcome.violation(
            "proves_nothing",
            format!("no Acquire's deadline ran out in {rounds} rounds"),
        );
    }
    Ok(outcome)
}
