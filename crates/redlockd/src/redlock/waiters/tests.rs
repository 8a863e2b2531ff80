//! Tests of the local waiter queues (`super`).

use super::*;
use std::time::Duration;

fn waiters(per_resource: usize, total: usize) -> Arc<Waiters> {
    Arc::new(Waiters::new(per_resource, total))
}

/// A waiter behind the front waits for the front's attempt under way
/// to end, and learns its outage; with none under way, not at all; and
/// the front leaving ends its attempt too.
#[tokio::test]
async fn the_fronts_attempt_ends_for_those_behind() {
    let w = waiters(10, 10);
    let front = w.join("r").expect("room");
    let behind = w.join("r").expect("room");
    behind.attempt_ended().await;
    front.attempting();
    let pending = tokio::time::timeout(Duration::from_millis(20), behind.attempt_ended());
    assert!(pending.await.is_err(), "ended before the attempt did");
    tokio::join!(behind.attempt_ended(), async {
        tokio::task::yield_now().await;
        front.attempted(Some(Tally::new(
            super::super::Quorum::majority(5).expect("5 > 0"),
        )));
    });
    assert!(behind.outage().is_some());
    behind.attempt_ended().await;
    front.attempting();
    tokio::join!(behind.attempt_ended(), async {
        tokio::task::yield_now().await;
        drop(front);
    });
}

/// The first waiter is the front; the others move up in arrival order.
#[tokio::test]
async fn first_come_first_served() {
    let w = waiters(10, 10);
    let first = w.join("r").expect("room");
    let mut second = w.join("r").expect("room");
    let mut third = w.join("r").expect("room");
    assert!(first.is_front() && !second.is_front() && !third.is_front());
    drop(first);
    assert_eq!(
        second.woken().await,
        Wake::Front {
            holder_expires: None
        }
    );
    assert!(second.is_front() && !third.is_front());
    let until = Instant::now() + Duration::from_secs(3);
    second.granted(until);
    assert_eq!(
        third.woken().await,
        Wake::Front {
            holder_expires: Some(until)
        }
    );
    assert_eq!(w.len(), 1);
}

/// A release wakes only the front waiter of that resource.
#[tokio::test]
async fn release_wakes_the_front_only() {
    let w = waiters(10, 10);
    let mut front = w.join("r").expect("room");
    let mut back = w.join("r").expect("room");
    let mut other = w.join("s").expect("room");
    w.released("r", true, 7);
    assert_eq!(
        front.woken().await,
        Wake::Released {
            at_once: true,
            notice: 7
        }
    );
    assert!(back.woken.try_recv().is_err());
    assert!(other.woken.try_recv().is_err());
}

/// A waiter leaving from the middle does not disturb the front.
#[tokio::test]
async fn leaving_from_the_middle() {
    let w = waiters(10, 10);
    let mut front = w.join("r").expect("room");
    let middle = w.join("r").expect("room");
    let mut back = w.join("r").expect("room");
    drop(middle);
    assert!(front.woken.try_recv().is_err());
    drop(front);
    assert_eq!(
        back.woken().await,
        Wake::Front {
            holder_expires: None
        }
    );
    drop(back);
    assert!(w.is_empty());
    assert!(w.lock().by_resource.is_empty(), "empty queues are removed");
}

/// Both limits answer at once, and free up when waiters leave.
#[tokio::test]
async fn limits() {
    let w = waiters(2, 3);
    let a = w.join("r").expect("room");
    let _b = w.join("r").expect("room");
    assert_eq!(w.join("r").err(), Some(WaitLimit::PerResource(2)));
    let _c = w.join("s").expect("room");
    assert_eq!(w.join("t").err(), Some(WaitLimit::Total(3)));
    drop(a);
    assert!(w.join("t").is_ok());
}
