//! The draining stop and the first-message bound at the handler tier, under
//! paused time: the phase is moved on by hand (`DrainControl`), as
//! `server::run_draining` moves it on SIGTERM and when the grace runs out.

use super::*;
use crate::pb::hold_event::{Draining, Released};

/// A session open when draining starts is told `draining` (with the time
/// left), keeps its lock extended well past its ttl, and is released when
/// its client says so; meanwhile new Acquire and Hold calls are refused
/// UNAVAILABLE, and Extend, Release and Validate still work.
#[tokio::test(start_paused = true)]
async fn draining_keeps_a_session_until_its_client_releases() {
    let d = daemon();
    let (client, request) = HoldClient::new();
    client.acquire(MS(300), Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    let Ok(Event::Acquired(lock)) = next_event(&mut events).await else {
        panic!("the first event is `acquired`");
    };
    d.control.start(Duration::from_secs(20));
    let draining = loop {
        match next_event(&mut events).await {
            Ok(Event::Extended(_)) => continue,
            other => break other,
        }
    };
    assert_eq!(
        draining.ok(),
        Some(Event::Draining(Draining {
            release_in: proto(Duration::from_secs(20))
        }))
    );
    let message = refused(
        d.api
            .acquire(Request::new(acquire("other", TTL, Duration::ZERO)))
            .await,
        Code::Unavailable,
    );
    assert!(message.starts_with("draining: "), "{message}");
    let (second, request) = HoldClient::new();
    second.acquire(TTL, Duration::ZERO).await;
    refused(d.api.hold(request).await, Code::Unavailable);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        d.held_by(&lock.token),
        5,
        "still extended, 5 s past a 300 ms ttl"
    );
    let validated = d
        .api
        .validate(Request::new(pb::ValidateRequest {
            resource: RESOURCE.into(),
            token: lock.token.clone(),
        }))
        .await
        .expect("Validate works while draining");
    assert!(validated.into_inner().held);
    client.release().await;
    let released = loop {
        match next_event(&mut events).await {
            Ok(Event::Extended(_)) => continue,
            other => break other,
        }
    };
    assert_eq!(
        released.ok(),
        Some(Event::Released(Released { was_held: true }))
    );
    assert_eq!(d.held_by(&lock.token), 0);
}

/// When the grace is over (the phase moves to stopping) a session still
/// open is told `lost`, and its lock is left on the masters to expire: its
/// client was told a validity that may outlast the grace.
#[tokio::test(start_paused = true)]
async fn the_end_of_the_grace_leaves_what_is_left_to_expire() {
    let d = daemon();
    let (client, request) = HoldClient::new();
    client.acquire(TTL, Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    let Ok(Event::Acquired(lock)) = next_event(&mut events).await else {
        panic!("the first event is `acquired`");
    };
    d.control.start(Duration::from_secs(1));
    assert!(matches!(
        next_event(&mut events).await,
        Ok(Event::Draining(_))
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(d.held_by(&lock.token), 5, "kept while draining");
    d.control.stop();
    let lost = loop {
        match next_event(&mut events).await {
            Ok(Event::Extended(_)) => continue,
            other => break other,
        }
    };
    assert!(
        matches!(&lost, Ok(Event::Lost(lost)) if lost.reason == crate::service::hold::DRAIN_OVER),
        "{lost:?}"
    );
    assert_eq!(d.held_by(&lock.token), 5, "not deleted: left to expire");
}

/// An Acquire waiting for a held resource is answered UNAVAILABLE when the
/// drain starts, and leaves nothing locked.
#[tokio::test(start_paused = true)]
async fn a_waiting_acquire_is_answered_unavailable() {
    let d = Arc::new(daemon());
    let other = d.held_elsewhere(&[0, 1, 2], TTL);
    let waiting = tokio::spawn({
        let d = Arc::clone(&d);
        async move {
            d.api
                .acquire(Request::new(acquire(
                    RESOURCE,
                    TTL,
                    Duration::from_secs(30),
                )))
                .await
        }
    });
    tokio::time::sleep(MS(100)).await;
    assert!(!waiting.is_finished(), "still waiting");
    d.control.start(Duration::from_secs(20));
    let message = refused(waiting.await.expect("no panic"), Code::Unavailable);
    assert!(message.starts_with("draining: "), "{message}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(d.held_by(other.expose()), 3, "the holder is untouched");
    let granted = d
        .fakes
        .iter()
        .flat_map(|f| f.calls())
        .filter(|call| call.op == Op::Acquire && call.hit)
        .count();
    let deleted = d
        .fakes
        .iter()
        .flat_map(|f| f.calls())
        .filter(|call| call.op == Op::Release && call.hit)
        .count();
    assert_eq!(granted, deleted, "every key the waiter set was deleted");
}

/// A Hold that sends nothing holds no session slot (another identity's
/// Hold is served under `max_sessions = 1`), and after
/// `session.first_message_timeout` it ends with INVALID_ARGUMENT and gives
/// back its connection's call slot.
#[tokio::test(start_paused = true)]
async fn a_silent_hold_ends_and_frees_its_slots() {
    let d = Arc::new(daemon_with(|c| {
        c.limits.max_sessions = 1;
        c.limits.max_calls_per_connection = 1;
        c.session.first_message_timeout = Duration::from_secs(2);
    }));
    let silent_peer: SocketAddr = "192.0.2.1:40000".parse().expect("address");
    let started = Instant::now();
    // Two silent streams: the connection's call slots (twice the limit, see
    // `ConnectionCalls::enter`) are full.
    let (silent_clients, silent): (Vec<_>, Vec<_>) = (0..2)
        .map(|_| {
            let (silent_client, request) = HoldClient::new();
            let d = Arc::clone(&d);
            let silent = tokio::spawn(async move {
                let request = from_peer(request.into_inner(), silent_peer);
                d.api.hold(request).await.map(|_| ())
            });
            (silent_client, silent)
        })
        .unzip();
    tokio::time::sleep(MS(10)).await;
    let (client, request) = HoldClient::new();
    client.acquire(TTL, Duration::ZERO).await;
    let peer: SocketAddr = "192.0.2.2:40000".parse().expect("address");
    let mut events = d
        .api
        .hold(from_peer(request.into_inner(), peer))
        .await
        .expect("the silent stream holds no session slot")
        .into_inner();
    assert!(matches!(
        next_event(&mut events).await,
        Ok(Event::Acquired(_))
    ));
    let validate = pb::ValidateRequest {
        resource: RESOURCE.into(),
        token: Token::generate().expect("OS RNG").expose().into(),
    };
    refused(
        d.api
            .validate(from_peer(validate.clone(), silent_peer))
            .await,
        Code::ResourceExhausted,
    );
    for silent in silent {
        let message = refused(silent.await.expect("no panic"), Code::InvalidArgument);
        assert_eq!(
            message,
            "request: no `acquire` within session.first_message_timeout = 2s"
        );
    }
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    d.api
        .validate(from_peer(validate, silent_peer))
        .await
        .expect("the call slots are free again");
    drop(silent_clients);
}
