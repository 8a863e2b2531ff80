//! The lock's terms against five real masters and two daemons
//! (replicas): `lock_delay` keeps a resource from everyone after a holder
//! that vanished (a unary lock left to expire, a `redlockctl run` killed)
//! while an orderly release frees it at once, on every replica alike;
//! `hold_at_least` turns an early release into an expiry at the minimum
//! and lets a late one delete; an idempotent retry resumes its own lock
//! despite its delay; bad durations are refused naming the field.
//!
//! Timing: every assertion on time is a lower bound (the masters' clock
//! decides, and a starved host only makes things later), and every wait is
//! bounded and polled.

mod common;

use common::ctl::{redlockctl, Scratch};
use common::*;
use redlockd::pb;
use redlockd::pb::hold_event::Event;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};
use tonic::Code;

against_both_servers!(
    vanished_holder_keeps_the_delay_on_every_replica,
    hold_at_least_early_and_late,
);

/// Slack for the masters' wall clock against this process's monotonic one
/// (same host) in the lower bounds.
const SLACK: Duration = Duration::from_millis(25);

fn terms(resource: &str, ttl_ms: u64, lock_delay_ms: u64, at_least_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(ttl_ms),
        owner: "lock-terms".into(),
        lock_delay: ms(lock_delay_ms),
        hold_at_least: ms(at_least_ms),
        ..Default::default()
    }
}

fn waiting(request: pb::AcquireRequest, wait_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        wait: ms(wait_ms),
        ..request
    }
}

async fn two_replicas(flavor: Flavor) -> Harness {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    h
}

/// Until no master keeps the resource's lock key.
async fn keys_gone(h: &Harness, resource: &str, limit: Duration) {
    eventually(limit, "the lock's keys are gone", || async {
        for i in 0..5 {
            if h.lock_value(i, resource).await.is_some() {
                return false;
            }
        }
        true
    })
    .await;
}

/// Both replicas refuse the resource (ABORTED: held) to a caller that does
/// not wait.
async fn both_refuse(h: &Harness, resource: &str, why: &str) {
    for i in 0..2 {
        let mut c = h.client_of(i).await;
        let refused = c
            .acquire(terms(resource, 10_000, 0, 0))
            .await
            .expect_err(why);
        assert_eq!(refused.code(), Code::Aborted, "replica {i}: {refused:?}");
    }
}

/// A unary holder that never releases: its lock expires, and for the delay
/// after that neither replica grants it; a waiter gets it once the delay
/// ended, never before (lower bound from the request that took it).
async fn vanished_holder_keeps_the_delay_on_every_replica(flavor: Flavor) {
    const TTL: u64 = 300;
    const DELAY: u64 = 5_000;
    const RESOURCE: &str = "delay/vanished";
    let h = two_replicas(flavor).await;
    let mut a = h.client_of(0).await;
    let asked = Instant::now();
    a.acquire(terms(RESOURCE, TTL, DELAY, 0))
        .await
        .expect("Acquire with a lock_delay");
    // The holder vanishes: no Release, the lock runs out.
    keys_gone(&h, RESOURCE, Duration::from_secs(10)).await;
    let expired = asked.elapsed();
    both_refuse(&h, RESOURCE, "expired, but within its lock_delay").await;
    let mut b = h.client_of(1).await;
    let granted = b
        .acquire(waiting(terms(RESOURCE, 10_000, 0, 0), 30_000))
        .await
        .expect("granted once the delay ended");
    let waited = asked.elapsed();
    println!("keys gone after {expired:?}; the other replica granted it after {waited:?}");
    assert!(
        waited + SLACK >= Duration::from_millis(TTL + DELAY),
        "granted {waited:?} after the first grant, before ttl + lock_delay"
    );
    let lock = granted.into_inner().lock.expect("lock");
    assert!(release(&mut b, &lock).await.expect("Release"));
}

