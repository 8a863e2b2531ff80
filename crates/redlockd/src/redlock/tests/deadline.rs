//! Validity from one instant, on fake masters under paused time: a session
//! counts its lock's life from the engine's deadline (not from when the answer
//! reached it), and the time a unary operation took counts a host suspend.

use crate::redlock::boottime;
use crate::redlock::fake::{self, Behaviour};
use crate::redlock::{HoldEnd, Redlock};
use std::time::Duration;
use tokio::time::Instant;

const MS: fn(u64) -> Duration = Duration::from_millis;
const TTL: Duration = Duration::from_secs(10);
/// ttl less its drift allowance (1% + 2 ms).
const FULL: Duration = Duration::from_millis(9_898);

fn engine() -> (Vec<std::sync::Arc<fake::FakeMaster>>, Redlock) {
    let fakes = fake::five();
    let settings = fake::settings(MS(50));
    let engine = Redlock::new(fake::as_nodes(&fakes), settings).expect("five masters");
    (fakes, engine)
}

/// The grant reaches the session 5 s after the engine computed its
/// validity (a stalled task, a slow channel hop), and no extension can
/// succeed: `lost` comes by the grant's own deadline, start + ttl - drift,
/// not 5 s later.
#[tokio::test(start_paused = true)]
async fn a_session_is_lost_by_the_engines_deadline() {
    let (fakes, engine) = engine();
    let granted_at = Instant::now();
    let mut lock = engine
        .acquire("orders/42", TTL, Duration::ZERO)
        .await
        .expect("granted");
    assert_eq!(lock.deadline.mono, granted_at + FULL);
    tokio::time::sleep(Duration::from_secs(5)).await;
    for fake in &fakes {
        fake.set(Behaviour::Down);
    }
    let end = engine
        .hold(&mut lock, TTL, 1.0 / 3.0, std::future::pending(), |_| {})
        .await;
    assert!(matches!(end, HoldEnd::Lost(_)), "{end:?}");
    let lost_after = granted_at.elapsed();
    assert!(
        lost_after <= FULL,
        "lost {lost_after:?} after the grant, past its deadline {FULL:?}"
    );
}

/// A host suspend in the middle of an Extend's round (the boot clock jumps
/// 3 s, the monotonic one does not) is taken off the validity, as the
/// masters' keys kept expiring meanwhile; likewise for Validate.
#[tokio::test(start_paused = true)]
async fn unary_elapsed_time_counts_a_suspend() {
    let (fakes, engine) = engine();
    let lock = engine
        .acquire("orders/42", TTL, Duration::ZERO)
        .await
        .expect("granted");
    for fake in &fakes {
        fake.set(Behaviour::Slow(MS(10)));
    }
    let suspend = tokio::spawn(async {
        tokio::time::sleep(MS(5)).await;
        boottime::suspend_for_test(Duration::from_secs(3));
    });
    let extended = engine
        .extend(&lock.resource, &lock.token, TTL)
        .await
        .expect("extended");
    suspend.await.expect("no panic");
    // 3 s suspended + the 10 ms round.
    assert_eq!(extended.validity, FULL - MS(3_010));
    assert_eq!(extended.deadline.left(), FULL - MS(3_010));
    let suspend = tokio::spawn(async {
        tokio::time::sleep(MS(5)).await;
        boottime::suspend_for_test(Duration::from_secs(2));
    });
    let left = engine
        .validate(&lock.resource, &lock.token)
        .await
        .expect("answered")
        .expect("held");
    suspend.await.expect("no panic");
    // The quorum-th PTTL (10 s - 10 ms, read as the round started) less the
    // 2 s suspend and the round, less drift over what remained.
    assert!(left <= TTL - MS(2_000), "{left:?}");
}
