//! Acquires that end without the daemon's answer leave nothing locked.
//!
//! Through [`SlowAnswers`] the daemon's answers arrive 500 ms after it sent
//! them (requests pass at once): a grant the daemon makes at once reaches
//! the client long after a 100 ms deadline fired, or after its future was
//! dropped. The client must then release the token its request id derives;
//! without that the lock would stay for its 30 s ttl, and another client
//! would not get the resource within the 2 s the tests allow.

use crate::slow::SlowAnswers;
use crate::{acquirable_within, start};
use redlockd_client::{new_request_id, Client, Error};
use redlockd_testkit::harness::{eventually, Harness};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);
const DELAY: Duration = Duration::from_millis(500);
const WITHIN: Duration = Duration::from_secs(2);

/// A client whose answers from the daemon take [`DELAY`], its connection
/// already open (a first call through the delay).
async fn slow_client(h: &Harness) -> (SlowAnswers, Client) {
    let proxy = SlowAnswers::start(h.daemons[0].addr, DELAY).await;
    let client = Client::connect(proxy.addr.to_string())
        .await
        .expect("connect through the proxy");
    let warm = client
        .acquire("unanswered/warm", TTL)
        .await
        .expect("warm-up");
    assert!(client.release(&warm).await.expect("release"));
    (proxy, client)
}

/// Waits (at most 2 s) until a majority of the masters hold `resource`
/// under a token other than `previous`: the waiter's grant is made, its
/// answer held back by the proxy.
async fn granted_to_the_waiter(h: &Harness, resource: &str, previous: &str) {
    eventually(
        Duration::from_secs(2),
        "the waiter's grant on the masters",
        || async move {
            let mut holding = 0;
            for i in 0..h.masters.len() {
                if h.lock_value(i, resource)
                    .await
                    .is_some_and(|token| token != previous)
                {
                    holding += 1;
                }
            }
            holding > h.masters.len() / 2
        },
    )
    .await;
}

/// The grant is made well within the 100 ms deadline, and its answer
/// arrives after it fired (DeadlineExceeded): another client gets the
/// resource within 2 s, long before the 30 s ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_answer_leaves_nothing_locked() {
    let (h, direct) = start().await;
    let (_proxy, slow) = slow_client(&h).await;
    let error = slow
        .acquire("unanswered/late", TTL)
        .timeout(Duration::from_millis(100))
        .await
        .expect_err("the answer comes after the deadline");
    assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
    let took = acquirable_within(&direct, "unanswered/late", WITHIN).await;
    println!("free {took:?} after the deadline");
}

/// An acquire dropped mid-wait: the holder releases, the daemon grants the
/// waiter at once, and the waiter's future is dropped while the answer is
/// on its way. Another client gets the resource within 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_mid_wait_leaves_nothing_locked() {
    let (h, direct) = start().await;
    let (_proxy, slow) = slow_client(&h).await;
    let held = direct
        .acquire("unanswered/dropped", TTL)
        .await
        .expect("acquire");
    let waiter = tokio::spawn({
        let slow = slow.clone();
        async move {
            slow.acquire("unanswered/dropped", TTL)
                .wait(Duration::from_secs(20))
                .await
        }
    });
    // Lets the waiter's wait begin; cannot make the test pass on its own.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(direct.release(&held).await.expect("release"));
    granted_to_the_waiter(&h, "unanswered/dropped", held.token()).await;
    // The grant's answer is in the proxy for DELAY: drop the future.
    waiter.abort();
    let outcome = waiter.await;
    assert!(
        outcome.as_ref().is_err_and(|e| e.is_cancelled()),
        "the waiter was dropped before its answer: {outcome:?}"
    );
    let took = acquirable_within(&direct, "unanswered/dropped", WITHIN).await;
    println!("free {took:?} after the drop");
}

