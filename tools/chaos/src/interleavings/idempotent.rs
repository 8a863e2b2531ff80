//! Idempotent acquisition (`AcquireRequest.request_id`) on the
//! slow client link of [`super::slow_link`]: the late client sends a fresh
//! request id per round, with a gRPC deadline barely above its wait, while
//! a fast holder releases the resource before that deadline (early in
//! even rounds, so the grant is answered; in odd rounds near the daemon's
//! cut-off, so that the waiter's attempt, with the masters
//! [`MASTER_DELAY`] away, completes either side of it: when after, the
//! call ends with DEADLINE_EXCEEDED and its late grant is then released).
//! Where "near the cut-off" lies depends on the machine, so the odd
//! rounds' release moves later after each odd round answered in time
//! and earlier after each that was not ([`LateRelease`]). Then it retries AT ONCE
//! with the same request id, over the same slow link:
//! - after a grant (the answer counted as lost, as when a connection
//!   breaks after the daemon wrote it): the retry must answer the same
//!   lock, the same token and the same fence (`retry_changed_lock`);
//! - after DEADLINE_EXCEEDED or CANCELLED: the daemon releases the late
//!   grant, and the retry, on the same replica, waits for that release
//!   and acquires anew. Its lock must stay held while the first call's
//!   task has certainly ended ([`OBSERVE`], polled by Validate on the fast
//!   link: `retry_lost_its_lock`), and its Release must say `was_held`
//!   (an UNAVAILABLE answer, too few masters in time on a starved machine,
//!   cannot tell and is only counted);
//! - nothing is orphaned: once the retry's lock is released, a fast prober
//!   gets the resource within [`ORPHAN_LIMIT`] (`orphaned`);
//! - no two grants of a round overlap (`two_holders`).
//!
//! The replica runs with `server.deadline_reserve` = [`super::slow_link::RESERVE`].
//!
//! What it does not reach: with the daemon's turns disabled (the retry
//! then overlapping the late grant's release), 2 runs of 10 s with these
//! parameters (and 5 with earlier ones) found no violation; the retry arrives after that release too often for the
//! race to show here. The turns are pinned by
//! `service::tests::idempotent::a_retry_right_after_deadline_exceeded_keeps_its_lock`
//! (fails without them) and by `tests/tests/idempotent_acquire.rs`.

use super::rig::{acquire, acquire_as, held, release, validity, Rig};
use super::slow_link::LINK;
use super::Outcome;
use crate::cluster::BoxError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::Lock;
use redlockd_testkit::proxy::{Mode, Proxy};
use std::time::Duration;
use tokio::time::Instant;

/// One-way delay between the replica and each master.
const MASTER_DELAY: Duration = Duration::from_millis(15);
/// The late client's gRPC deadline.
const DEADLINE: Duration = Duration::from_millis(300);
/// Its wait: just under the deadline.
const WAIT: Duration = Duration::from_millis(280);
/// The retry's wait and deadline: long enough to outlast the first call.
const RETRY_WAIT: Duration = Duration::from_secs(2);
const RETRY_DEADLINE: Duration = Duration::from_secs(3);
/// How long the retry's lock is watched: well past the end of the first
/// call's task (an attempt in flight and a release: 3 × the default
/// `node_timeout` of 50 ms).
const OBSERVE: Duration = Duration::from_millis(400);
/// Longest the resource may stay unavailable once the retry released.
const ORPHAN_LIMIT: Duration = Duration::from_millis(1500);

/// When the holder releases in odd rounds: a staircase that walks to the
/// point where the waiter's grant comes either side of the daemon's
/// cut-off. The fixed 205-228 ms it replaced was answered in time in all
/// but one or two odd rounds of a 6 s run on one machine, and in all 18
/// on another (CI).
struct LateRelease {
    at: Duration,
}

impl LateRelease {
    /// Where it starts, how far a round moves it, and its bounds (the
    /// upper one just under the waiter's [`WAIT`]).
    const START: Duration = Duration::from_millis(215);
    const STEP: Duration = Duration::from_millis(6);
    const EARLIEST: Duration = Duration::from_millis(150);
    const LATEST: Duration = Duration::from_millis(275);

    fn new() -> LateRelease {
        LateRelease { at: Self::START }
    }

