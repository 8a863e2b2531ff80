//! `AcquireRequest.request_id`: a retried Acquire answers the
//! lock its request id already holds; a caller that never saw its answer
//! releases with the token derived from the request id.

use super::*;
use crate::redlock::RequestId;

const REQUEST_ID: &str = "q1Y2x9Vb0Ff3kL8mN4pR7s";

fn with_id(request_id: &str, wait: Duration) -> pb::AcquireRequest {
    pb::AcquireRequest {
        request_id: request_id.into(),
        ..acquire(RESOURCE, TTL, wait)
    }
}

fn derived(request_id: &str) -> String {
    let id = RequestId::parse(request_id).expect("well formed");
    Token::derive(&id, RESOURCE).expose().to_owned()
}

/// A retry with the same request id, some time later, answers the same
/// lock: the same token (the derived one) and fence, a fresh validity.
#[tokio::test(start_paused = true)]
async fn a_retry_answers_the_same_lock() {
    let d = daemon();
    let first = lock_of(
        d.api
            .acquire(Request::new(with_id(REQUEST_ID, Duration::ZERO)))
            .await,
    );
    assert_eq!(first.token, derived(REQUEST_ID));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = lock_of(
        d.api
            .acquire(Request::new(with_id(REQUEST_ID, Duration::ZERO)))
            .await,
    );
    assert_eq!(again.token, first.token);
    assert_eq!(again.fence, first.fence);
    assert_eq!(again.validity, first.validity, "counted afresh");
    assert_eq!(d.held_by(&first.token), 5);
}

/// Another request id finds the resource held: ABORTED, the holder untouched.
#[tokio::test(start_paused = true)]
async fn another_request_id_is_aborted() {
    let d = daemon();
    let first = lock_of(
        d.api
            .acquire(Request::new(with_id(REQUEST_ID, Duration::ZERO)))
            .await,
    );
    let other = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    refused(
        d.api
            .acquire(Request::new(with_id(other, Duration::ZERO)))
            .await,
        Code::Aborted,
    );
    // And without a request id too.
    refused(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
        Code::Aborted,
    );
    assert_eq!(d.held_by(&first.token), 5);
}

/// A request id of the wrong shape: INVALID_ARGUMENT naming `request_id`,
/// before any master is asked, in Acquire and in Hold's first message.
#[tokio::test(start_paused = true)]
async fn a_malformed_request_id_is_invalid() {
    let d = daemon();
    for bad in [
        "short",
        "has a space in it, 22+ chars",
        &"x".repeat(65),
        "padded+base64/chars=AAAA",
    ] {
        let message = refused(
            d.api
                .acquire(Request::new(with_id(bad, Duration::ZERO)))
                .await,
            Code::InvalidArgument,
        );
        assert!(message.starts_with("request_id: "), "{message}");
        assert!(!message.contains(bad), "the value is not echoed: {message}");
    }
    let (client, request) = HoldClient::new();
    client
        .send(HoldRequest::Acquire(with_id("short", Duration::ZERO)))
        .await;
    let message = refused(d.api.hold(request).await, Code::InvalidArgument);
    assert!(message.starts_with("request_id: "), "{message}");
    assert_eq!(d.commands(), 0, "no master was asked");
}

/// Masters 40 ms away: an Acquire with a request id takes an Extend round
/// (nothing to resume), then the acquire and commit rounds, 120 ms in all.
/// With a 100 ms deadline and a 20 ms reserve, the cut-off (80 ms) passes
/// during the commit: DEADLINE_EXCEEDED, and the grant completes after it.
fn late_request(d: &Daemon) -> Request<pb::AcquireRequest> {
    d.set(&[0, 1, 2, 3, 4], Behaviour::Slow(MS(40)));
    let mut request = Request::new(with_id(REQUEST_ID, Duration::ZERO));
    request.set_timeout(MS(100));
    request
}