/// An orderly end frees the resource at once despite a long lock_delay:
/// a unary Release, and a Hold session's `release` message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_release_frees_at_once() {
    let h = two_replicas(Flavor::Valkey).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);

    let lock = a
        .acquire(terms("delay/orderly", 10_000, 60_000, 0))
        .await
        .expect("Acquire")
        .into_inner()
        .lock
        .expect("lock");
    assert!(release(&mut a, &lock).await.expect("Release"));
    let next = b
        .acquire(terms("delay/orderly", 10_000, 0, 0))
        .await
        .expect("free at once after an orderly release, on the other replica");
    release(&mut b, &next.into_inner().lock.expect("lock"))
        .await
        .expect("Release");

    let (requests, mut events) = hold_with(&mut a, terms("delay/session", 10_000, 60_000, 0)).await;
    requests
        .send(release_message())
        .await
        .expect("send release");
    match events.message().await {
        Ok(Some(pb::HoldEvent {
            event: Some(Event::Released(released)),
        })) => assert!(released.was_held),
        other => panic!("expected `released`, got {other:?}"),
    }
    b.acquire(terms("delay/session", 10_000, 0, 0))
        .await
        .expect("free at once after the session's orderly end");
}

/// Hold sessions with a lock_delay whose connection breaks (cut at a
/// proxy, as when the client's host dies): none is released by the
/// daemon; each lock runs out and its delay follows on both replicas. The
/// daemon hears of a broken connection twice (the client's stream errs,
/// the stream of events it sends is dropped) in no fixed order; many
/// sessions cut at once take both orders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_sessions_keep_the_delay() {
    vanished_sessions_keep_the_delay("cut", 64, 1_000, ctl::Proxy::close_existing).await;
}

/// `sessions` Hold sessions with a lock_delay, each on its own connection
/// through a proxy, whose clients then vanish (`vanish` on the proxy):
/// for each, once its keys are gone, both replicas refuse it (the delay).
async fn vanished_sessions_keep_the_delay(
    tag: &str,
    sessions: usize,
    ttl_ms: u64,
    vanish: fn(&ctl::Proxy),
) {
    let h = two_replicas(Flavor::Valkey).await;
    let proxy = ctl::Proxy::start(h.daemons[0].addr).await.expect("proxy");
    let mut open = Vec::new();
    for i in 0..sessions {
        // A connection each, kept open with its session until it vanishes.
        let mut c = redlockd_testkit::client::connect(proxy.addr())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let session = hold_with(&mut c, terms(&format!("{tag}/{i}"), ttl_ms, 60_000, 0)).await;
        open.push((c, session));
    }
    vanish(&proxy);
    for i in 0..sessions {
        let resource = format!("{tag}/{i}");
        keys_gone(&h, &resource, Duration::from_secs(15)).await;
        both_refuse(&h, &resource, &format!("{tag}: within the lock_delay")).await;
    }
    drop(open);
}

/// A half-close is an orderly end, lock_delay or not: the client, still
/// reading, is told `released`, and the other replica grants the resource
/// at once. (The daemon first makes sure the client is still there: a reset
/// stream reads as a clean end too.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_close_frees_despite_a_delay() {
    let h = two_replicas(Flavor::Valkey).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);
    let (requests, mut events) =
        hold_with(&mut a, terms("delay/half-close", 10_000, 60_000, 0)).await;
    drop(requests);
    loop {
        match events.message().await {
            Ok(Some(pb::HoldEvent {
                event: Some(Event::Extended(_)),
            })) => continue,
            Ok(Some(pb::HoldEvent {
                event: Some(Event::Released(released)),
            })) => {
                assert!(released.was_held);
                break;
            }
            other => panic!("expected `released`, got {other:?}"),
        }
    }
    b.acquire(terms("delay/half-close", 10_000, 0, 0))
        .await
        .expect("free at once after the half-close");
}

/// Hold sessions with a lock_delay whose clients freeze (the connection
/// goes silent, as a SIGSTOPped process's does): the daemon's keepalive
/// drops the connection, which reads as a clean end of the client's
/// stream, and each lock is left to expire with the delay after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_sessions_keep_the_delay() {
    vanished_sessions_keep_the_delay("frozen", 8, 500, ctl::Proxy::freeze_existing).await;
}