    /// This round's release, jittered by up to a step either way.
    fn pick(&self, rng: &mut StdRng) -> Duration {
        let step = Self::STEP.as_millis() as i64;
        let at = self.at.as_millis() as i64 + rng.random_range(-step..=step);
        Duration::from_millis(at as u64)
    }

    /// Later after a grant in time, earlier after a deadline.
    fn answered(&mut self, in_time: bool) {
        self.at = match in_time {
            true => (self.at + Self::STEP).min(Self::LATEST),
            false => self.at.saturating_sub(Self::STEP).max(Self::EARLIEST),
        };
    }
}

/// A grant: when the client had it, until when it could count on it.
#[derive(Debug, Clone, Copy)]
struct Held {
    from: Instant,
    until: Instant,
}

impl Held {
    fn of(lock: &Lock, from: Instant, released: Instant) -> Held {
        Held {
            from,
            until: released.min(from + validity(lock)),
        }
    }
}

/// Counts of what the rounds saw.
#[derive(Default)]
struct Counts {
    rounds: u64,
    lost_answers: u64,
    retried_after_deadline: u64,
    /// Validates and Releases of the retry's lock that could not tell.
    could_not_tell: u64,
    other: u64,
}

/// Runs rounds for `duration` on `rig`.
pub(crate) async fn run(
    rig: &Rig,
    seed: u64,
    duration: Duration,
    ttl: Duration,
) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("idempotent");
    let (grpc, _) = rig.replicas.addrs(0).ok_or("no replica")?;
    let link = Proxy::start(grpc).await?;
    link.set(Mode::Slow(LINK));
    let slow = redlockd_testkit::client::endpoint(link.addr())?.connect_lazy();
    let fast = rig.channel.clone();
    // Masters a little away, so that a late grant's last rounds and its
    // release take long enough for the retry to arrive in between.
    for i in 0..5 {
        rig.set_mode(i, Mode::Slow(MASTER_DELAY));
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let end = Instant::now() + duration;
    // Should the staircase not have found both ways in `duration`, rounds
    // go on while either is still missing, for at most twice as long
    // again; then "proves_nothing" says so.
    let last_chance = end + duration * 2;
    let mut n = Counts::default();
    let mut late_release = LateRelease::new();
    while Instant::now() < end
        || ((n.lost_answers == 0 || n.retried_after_deadline == 0) && Instant::now() < last_chance)
    {
        n.rounds += 1;
        let round = n.rounds;
        let resource = format!("interleavings/{seed}/idem/{round}");
        let request_id = format!("{:032x}", rng.random::<u128>());
        let mut grants: Vec<(&'static str, Held)> = Vec::new();
        let Ok(holder) = acquire(fast.clone(), &resource, ttl, Duration::from_secs(1), None).await
        else {
            n.other += 1;
            continue;
        };
        let holder_from = Instant::now();
        let odd = round % 2 == 1;
        let release_after = match odd {
            false => Duration::from_millis(rng.random_range(100..=130)),
            true => late_release.pick(&mut rng),
        };
        let late = {
            let (slow, resource, id) = (slow.clone(), resource.clone(), request_id.clone());
            tokio::spawn(async move {
                let answer = acquire_as(slow, &resource, ttl, WAIT, Some(DEADLINE), &id).await;
                (answer, Instant::now())
            })
        };
        tokio::time::sleep(release_after).await;
        let released = Instant::now();
        let _ = release(fast.clone(), &holder).await;
        grants.push(("holder", Held::of(&holder, holder_from, released)));
        let (first, ended) = late.await?;
        let after_deadline = match &first {
            Ok(_) => false,
            Err(status)
                if matches!(
                    status.code(),
                    tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
                ) =>
            {
                true
            }
            Err(_) => {
                n.other += 1;
                continue;
            }
        };
        if odd {
            late_release.answered(!after_deadline);
        }
        let retry = acquire_as(
            slow.clone(),
            &resource,
            ttl,
            RETRY_WAIT,
            Some(RETRY_DEADLINE),
            &request_id,
        )
        .await;
        let retry_at = Instant::now();
        let Ok(retry) = retry else {
            n.other += 1;
            if let Ok(lock) = &first {
                let _ = release(slow.clone(), lock).await;
            }
            continue;
        };
        if let Ok(lock) = &first {
            n.lost_answers += 1;
            if (lock.token.as_str(), lock.fence) != (retry.token.as_str(), retry.fence) {
                outcome.violation(
                    "retry_changed_lock",
                    format!(
                        "round {round}: the retry of a granted call answered fence {} \
                         (the grant had {}), same token: {}",
                        retry.fence,
                        lock.fence,
                        lock.token == retry.token
                    ),
                );
            }
        } else {
            n.retried_after_deadline += 1;
        }
        let from = match &first {
            Ok(_) => ended,
            Err(_) => retry_at,
        };
        let observe_until = Instant::now() + OBSERVE;
        while after_deadline && Instant::now() < observe_until {
            // Too few masters answering in time (a starved machine) cannot
            // tell; only a "not held" is a violation.
            let validated = held(fast.clone(), &retry).await;
            if validated.is_err() {
                n.could_not_tell += 1;
            }
            if matches!(validated, Ok(false)) {
                outcome.violation(
                    "retry_lost_its_lock",
                    format!(
                        "round {round}: the lock of a retry after DEADLINE_EXCEEDED was \
                         no longer held {:?} after it was granted (Validate: {validated:?}; \
                         first call: {:?}, retry fence {})",
                        retry_at.elapsed(),
                        first.as_ref().err().map(tonic::Status::code),
                        retry.fence
                    ),
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let sent = Instant::now();
        let was_held = release(slow.clone(), &retry).await;
        if was_held.is_err() {
            n.could_not_tell += 1;
        }
        if matches!(was_held, Ok(false)) {
            outcome.violation(
                "retry_lost_its_lock",
                format!("round {round}: the retry's release answered {was_held:?}"),
            );
        }
        grants.push(("late", Held::of(&retry, from, sent)));
        let (probe, free_after) = probe(&fast, &resource, Instant::now(), ttl).await;
        if free_after > ORPHAN_LIMIT {
            outcome.violation(
                "orphaned",
                format!(
                    "round {round}: after the retry released, the resource stayed \
                     unavailable for {free_after:?}"
                ),
            );
        }
        if let Some((lock, from)) = probe {
            let sent = Instant::now();
            let _ = release(fast.clone(), &lock).await;
            grants.push(("prober", Held::of(&lock, from, sent)));
        }
        for (i, (a, ha)) in grants.iter().enumerate() {
            for (b, hb) in &grants[i + 1..] {
                if ha.from < hb.until && hb.from < ha.until {
                    outcome.violation(
                        "two_holders",
                        format!("round {round}: {a} and {b} held {resource} at once"),
                    );
                }
            }
        }
    }
    link.set(Mode::Pass);
    for i in 0..5 {
        rig.set_mode(i, Mode::Pass);
    }
    outcome.figure("rounds", n.rounds);
    outcome.figure("lost_answer_retries", n.lost_answers);
    outcome.figure("retries_after_deadline", n.retried_after_deadline);
    outcome.figure("could_not_tell", n.could_not_tell);
    outcome.figure("other_outcomes", n.other);
    if n.lost_answers == 0 || n.retried_after_deadline == 0 {
        outcome.violation(
            "proves_nothing",
            format!(
                "{} retries of a granted call and {} after DEADLINE_EXCEEDED in {} rounds: \
                 the interleaving did not happen both ways",
                n.lost_answers, n.retried_after_deadline, n.rounds
            ),
        );
    }
    Ok(outcome)
}

/// Polls Acquire without waiting on the fast link until it is granted or
/// the ttl and a margin have passed; the grant (and when it came) and how
/// long after `since` the resource was free.
async fn probe(
    fast: &tonic::transport::Channel,
    resource: &str,
    since: Instant,
    ttl: Duration,
) -> (Option<(Lock, Instant)>, Duration) {
    let limit = since + ttl + Duration::from_secs(2);
    loop {
        let answer = acquire(
            fast.clone(),
            resource,
            Duration::from_secs(1),
            Duration::ZERO,
            None,
        )
        .await;
        let now = Instant::now();
        if let Ok(lock) = answer {
            return (Some((lock, now)), now - since);
        }
        if now >= limit {
            return (None, now - since);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