/// A Hold dropped while its grant is on the way, with a lock-delay: the
/// resource is free within 2 s. The daemon releases a cancelled session's
/// lock itself when it sees the stream closed first, but when it sees the
/// client's side gone first it leaves a lock with a lock-delay to expire
/// (here 30 s, then 10 s of delay); the client's background release of the
/// derived token covers that case too. (Which the daemon sees first is a
/// race, so this test does not fail on every client that leaks.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_dropped_mid_wait_leaves_nothing_locked() {
    let (h, direct) = start().await;
    let (_proxy, slow) = slow_client(&h).await;
    let held = direct
        .acquire("unanswered/hold", TTL)
        .await
        .expect("acquire");
    let waiter = tokio::spawn({
        let slow = slow.clone();
        async move {
            slow.hold("unanswered/hold", TTL)
                .wait(Duration::from_secs(20))
                .lock_delay(Duration::from_secs(10))
                .await
        }
    });
    // Lets the session's wait begin; cannot make the test pass on its own.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(direct.release(&held).await.expect("release"));
    granted_to_the_waiter(&h, "unanswered/hold", held.token()).await;
    // The `acquired` event is in the proxy for DELAY: drop the future.
    waiter.abort();
    let outcome = waiter.await;
    assert!(
        outcome.as_ref().is_err_and(|e| e.is_cancelled()),
        "the waiter was dropped before its grant: {outcome:?}"
    );
    let took = acquirable_within(&direct, "unanswered/hold", WITHIN).await;
    println!("free {took:?} after the drop");
}

/// A retry with the same request id right after an unanswered acquire waits
/// for that acquire's background release, then acquires anew: the release
/// does not take the retry's lock (same request id, same token) away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_with_the_same_request_id_keeps_its_lock() {
    let (h, direct) = start().await;
    let (_proxy, slow) = slow_client(&h).await;
    let id = new_request_id().expect("id");
    let error = slow
        .acquire("unanswered/retry", TTL)
        .request_id(&id)
        .timeout(Duration::from_millis(100))
        .await
        .expect_err("deadline");
    assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
    let lock = slow
        .acquire("unanswered/retry", TTL)
        .request_id(&id)
        .wait(Duration::from_secs(5))
        .await
        .expect("the retry");
    // Gives a background release that were still on its way (there must
    // be none: the retry waited for it) the time to do harm.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(direct.validate(&lock).await.expect("validate").held);
    assert!(slow.release(&lock).await.expect("release"));
}

/// What tells the daemon's answers from statuses tonic makes itself: the
/// daemon's refusals (here ABORTED and INVALID_ARGUMENT, on the raw stub)
/// come with metadata (at least the content type), so the client sends no
/// background release after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_answers_carry_metadata() {
    let (h, c) = start().await;
    let held = c.acquire("unanswered/meta", TTL).await.expect("acquire");
    let mut raw = h.client().await;
    let refused = redlockd_testkit::harness::acquire(&mut raw, "unanswered/meta", 5_000, 0)
        .await
        .expect_err("held");
    assert_eq!(refused.code(), tonic::Code::Aborted);
    assert!(!refused.metadata().is_empty(), "{:?}", refused.metadata());
    let invalid = redlockd_testkit::harness::acquire(&mut raw, "", 5_000, 0)
        .await
        .expect_err("empty resource");
    assert_eq!(invalid.code(), tonic::Code::InvalidArgument);
    assert!(!invalid.metadata().is_empty(), "{:?}", invalid.metadata());
    c.release(&held).await.expect("release");
}

/// `close` waits for the background releases under way: once it returns,
/// the resource is free at the first try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_waits_for_background_releases() {
    let (h, direct) = start().await;
    let (_proxy, slow) = slow_client(&h).await;
    let error = slow
        .acquire("unanswered/close", TTL)
        .timeout(Duration::from_millis(100))
        .await
        .expect_err("deadline");
    assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
    tokio::time::timeout(Duration::from_secs(3), slow.close())
        .await
        .expect("close returns within the releases' bound");
    let lock = direct
        .acquire("unanswered/close", TTL)
        .await
        .expect("free at the first try");
    direct.release(&lock).await.expect("release");
}