/// `redlockctl run --lock-delay` killed (SIGKILL) mid-command: its session
/// vanishes without a release, the lock runs out, and the delay follows on
/// both replicas; a waiter gets it afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_runner_keeps_the_delay() {
    const RESOURCE: &str = "jobs/killed";
    let h = two_replicas(Flavor::Valkey).await;
    let scratch = Scratch::new("lock-terms");
    let pid_file = scratch.file("pid");
    let script = format!("echo $$ > {pid_file}; exec sleep 60");
    let mut runner = redlockctl(
        h.daemons[0].addr,
        &[
            "run",
            RESOURCE,
            "--ttl",
            "1s",
            "--lock-delay",
            "5s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .spawn()
    .expect("spawn redlockctl run");
    eventually(Duration::from_secs(20), "the command runs", || async {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.trim().is_empty())
    })
    .await;
    let command_pid = std::fs::read_to_string(&pid_file).expect("pid");
    runner.start_kill().expect("SIGKILL redlockctl");
    let _ = runner.wait().await;
    let killed = Instant::now();
    // The command's own group outlives redlockctl; it is not under test.
    let _ = std::process::Command::new("kill")
        .args(["-9", command_pid.trim()])
        .status();
    keys_gone(&h, RESOURCE, Duration::from_secs(15)).await;
    println!("keys gone {:?} after the kill", killed.elapsed());
    both_refuse(&h, RESOURCE, "its runner vanished: within the lock_delay").await;
    let mut b = h.client_of(1).await;
    b.acquire(waiting(terms(RESOURCE, 10_000, 0, 0), 30_000))
        .await
        .expect("granted once the delay ended");
}

/// An early release leaves the lock until acquisition + hold_at_least
/// (was_held stays true; no replica grants it before); a late one deletes.
async fn hold_at_least_early_and_late(flavor: Flavor) {
    const AT_LEAST: u64 = 2_000;
    let h = two_replicas(flavor).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);

    let asked = Instant::now();
    let lock = a
        .acquire(terms("least/early", 60_000, 0, AT_LEAST))
        .await
        .expect("Acquire")
        .into_inner()
        .lock
        .expect("lock");
    assert!(release(&mut a, &lock).await.expect("Release"), "was_held");
    both_refuse(&h, "least/early", "released before its minimum").await;
    b.acquire(waiting(terms("least/early", 10_000, 0, 0), 30_000))
        .await
        .expect("granted at the minimum, long before the ttl");
    let waited = asked.elapsed();
    println!("early release: granted again after {waited:?} (hold_at_least {AT_LEAST} ms)");
    assert!(
        waited + SLACK >= Duration::from_millis(AT_LEAST),
        "granted {waited:?} after the first, before its hold_at_least"
    );

    let asked = Instant::now();
    let lock = a
        .acquire(terms("least/late", 60_000, 0, 300))
        .await
        .expect("Acquire")
        .into_inner()
        .lock
        .expect("lock");
    // Past the minimum (a precondition, not a timing bet: later is fine).
    tokio::time::sleep_until((asked + Duration::from_millis(400)).into()).await;
    assert!(release(&mut a, &lock).await.expect("Release"), "was_held");
    for i in 0..5 {
        assert_eq!(h.lock_value(i, "least/late").await, None, "master {i}");
    }
    b.acquire(terms("least/late", 10_000, 0, 0))
        .await
        .expect("deleted by a release after the minimum");
}

/// A lock_delay meets an idempotent retry (a `request_id`, so the
/// same derived token): while the earlier grant is held, the retry, through
/// the other replica, resumes it by its Extend path (same token, same
/// fence), which the not-before time of its own grant does not block;
/// another request id is refused as usual, and an orderly release still
/// frees the resource at once. Once a grant has expired (its holder
/// vanished), its own request id is refused for the delay like anyone
/// else: an expired lock is gone, and a retry would be a new holder while
/// the old one's requests may still be in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_retry_meets_its_own_delay() {
    const HELD: &str = "delay/idem-held";
    const EXPIRED: &str = "delay/idem-expired";
    const FIRST: &str = "Lt7-q_2wKm9Pn4Rt8Vx3Ya";
    const OTHER: &str = "Qa5-w_3eRt6Yu8Io1Pz4Xc";
    let with_id = |resource: &str, id: &str, ttl_ms: u64| pb::AcquireRequest {
        request_id: id.into(),
        ..terms(resource, ttl_ms, 60_000, 0)
    };
    let h = two_replicas(Flavor::Valkey).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);

    let first = a
        .acquire(with_id(HELD, FIRST, 10_000))
        .await
        .expect("Acquire with a request_id and a lock_delay")
        .into_inner()
        .lock
        .expect("lock");
    let retried = b
        .acquire(with_id(HELD, FIRST, 10_000))
        .await
        .expect("the retry resumes its own lock despite its lock_delay")
        .into_inner()
        .lock
        .expect("lock");
    assert_eq!(retried.token, first.token, "same derived token");
    assert_eq!(retried.fence, first.fence, "the same grant, not a new one");
    let refused = b
        .acquire(with_id(HELD, OTHER, 10_000))
        .await
        .expect_err("another request id while it is held");
    assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
    assert!(release(&mut b, &retried).await.expect("Release"));
    let next = a
        .acquire(terms(HELD, 10_000, 0, 0))
        .await
        .expect("free at once after the orderly release")
        .into_inner()
        .lock
        .expect("lock");
    assert!(release(&mut a, &next).await.expect("Release"));

    a.acquire(with_id(EXPIRED, FIRST, 300))
        .await
        .expect("Acquire with a request_id and a lock_delay");
    keys_gone(&h, EXPIRED, Duration::from_secs(10)).await;
    for (i, c) in [&mut a, &mut b].into_iter().enumerate() {
        let refused = c
            .acquire(with_id(EXPIRED, FIRST, 10_000))
            .await
            .expect_err("expired within its lock_delay, even for its own request id");
        assert_eq!(refused.code(), Code::Aborted, "replica {i}: {refused:?}");
    }
}

