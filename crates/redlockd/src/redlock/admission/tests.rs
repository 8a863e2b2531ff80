//! The admission queue: its adaptive bound (cuts, growth, floor and
//! ceiling), the in-flight and queue bounds, and extensions' own permits.

use super::*;
use proptest::prelude::*;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// Slow rounds cut the bound by a quarter, once per cool-down, down to
/// the floor; brisk ones raise it by one per `limit` of them.
#[test]
fn aimd_cuts_and_grows() {
    let t0 = Instant::now();
    let mut b = Aimd::new(128);
    assert_eq!(b.limit(), START);
    let mut grown = 0;
    for _ in 0..10_000 {
        if b.outcome(false, t0, MS(50)) == Change::Grow {
            grown += 1;
        }
    }
    assert_eq!((b.limit(), grown), (128, 128 - START), "up to the ceiling");
    assert_eq!(b.outcome(true, t0, MS(50)), Change::Shrink(32));
    assert_eq!(b.limit(), 96);
    let cooling = b.outcome(true, t0 + MS(10), MS(50));
    assert_eq!(cooling, Change::Keep, "one cut per cool-down");
    assert_eq!(b.outcome(true, t0 + MS(60), MS(50)), Change::Shrink(24));
    for _ in 0..17 {
        assert_eq!(b.outcome(false, t0, MS(50)), Change::Keep);
    }
    assert_eq!(b.outcome(false, t0, MS(50)), Change::Grow);
    assert_eq!(b.limit(), 73);
    let mut at = t0 + MS(60);
    for _ in 0..100 {
        at += MS(60);
        b.outcome(true, at, MS(50));
    }
    assert_eq!(b.limit(), FLOOR);
}

proptest! {
    /// Whatever the outcomes, the bound stays within [floor, ceiling],
    /// and each change moves it by what it says.
    #[test]
    fn aimd_stays_in_bounds(ceiling in 1usize..300, outcomes in proptest::collection::vec((any::<bool>(), 0u64..200), 0..400)) {
        let mut b = Aimd::new(ceiling);
        let mut at = Instant::now();
        for (slow, after) in outcomes {
            at += MS(after);
            let before = b.limit();
            match b.outcome(slow, at, MS(50)) {
                Change::Keep => prop_assert_eq!(b.limit(), before),
                Change::Grow => prop_assert_eq!(b.limit(), before + 1),
                Change::Shrink(n) => prop_assert_eq!(b.limit() + n, before),
            }
            prop_assert!(b.limit() >= FLOOR.min(ceiling) && b.limit() <= ceiling);
        }
    }
}

/// A cut takes permits back, those in use as they are given back; a
/// later growth repays that debt before adding permits.
#[tokio::test(start_paused = true)]
async fn a_cut_takes_permits_back() {
    let gate = Admission::new(
        AdmissionLimits {
            max_in_flight: 16,
            max_queued: 100,
        },
        MS(50),
    );
    let mut held = Vec::new();
    for _ in 0..16 {
        held.push(gate.acquisition().await.expect("free"));
    }
    held[0].round_took(MS(40));
    assert_eq!(gate.limit(), 12);
    held.clear();
    assert_eq!(gate.acquisitions.available_permits(), 12);
    // Brisk rounds, three per step (a quarter of the bound), grow it back.
    let brisk = gate.acquisition().await.expect("free");
    for _ in 0..3 {
        brisk.round_took(MS(1));
    }
    drop(brisk);
    assert_eq!(gate.limit(), 13);
    assert_eq!(gate.acquisitions.available_permits(), 13);
}

/// Past the in-flight bound callers queue in order; past the queue bound
/// they are refused at once, and a freed permit goes to the queue's head.
#[tokio::test]
async fn queues_then_refuses() {
    let gate = Admission::new(
        AdmissionLimits {
            max_in_flight: 1,
            max_queued: 1,
        },
        MS(50),
    );
    let first = gate.acquisition().await.expect("a free permit");
    let mut second = Box::pin(gate.acquisition());
    assert!(futures::poll!(second.as_mut()).is_pending(), "queued");
    assert_eq!(gate.queued(), 1);
    match gate.acquisition().await {
        Err(LockError::Overloaded { max_queued: 1 }) => {}
        other => panic!("expected Overloaded, got {other:?}"),
    }
    assert_eq!(gate.queued(), 1, "the refused caller left the count");
    drop(first);
    let _second = second.await.expect("the queue's head is admitted");
    assert_eq!(gate.queued(), 0);
}

/// Extensions do not wait behind acquisitions.
#[tokio::test]
async fn extensions_have_their_own_permits() {
    let gate = Admission::new(
        AdmissionLimits {
            max_in_flight: 1,
            max_queued: 10,
        },
        MS(50),
    );
    let _acquiring = gate.acquisition().await.expect("a free permit");
    let _extending = gate.extension().await.expect("its own permit");
}

/// A caller that gives up while queued leaves no trace in the count.
#[tokio::test]
async fn cancelled_waiter_leaves_the_queue() {
    let gate = Admission::new(
        AdmissionLimits {
            max_in_flight: 1,
            max_queued: 10,
        },
        MS(50),
    );
    let first = gate.acquisition().await.expect("a free permit");
    {
        let mut waiting = Box::pin(gate.acquisition());
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        assert_eq!(gate.queued(), 1);
    }
    assert_eq!(gate.queued(), 0);
    drop(first);
    let _again = gate.acquisition().await.expect("the permit came back");
}
