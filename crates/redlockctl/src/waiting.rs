//! `--wait`: waiting for a lock someone else holds, for a while or
//! `forever`. The daemon bounds one Acquire's wait by its `max_wait`, so
//! redlockctl waits in rounds: each round is one Acquire (or `Hold`) with
//! a wait the daemon accepts; ABORTED ends a round, and the next one starts
//! at once. Waiting forever also outlasts the daemon's bad moments:
//! UNAVAILABLE, a daemon that cannot be reached, a full waiter queue or a
//! call that gets no answer are retried after a pause that grows (with
//! jitter, so that waiters cut off together do not come back together).
//! What cannot get better by retrying (a bad request, a refused token)
//! ends the wait at once.

use crate::error::CtlError;
use rand::Rng;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;
use tonic::Code;

/// How long to wait for a lock held elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// At most this long in all (zero: try once).
    For(Duration),
    /// Until granted, or until redlockctl is stopped.
    Forever,
}

/// The first round's wait: the daemon's default `max_wait`. A daemon with
/// a smaller one says so (INVALID_ARGUMENT naming `max_wait`), and the
/// rounds shrink to it.
const FIRST_ROUND: Duration = Duration::from_secs(5 * 60);
/// A round that ends sooner than this is followed by a pause (growing
/// while such rounds follow each other): a daemon whose max_wait is
/// (nearly) zero must not be asked in a tight loop.
const SHORT_ROUND: Duration = Duration::from_secs(1);
/// The first pause after a failure.
const PAUSE_MIN: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
const PAUSE_MAX: Duration = Duration::from_secs(5);

/// The pause before attempt `failures + 1` after `failures` failures in a
/// row: doubling from [`PAUSE_MIN`] up to [`PAUSE_MAX`], then drawn at
/// random in its upper half ("equal jitter").
pub(crate) fn pause(failures: u32, rng: &mut impl Rng) -> Duration {
    let ceiling = PAUSE_MIN
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(PAUSE_MAX);
    let half = ceiling / 2;
    half + half.mul_f64(rng.random::<f64>())
}

/// What to do after a round failed with `error`.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Nothing more to try: the wait ends with this error.
    Stop,
    /// The lock stayed held for the whole round: start another.
    Again,
    /// The daemon accepts waits up to this long only.
    Shorter(Duration),
    /// A failure that may pass: pause, then try again.
    Retry,
}

fn next(error: &CtlError, wait: Wait, round: Duration) -> Next {
    let forever = wait == Wait::Forever;
    match error {
        CtlError::Status { status, .. } => match status.code() {
            Code::Aborted => Next::Again,
            Code::InvalidArgument => match max_wait(status.message()) {
                Some(Some(max)) if max < round => Next::Shorter(max),
                // Over the limit, but the limit is not where it was
                // expected in the message: halve the round.
                Some(None) if round > Duration::from_millis(1) => Next::Shorter(round / 2),
                _ => Next::Stop,
            },
            Code::Unavailable | Code::ResourceExhausted | Code::DeadlineExceeded if forever => {
                Next::Retry
            }
            _ => Next::Stop,
        },
        CtlError::Connect { .. } | CtlError::Closed { .. } | CtlError::TimedOut { .. }
            if forever =>
        {
            Next::Retry
        }
        _ => Next::Stop,
    }
}

/// The daemon's max_wait from its INVALID_ARGUMENT about a `wait` over it
/// (`wait: 5m is over max_wait 2s`): None if the message is about
/// something else, Some(None) if it names max_wait without a readable value.
fn max_wait(message: &str) -> Option<Option<Duration>> {
    let rest = message.strip_prefix("wait:")?;
    let (_, max) = rest.split_once("max_wait")?;
    Some(humantime::parse_duration(max.trim()).ok())
}

