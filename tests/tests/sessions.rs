//! `Hold` sessions against five real masters: held while the stream lives,
//! released the moment the client ends it or vanishes, `lost` when the
//! masters can no longer keep it.

mod common;

use common::*;
use redlockd::config::Config;
use redlockd::pb;
use redlockd::pb::hold_event::Event;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};
use tonic::Code;

against_both_servers!(
    release_message_and_half_close_release,
    vanished_client_frees_the_lock,
    cancelled_stream_frees_the_lock,
    three_masters_down_means_lost,
    first_message_must_be_acquire,
    session_limit,
    a_silent_hold_is_bounded_and_takes_no_slot,
);

async fn next_event(events: &mut tonic::Streaming<pb::HoldEvent>) -> Option<Event> {
    tokio::time::timeout(Duration::from_secs(10), events.message())
        .await
        .expect("an event within 10 s")
        .expect("stream ok")
        .and_then(|e| e.event)
}

/// A `release` message, or the client half-closing, releases the lock and
/// answers `released` with was_held = true, then the stream ends.
async fn release_message_and_half_close_release(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let (requests, mut events, lock) = hold(&mut c, "session", 10_000, 0).await;
    assert!(lock.fence > 0);
    requests
        .send(release_message())
        .await
        .expect("send release");
    assert_eq!(
        next_event(&mut events).await,
        Some(Event::Released(pb::hold_event::Released { was_held: true }))
    );
    assert_eq!(next_event(&mut events).await, None, "the stream ends");
    assert!(h.keys("redlock:lock:session").await.is_empty());

    let (requests, mut events, _) = hold(&mut c, "session", 10_000, 0).await;
    drop(requests); // half-close
    assert_eq!(
        next_event(&mut events).await,
        Some(Event::Released(pb::hold_event::Released { was_held: true }))
    );
    assert!(h.keys("redlock:lock:session").await.is_empty());
}

/// A client whose connection disappears: its lock is free again within 1 s,
/// long before its 60 s ttl.
async fn vanished_client_frees_the_lock(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let url = format!("http://{}", h.daemons[0].addr);
    let mut doomed = LockServiceClient::connect(url).await.expect("connect");
    let (requests, events, _) = hold(&mut doomed, "orphaned", 60_000, 0).await;
    let vanished = Instant::now();
    drop((requests, events, doomed)); // closes the only connection of this client
    let mut other = h.client().await;
    let lock = acquire(&mut other, "orphaned", 1_000, 1_000)
        .await
        .expect("free within 1 s");
    println!(
        "{flavor}: lock free {:?} after the client vanished",
        vanished.elapsed()
    );
    assert!(lock.fence > 0);
}

/// A client that cancels its session's stream (a `RST_STREAM` on a
/// connection it keeps using) ended it itself: its lock is free again at
/// once, not left to its 60 s ttl as a silent client's would be
/// (`liveness.rs`).
async fn cancelled_stream_frees_the_lock(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let (requests, events, _) = hold(&mut c, "cancelled", 60_000, 0).await;
    let cancelled = Instant::now();
    drop((requests, events)); // resets the stream; `c` stays connected
    let lock = acquire(&mut c, "cancelled", 1_000, 2_000)
        .await
        .expect("free within 2 s, on the same connection");
    println!(
        "{flavor}: lock free {:?} after the stream was cancelled",
        cancelled.elapsed()
    );
    assert!(lock.fence > 0);
}

/// Three masters stopped mid-session: the client is told `lost`.
async fn three_masters_down_means_lost(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let (_requests, mut events, _) = hold(&mut c, "fragile", 1_000, 0).await;
    for i in 2..5 {
        h.masters.stop(i).expect("stop");
    }
    loop {
        match next_event(&mut events).await {
            Some(Event::Extended(_)) => continue,
            Some(Event::Lost(lost)) => {
                assert!(!lost.reason.is_empty());
                break;
            }
            other => panic!("expected `lost`, got {other:?}"),
        }
    }
    assert_eq!(
        next_event(&mut events).await,
        None,
        "the stream ends after `lost`"
    );
}

