//! Many sessions at once: 100 `Hold` sessions with a 1 s ttl stay held for
//! 5 s. In a test binary of its own so that its load does not disturb the
//! latency-sensitive session tests.

mod common;

use common::*;
use redlockd::config::Config;
use redlockd::pb;
use redlockd::pb::hold_event::Event;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};

against_both_servers!(hundred_sessions_stay_held);

fn one_second_sessions(config: &mut Config) {
    config.limits.max_sessions = 1_000;
}

/// 100 sessions with a 1 s ttl stay held for 5 s: each sees `extended`
/// events, keeps its fence, and validates as held throughout.
async fn hundred_sessions_stay_held(flavor: Flavor) {
    let h = Harness::start_with(flavor, one_second_sessions).await;
    let c = h.client().await;
    let mut sessions = Vec::new();
    for i in 0..100 {
        let mut client = c.clone();
        sessions.push(tokio::spawn(async move {
            // A burst of 100 acquisitions: let a transient UNAVAILABLE be retried.
            let (requests, mut events, lock) =
                hold(&mut client, &format!("s{i}"), 1_000, 5_000).await;
            let until = Instant::now() + Duration::from_secs(5);
            let mut extensions = 0;
            while Instant::now() < until {
                match tokio::time::timeout(Duration::from_secs(1), events.message()).await {
                    Ok(Ok(Some(pb::HoldEvent {
                        event: Some(Event::Extended(extended)),
                    }))) => {
                        assert_eq!(extended.fence, lock.fence, "fence unchanged");
                        assert_eq!(extended.token, lock.token);
                        extensions += 1;
                    }
                    Ok(other) => panic!("session {i}: unexpected {other:?}"),
                    Err(_) => panic!("session {i}: no extension within a whole ttl"),
                }
            }
            assert!(validate(&mut client, &lock).await.expect("validate").held);
            requests.send(release_message()).await.expect("release");
            // An extension already under way may still report first.
            loop {
                match events.message().await {
                    Ok(Some(pb::HoldEvent {
                        event: Some(Event::Extended(_)),
                    })) => continue,
                    Ok(Some(pb::HoldEvent {
                        event: Some(Event::Released(released)),
                    })) => {
                        assert!(released.was_held, "session {i}: released, held to the end");
                        break;
                    }
                    other => panic!("session {i}: after release: {other:?}"),
                }
            }
            extensions
        }));
    }
    let mut fewest = usize::MAX;
    for session in sessions {
        fewest = fewest.min(session.await.expect("session task"));
    }
    println!("{flavor}: every session saw at least {fewest} extensions in 5 s");
    assert!(fewest >= 5, "{fewest}");
}
