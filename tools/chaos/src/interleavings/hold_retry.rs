//! Defect 1 of the cross-kind review, forced: a Hold retried with its
//! request id is released under the retry. Each round, on a fresh
//! resource: session S1 takes the lock with request id X; S2 is opened
//! with X on a NEW connection while S1 lingers (the same lock: the same
//! token, `acquired`; or, if the daemon holds S2 back until S1 ends, after
//! 300 ms); then S1 ends, by a half-close in odd rounds and by dropping
//! the stream in even ones. While S2 still holds (its last
//! event's validity has not run out, [`super::hold::Session::until`]), a
//! third client tries the resource without waiting: a grant then is two
//! holders (`third_holder_under_retry`). A round counts only if S2 was
//! granted the same token.

use super::hold::{self, Session};
use super::rig::{acquire, release, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use rand::rngs::StdRng;
use rand::SeedableRng;
use redlockd_proto::pb::AcquireRequest;
use std::time::Duration;
use tokio::time::Instant;

/// How long S1 lingers, at most, for S2's answer.
const LINGER: Duration = Duration::from_millis(300);
/// The sessions' ttl (extended by the daemon).
const TTL: Duration = Duration::from_millis(500);

fn request(resource: &str, request_id: &str) -> AcquireRequest {
    AcquireRequest {
        resource: resource.to_owned(),
        ttl: prost_types::Duration::try_from(TTL).ok(),
        owner: "chaos-interleavings".to_owned(),
        request_id: request_id.to_owned(),
        ..Default::default()
    }
}

/// Runs rounds for `duration` on `rig`.
pub(crate) async fn run(rig: &Rig, seed: u64, duration: Duration) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("hold_retry");
    let (grpc, _) = rig.replicas.addrs(0).ok_or("no replica")?;
    let mut rng = StdRng::seed_from_u64(seed);
    let end = Instant::now() + duration;
    let (mut rounds, mut retried, mut under, mut other) = (0u64, 0u64, 0u64, 0u64);
    while Instant::now() < end {
        rounds += 1;
        let resource = format!("interleavings/{seed}/hold-retry/{rounds}");
        let id = crate::mix::request_id(&mut rng);
        let Ok(mut s1) = hold::open(rig.channel.clone(), request(&resource, &id)).await else {
            other += 1;
            continue;
        };
        s1.follow(Duration::from_millis(50)).await;
        let fresh = redlockd_testkit::client::endpoint(grpc)?.connect_lazy();
        let s2 = hold::open(fresh, request(&resource, &id));
        tokio::pin!(s2);
        // S1 lingers until S2 is answered, or LINGER at most (a daemon may
        // hold the retry back until the first stream ends).
        let early = tokio::time::timeout(LINGER, &mut s2).await.ok();
        let token = s1.lock.token.clone();
        match rounds % 2 {
            1 => {
                let _ = s1.half_close().await;
            }
            _ => drop(s1),
        }
        let s2 = match early {
            Some(answer) => answer,
            None => s2.await,
        };
        let mut s2: Session = match s2 {
            Ok(s2) if s2.lock.token == token => s2,
            _ => {
                other += 1;
                continue;
            }
        };
        retried += 1;
        // Let the daemon act on S1's end, then see whether S2 still holds.
        s2.follow(Duration::from_millis(20)).await;
        let third = acquire(rig.channel.clone(), &resource, TTL, Duration::ZERO, None).await;
        let granted_at = Instant::now();
        if let Ok(lock) = &third {
            if granted_at < s2.until {
                under += 1;
                outcome.violation(
                    "third_holder_under_retry",
                    format!(
                        "round {rounds}: a third client was granted {resource} (fence {}) \
                         {:?} before the retried session's validity ran out (S1 closed by {})",
                        lock.fence,
                        s2.until - granted_at,
                        if rounds % 2 == 1 {
                            "half-close"
                        } else {
                            "drop"
                        }
                    ),
                );
            }
            let _ = release(rig.channel.clone(), lock).await;
        }
        let _ = s2.half_close().await;
    }
    outcome.figure("rounds", rounds);
    outcome.figure("retries_granted_same_token", retried);
    outcome.figure("third_granted_under_retry", under);
    outcome.figure("other_outcomes", other);
    if retried == 0 {
        outcome.violation(
            "proves_nothing",
            format!("no Hold retry was granted the same lock in {rounds} rounds"),
        );
    }
    Ok(outcome)
}