/// Calls `attempt(round_wait)` until it succeeds or the wait is over; see
/// the module's comment. `what` names the call in messages. Dropping the
/// future (on a signal, say) cancels the round in flight.
pub(crate) async fn until_granted<T, F, Fut>(
    what: &str,
    wait: Wait,
    mut attempt: F,
) -> Result<T, CtlError>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<T, CtlError>>,
{
    let end = match wait {
        Wait::For(total) => Instant::now().checked_add(total),
        Wait::Forever => None,
    };
    let mut longest = FIRST_ROUND;
    let mut failures = 0u32;
    loop {
        let left = end.map(|end| end.saturating_duration_since(Instant::now()));
        let round = left.map_or(longest, |left| left.min(longest));
        let started = Instant::now();
        let error = match attempt(round).await {
            Ok(granted) => return Ok(granted),
            Err(error) => error,
        };
        let more = end.is_none_or(|end| Instant::now() < end);
        let pause_for = match next(&error, wait, round) {
            Next::Stop => return Err(error),
            Next::Again if !more => return Err(error),
            Next::Again if started.elapsed() >= SHORT_ROUND => {
                failures = 0;
                continue;
            }
            Next::Again => {
                failures = failures.saturating_add(1);
                pause(failures, &mut rand::rng())
            }
            Next::Shorter(max) => {
                eprintln!(
                    "redlockctl: {what}: the daemon's max_wait is shorter; waiting in rounds of {}",
                    humantime::format_duration(max)
                );
                longest = max;
                continue;
            }
            Next::Retry => {
                failures = failures.saturating_add(1);
                let pause_for = pause(failures, &mut rand::rng());
                eprintln!(
                    "redlockctl: {error}; trying again in {} ms (--wait forever)",
                    pause_for.as_millis()
                );
                pause_for
            }
        };
        let wake = Instant::now() + pause_for;
        tokio::time::sleep_until(end.map_or(wake, |end| end.min(wake))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::cell::RefCell;
    use tonic::Status;

    fn status(code: Code, message: &str) -> CtlError {
        CtlError::status("acquire r", Status::new(code, message))
    }

    /// Pauses grow from 50-100 ms to 2.5-5 s, never past the cap.
    #[test]
    fn pauses_grow_with_jitter_and_stay_bounded() {
        let mut rng = StdRng::seed_from_u64(7);
        for failures in 1..40 {
            let ceiling = (PAUSE_MIN * 2u32.pow((failures - 1).min(10))).min(PAUSE_MAX);
            for _ in 0..50 {
                let p = pause(failures, &mut rng);
                assert!(p >= ceiling / 2 && p <= ceiling, "{failures}: {p:?}");
            }
        }
        let draws: std::collections::HashSet<Duration> =
            (0..20).map(|_| pause(5, &mut rng)).collect();
        assert!(draws.len() > 10, "jittered: {draws:?}");
    }

    /// The daemon's message about a wait over its limit gives the limit.
    #[test]
    fn max_wait_from_the_message() {
        assert_eq!(
            max_wait("wait: 5m is over max_wait 2s"),
            Some(Some(Duration::from_secs(2)))
        );
        assert_eq!(
            max_wait("wait: 5m is over max_wait 1s 500ms"),
            Some(Some(Duration::from_millis(1500)))
        );
        assert_eq!(max_wait("wait: over max_wait (two seconds)"), Some(None));
        assert_eq!(max_wait("ttl: 5m is over max_ttl 1m"), None);
        assert_eq!(max_wait("wait: must not be negative"), None);
    }

    /// Which failures end the wait, and which do not.
    #[test]
    fn what_follows_a_failure() {
        let round = Duration::from_secs(300);
        let once = Wait::For(Duration::from_secs(1));
        let unavailable = status(Code::Unavailable, "");
        assert_eq!(next(&unavailable, Wait::Forever, round), Next::Retry);
        assert_eq!(next(&unavailable, once, round), Next::Stop);
        let aborted = status(Code::Aborted, "");
        assert_eq!(next(&aborted, once, round), Next::Again);
        let over = status(Code::InvalidArgument, "wait: 5m is over max_wait 2s");
        assert_eq!(
            next(&over, once, round),
            Next::Shorter(Duration::from_secs(2))
        );
        // A limit that is not below the round cannot help.
        assert_eq!(next(&over, once, Duration::from_secs(2)), Next::Stop);
        let unreadable = status(Code::InvalidArgument, "wait: over max_wait (two seconds)");
        assert_eq!(
            next(&unreadable, once, round),
            Next::Shorter(Duration::from_secs(150))
        );
        let ttl = status(Code::InvalidArgument, "ttl: 5m is over max_ttl 1m");
        assert_eq!(next(&ttl, Wait::Forever, round), Next::Stop);
        for code in [
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::Internal,
        ] {
            assert_eq!(next(&status(code, ""), Wait::Forever, round), Next::Stop);
        }
        let refused = CtlError::Connect {
            addr: "x".into(),
            reason: "refused".into(),
        };
        assert_eq!(next(&refused, Wait::Forever, round), Next::Retry);
        assert_eq!(next(&refused, once, round), Next::Stop);
    }

    /// Forever: rounds follow ABORTED, shrink to the daemon's max_wait,
    /// and outlast UNAVAILABLE; the clock is paused, so no time passes.
    #[tokio::test(start_paused = true)]
    async fn forever_outlasts_busy_rounds_and_failures() {
        let rounds = RefCell::new(Vec::new());
        let granted = until_granted("acquire r", Wait::Forever, |round| {
            rounds.borrow_mut().push(round);
            let n = rounds.borrow().len();
            async move {
                match n {
                    1 => Err(status(
                        Code::InvalidArgument,
                        "wait: 5m is over max_wait 2s",
                    )),
                    2 => {
                        tokio::time::sleep(round).await;
                        Err(status(Code::Aborted, ""))
                    }
                    3 | 4 => Err(status(Code::Unavailable, "")),
                    _ => Ok(n),
                }
            }
        })
        .await;
        assert_eq!(granted.ok(), Some(5));
        let two = Duration::from_secs(2);
        assert_eq!(*rounds.borrow(), [FIRST_ROUND, two, two, two, two]);
    }

    /// A daemon that answers ABORTED at once (max_wait zero) is asked
    /// after growing pauses, not in a tight loop: a minute of waiting costs
    /// a few dozen attempts.
    #[tokio::test(start_paused = true)]
    async fn instant_refusals_are_paced() {
        let attempts = RefCell::new(0u32);
        let minute = Duration::from_secs(60);
        let outcome: Result<(), CtlError> = until_granted("acquire r", Wait::For(minute), |_| {
            *attempts.borrow_mut() += 1;
            async { Err(status(Code::Aborted, "")) }
        })
        .await;
        assert!(outcome.is_err());
        let n = *attempts.borrow();
        assert!((12..=40).contains(&n), "{n} attempts in a minute");
    }

    /// A finite wait ends with the last ABORTED once its time is used up,
    /// and never asks for more than is left.
    #[tokio::test(start_paused = true)]
    async fn a_finite_wait_ends() {
        let rounds = RefCell::new(Vec::new());
        let outcome: Result<(), CtlError> =
            until_granted("acquire r", Wait::For(Duration::from_secs(5)), |round| {
                rounds.borrow_mut().push(round);
                let first = rounds.borrow().len() == 1;
                async move {
                    if first {
                        return Err(status(
                            Code::InvalidArgument,
                            "wait: 5s is over max_wait 2s",
                        ));
                    }
                    tokio::time::sleep(round).await;
                    Err(status(Code::Aborted, ""))
                }
            })
            .await;
        assert!(matches!(outcome, Err(CtlError::Status { .. })));
        let r = rounds.borrow();
        assert_eq!(r[0], Duration::from_secs(5));
        assert_eq!(r.len(), 4, "{r:?}");
        assert!(r[1..].iter().all(|d| *d <= Duration::from_secs(2)));
        assert_eq!(r[1..].iter().sum::<Duration>(), Duration::from_secs(5));
    }
}
