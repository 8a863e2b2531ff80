//! A session declared `lost` keeps the promise of the last validity it was
//! given: the daemon releases what is left only after that deadline.

use super::*;

/// Three masters go down: every extension fails, and with a little
/// validity left (2 x node_timeout) the session is told `lost`, before its
/// deadline. The lock is not released before that deadline (masters 3 and
/// 4 still hold it when `lost` arrives, and at the deadline); once the
/// keys of the grant have expired on their own (deadline + drift) it is.
#[tokio::test(start_paused = true)]
async fn lost_early_is_released_only_after_the_deadline() {
    let d = daemon();
    let (client, request) = HoldClient::new();
    client.acquire(MS(300), Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    let Ok(Event::Acquired(lock)) = next_event(&mut events).await else {
        panic!("the first event is `acquired`");
    };
    let deadline =
        Instant::now() + Duration::try_from(lock.validity.expect("a validity")).expect("positive");
    d.set(&[0, 1, 2], Behaviour::Down);
    let lost = next_event(&mut events).await;
    assert!(matches!(lost, Ok(Event::Lost(_))), "{lost:?}");
    assert!(Instant::now() < deadline, "told early, before the deadline");
    // Masters 0 to 2 are down: what they hold expires with its ttl.
    let on_the_live_masters = || {
        d.fakes[3..]
            .iter()
            .filter(|f| f.holder(&d.keys).as_deref() == Some(lock.token.as_str()))
            .count()
    };
    assert_eq!(on_the_live_masters(), 2, "not released before the deadline");
    tokio::time::sleep_until(deadline).await;
    assert_eq!(on_the_live_masters(), 2, "not released at the deadline");
    // 300 ms x 1% + 2 ms of drift.
    tokio::time::sleep_until(deadline + MS(5) + MS(1)).await;
    tokio::task::yield_now().await;
    assert_eq!(
        on_the_live_masters(),
        0,
        "released once the grant's keys expired"
    );
    drop(client);
}

/// A release that too few masters answer in time ends the session with
/// UNAVAILABLE, not with `released { was_held: false }`: the daemon cannot
/// tell, and false would claim the lock had been lost.
#[tokio::test(start_paused = true)]
async fn an_unconfirmed_release_is_unavailable_not_false() {
    let d = daemon();
    let (client, request) = HoldClient::new();
    client.acquire(TTL, Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    assert!(matches!(
        next_event(&mut events).await,
        Ok(Event::Acquired(_))
    ));
    d.set(&[0, 1, 2], Behaviour::Slow(Duration::from_secs(5)));
    client.release().await;
    let end = next_event(&mut events).await;
    let message = refused(end, Code::Unavailable);
    assert!(message.contains("no quorum"), "{message}");
}