/// After DEADLINE_EXCEEDED, a grant that completed after the cut-off is
/// released with a request id too (the contract: nothing is left locked
/// after DEADLINE_EXCEEDED), and the resource is free for anyone.
#[tokio::test(start_paused = true)]
async fn a_late_grant_is_released_with_a_request_id_too() {
    let d = daemon_with(|c| c.server.deadline_reserve = MS(20));
    refused(
        d.api.acquire(late_request(&d)).await,
        Code::DeadlineExceeded,
    );
    tokio::time::sleep(MS(300)).await;
    let holders: Vec<_> = d.fakes.iter().filter_map(|f| f.holder(&d.keys)).collect();
    assert!(holders.is_empty(), "left locked: {holders:?}");
    // The caller's own release with the derived token finds nothing.
    let released = d
        .api
        .release(Request::new(pb::ReleaseRequest {
            resource: RESOURCE.into(),
            token: derived(REQUEST_ID),
        }))
        .await
        .expect("OK")
        .into_inner();
    assert!(!released.was_held);
    d.set(&[0, 1, 2, 3, 4], Behaviour::Up);
    lock_of(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
    );
}

/// A retry with the same request id sent the moment DEADLINE_EXCEEDED
/// arrives, while the first call's grant is still completing (and will be
/// released): it waits for that release (its turn), then acquires anew,
/// and its lock stays held. Without the turn, its resuming Extend found
/// the late grant's keys and answered that lock (or failed), and the late
/// grant's release then deleted the lock it had answered.
#[tokio::test(start_paused = true)]
async fn a_retry_right_after_deadline_exceeded_keeps_its_lock() {
    let d = daemon_with(|c| c.server.deadline_reserve = MS(20));
    refused(
        d.api.acquire(late_request(&d)).await,
        Code::DeadlineExceeded,
    );
    let retry = lock_of(
        d.api
            .acquire(Request::new(with_id(REQUEST_ID, Duration::ZERO)))
            .await,
    );
    assert_eq!(retry.token, derived(REQUEST_ID));
    tokio::time::sleep(MS(500)).await;
    assert_eq!(d.held_by(&retry.token), 5, "the retry's lock was deleted");
    let validated = d
        .api
        .validate(Request::new(pb::ValidateRequest {
            resource: RESOURCE.into(),
            token: retry.token.clone(),
        }))
        .await
        .expect("OK")
        .into_inner();
    assert!(validated.held);
}

/// Hold's first message carries the request id too: the session's lock
/// has the derived token.
#[tokio::test(start_paused = true)]
async fn hold_uses_the_request_id() {
    let d = daemon();
    let (client, request) = HoldClient::new();
    client
        .send(HoldRequest::Acquire(with_id(REQUEST_ID, Duration::ZERO)))
        .await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    let Ok(Event::Acquired(lock)) = next_event(&mut events).await else {
        panic!("the first event is `acquired`");
    };
    assert_eq!(lock.token, derived(REQUEST_ID));
}

/// A retry while three masters are down cannot tell whether its lock is
/// held: UNAVAILABLE, and the lock is left alone (no attempt ran, whose
/// clean-up would have released the token on the live masters); once the
/// masters are back, the retry answers the lock.
#[tokio::test(start_paused = true)]
async fn a_retry_that_cannot_tell_leaves_the_lock_alone() {
    let d = daemon();
    let first = lock_of(
        d.api
            .acquire(Request::new(with_id(REQUEST_ID, Duration::ZERO)))
            .await,
    );
    d.set(&[0, 1, 2], Behaviour::Down);
    refused(
        d.api
            .acquire(Request::new(with_id(REQUEST_ID, Duration::ZERO)))
            .await,
        Code::Unavailable,
    );
    assert_eq!(d.held_by(&first.token), 5);
    d.set(&[0, 1, 2], Behaviour::Up);
    let again = lock_of(
        d.api
            .acquire(Request::new(with_id(REQUEST_ID, Duration::ZERO)))
            .await,
    );
    assert_eq!((again.token, again.fence), (first.token, first.fence));
}

/// A waiting retry that cannot tell at first keeps asking while its wait
/// lasts: the masters come back 300 ms in, and it answers the same lock.
#[tokio::test(start_paused = true)]
async fn a_waiting_retry_asks_again_until_it_can_tell() {
    let d = daemon();
    let first = lock_of(
        d.api
            .acquire(Request::new(with_id(REQUEST_ID, Duration::ZERO)))
            .await,
    );
    d.set(&[0, 1, 2], Behaviour::Down);
    let retry = d
        .api
        .acquire(Request::new(with_id(REQUEST_ID, Duration::from_secs(2))));
    let heal = async {
        tokio::time::sleep(MS(300)).await;
        d.set(&[0, 1, 2], Behaviour::Up);
    };
    let (again, ()) = tokio::join!(retry, heal);
    let again = lock_of(again);
    assert_eq!((again.token, again.fence), (first.token, first.fence));
}