/// Negative or oversized durations are INVALID_ARGUMENT naming the field,
/// for Acquire and for Hold's first message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_terms_are_named() {
    let h = Harness::start(Flavor::Valkey).await;
    let mut c = h.client().await;
    let negative = Some(prost_types::Duration {
        seconds: -1,
        nanos: 0,
    });
    let over = ms(2 * 60 * 60 * 1000);
    let cases = [
        (
            "lock_delay",
            pb::AcquireRequest {
                lock_delay: negative,
                ..terms("bad/terms", 1_000, 0, 0)
            },
        ),
        (
            "lock_delay",
            pb::AcquireRequest {
                lock_delay: ms(61_000),
                ..terms("bad/terms", 1_000, 0, 0)
            },
        ),
        (
            "hold_at_least",
            pb::AcquireRequest {
                hold_at_least: negative,
                ..terms("bad/terms", 1_000, 0, 0)
            },
        ),
        (
            "hold_at_least",
            pb::AcquireRequest {
                hold_at_least: over,
                ..terms("bad/terms", 1_000, 0, 0)
            },
        ),
    ];
    for (field, request) in cases {
        let refused = c.acquire(request.clone()).await.expect_err("refused");
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains(field), "{refused:?}");
        let (_requests, mut events) = open_hold(&mut c, request).await;
        let refused = match events.message().await {
            Err(status) => status,
            other => panic!("Hold with a bad {field}: expected an error, got {other:?}"),
        };
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains(field), "{refused:?}");
    }
}

/// A Hold session opened with `first`, its `acquired` event read.
async fn hold_with(
    client: &mut LockClient,
    first: pb::AcquireRequest,
) -> (tokio::sync::mpsc::Sender<pb::HoldRequest>, EventStream) {
    let (requests, mut events) = open_hold(client, first).await;
    match events.message().await {
        Ok(Some(pb::HoldEvent {
            event: Some(Event::Acquired(_)),
        })) => (requests, events),
        other => panic!("expected `acquired`, got {other:?}"),
    }
}

/// A Hold session opened with `first`; an error of the call itself comes
/// back as the stream's first item.
async fn open_hold(
    client: &mut LockClient,
    first: pb::AcquireRequest,
) -> (tokio::sync::mpsc::Sender<pb::HoldRequest>, EventStream) {
    let (requests, outgoing) = tokio::sync::mpsc::channel(4);
    requests
        .send(pb::HoldRequest {
            request: Some(pb::hold_request::Request::Acquire(first)),
        })
        .await
        .expect("queue the first message");
    let events = match client
        .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
    {
        Ok(stream) => EventStream::Open(Box::new(stream.into_inner())),
        Err(status) => EventStream::Failed(Some(status)),
    };
    (requests, events)
}

/// A Hold's events, or the error its call ended with.
enum EventStream {
    Open(Box<tonic::Streaming<pb::HoldEvent>>),
    Failed(Option<tonic::Status>),
}

impl EventStream {
    async fn message(&mut self) -> Result<Option<pb::HoldEvent>, tonic::Status> {
        match self {
            EventStream::Open(stream) => stream.message().await,
            EventStream::Failed(status) => Err(status
                .take()
                .unwrap_or_else(|| tonic::Status::internal("the call's error was read already"))),
        }
    }
}