/// A Hold that does not start with `acquire` is INVALID_ARGUMENT.
async fn first_message_must_be_acquire(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let status = c
        .hold(tokio_stream::iter(vec![release_message()]))
        .await
        .expect_err("release first");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
}

fn single_session(config: &mut Config) {
    config.limits.max_sessions = 1;
}

/// Past `limits.max_sessions`: RESOURCE_EXHAUSTED; a slot frees when a
/// session ends.
async fn session_limit(flavor: Flavor) {
    let h = Harness::start_with(flavor, single_session).await;
    let mut c = h.client().await;
    let (requests, mut events, _) = hold(&mut c, "one", 10_000, 0).await;
    // The slot is taken once the first message has come.
    let (tx, outgoing) = tokio::sync::mpsc::channel::<pb::HoldRequest>(1);
    tx.send(pb::HoldRequest {
        request: Some(pb::hold_request::Request::Acquire(pb::AcquireRequest {
            resource: "two".into(),
            ttl: ms(1_000),
            wait: None,
            owner: String::new(),
            request_id: String::new(),
            ..Default::default()
        })),
    })
    .await
    .expect("queue the first message");
    let status = c
        .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect_err("second session");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("max_sessions"));
    requests.send(release_message()).await.expect("release");
    assert!(matches!(
        next_event(&mut events).await,
        Some(Event::Released(_))
    ));
    assert_eq!(next_event(&mut events).await, None);
    eventually(Duration::from_secs(5), "the slot is free again", || {
        let mut c = c.clone();
        async move { hold_opens(&mut c).await }
    })
    .await;
}

async fn hold_opens(c: &mut common::LockClient) -> bool {
    let (requests, outgoing) = tokio::sync::mpsc::channel(1);
    let _ = requests
        .send(pb::HoldRequest {
            request: Some(pb::hold_request::Request::Acquire(pb::AcquireRequest {
                resource: "two".into(),
                ttl: ms(1_000),
                wait: None,
                owner: String::new(),
                request_id: String::new(),
                ..Default::default()
            })),
        })
        .await;
    c.hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .is_ok()
}

/// One session at most, and a first message due within 1 s.
fn single_session_quick_first_message(config: &mut Config) {
    single_session(config);
    config.session.first_message_timeout = Duration::from_secs(1);
}

/// A `Hold` stream that never sends its first message (a client stuck
/// before its first write, or a hostile one) ends with INVALID_ARGUMENT
/// once `session.first_message_timeout` has passed, and never held a
/// session slot: with `limits.max_sessions` = 1, a real session opens and
/// is granted beside it.
async fn a_silent_hold_is_bounded_and_takes_no_slot(flavor: Flavor) {
    let h = Harness::start_with(flavor, single_session_quick_first_message).await;
    let mut c = h.client().await;
    let (silent_tx, silent_rx) = tokio::sync::mpsc::channel::<pb::HoldRequest>(1);
    let mut silent_client = c.clone();
    let opened = Instant::now();
    let silent = tokio::spawn(async move {
        let ended = match silent_client
            .hold(tokio_stream::wrappers::ReceiverStream::new(silent_rx))
            .await
        {
            Ok(response) => response.into_inner().message().await.map(|_| ()),
            Err(status) => Err(status),
        };
        (ended, opened.elapsed())
    });
    // Give the silent stream time to reach the daemon first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (requests, mut events, _) = hold(&mut c, "beside", 10_000, 0).await;
    let (ended, after) = tokio::time::timeout(Duration::from_secs(10), silent)
        .await
        .expect("the silent stream ends within 10 s")
        .expect("no panic");
    let status = ended.expect_err("ended with an error");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(after >= Duration::from_secs(1), "ended after {after:?}");
    println!("{flavor}: a silent Hold ended after {after:?} (first_message_timeout 1 s)");
    drop(silent_tx);
    requests.send(release_message()).await.expect("release");
    assert!(matches!(
        next_event(&mut events).await,
        Some(Event::Released(_))
    ));
}
