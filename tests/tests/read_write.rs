//! Read-write locks (`AcquireRequest.mode`) against five real
//! masters and two daemons (replicas), on Valkey and on Redis: readers and
//! writers checked against a shared record (no exclusive window beside any
//! other, shared windows that do overlap), writer preference against a
//! stream of readers, Extend/Release/Validate of shared grants, and fences
//! ordered among conflicting grants.
//!
//! Every wait is bounded; no assertion is on time.

mod common;

use common::ctl::{assert_exit, output_within, redlockctl};
use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

against_both_servers!(
    readers_share_writers_exclude,
    a_waiting_writer_stops_new_readers,
    shared_grants_extend_release_validate,
    redlockctl_run_shared,
    a_released_reader_wakes_a_waiting_writer,
    semaphores_and_readers_exclude_each_other,
);

const READERS: usize = 8;
const WRITERS: usize = 4;
const ROUNDS: usize = 4;

fn request(resource: &str, mode: pb::LockMode, ttl_ms: u64, wait_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(ttl_ms),
        wait: ms(wait_ms),
        owner: "read-write".into(),
        mode: mode as i32,
        ..Default::default()
    }
}

async fn take(
    client: &mut LockClient,
    resource: &str,
    mode: pb::LockMode,
    wait_ms: u64,
) -> Result<pb::Lock, tonic::Status> {
    let response = client
        .acquire(request(resource, mode, 10_000, wait_ms))
        .await?;
    Ok(response
        .into_inner()
        .lock
        .expect("a grant carries the lock"))
}

/// Releases `lock` in the contention test: a release that fails for want
/// of answers (a starved shared CI host, `node_timeout` 50 ms) leaves the
/// grant to expire with its ttl, which only delays the others; the record
/// was already updated, so nothing is taken for a violation.
async fn let_go(client: &mut LockClient, lock: &pb::Lock) {
    match release(client, lock).await {
        Ok(was_held) => assert!(was_held, "released a grant it held"),
        Err(status) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
    }
}

/// A grant of `resource` in `mode`, waiting up to 60 s, asked again while
/// too few masters answer in time (a starved host).
async fn until_granted(client: &mut LockClient, resource: &str, mode: pb::LockMode) -> pb::Lock {
    for _ in 0..10 {
        match take(client, resource, mode, 60_000).await {
            Ok(lock) => return lock,
            Err(status) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
        }
    }
    panic!("{resource}: no grant in 10 tries");
}

/// What every contender checks and updates: how many shared holders and
/// which exclusive one hold now (as the contenders saw their grants), and
/// the fences.
#[derive(Default)]
struct Record {
    readers: AtomicUsize,
    writer: AtomicUsize,
    /// The largest fence of any grant so far (a writer's must exceed it).
    max_fence: AtomicU64,
    /// The latest writer's fence (a reader's must exceed it).
    writer_fence: AtomicU64,
}

/// Phase 1: all readers hold at once (a mutex would never get them all
/// there: each waits for the others, and the wait runs out). Phase 2:
/// readers and writers contend; no writer's window overlaps any other
/// window, and fences order every conflicting pair.
async fn readers_share_writers_exclude(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let record = Arc::new(Record::default());
    let all_in = Arc::new(tokio::sync::Barrier::new(READERS));
    let writers_go = Arc::new(tokio::sync::Barrier::new(READERS + WRITERS));
    let mut tasks = Vec::new();
    for id in 1..=READERS {
        let mut client = h.client_of(id % 2).await;
        let (record, all_in, go) = (record.clone(), all_in.clone(), writers_go.clone());
        tasks.push(tokio::spawn(async move {
            let first = take(&mut client, "rw", pb::LockMode::Shared, 30_000)
                .await
                .expect("no writer yet: every reader is granted");
            assert!(first.token.starts_with('s'), "a shared token is marked");
            record.readers.fetch_add(1, Ordering::SeqCst);
            record.max_fence.fetch_max(first.fence, Ordering::SeqCst);
            all_in.wait().await;
            // Everyone holds a shared grant at this point.
            assert_eq!(record.readers.load(Ordering::SeqCst), READERS);
            go.wait().await;
            record.readers.fetch_sub(1, Ordering::SeqCst);
            let_go(&mut client, &first).await;
            for _ in 0..ROUNDS {
                let lock = take(&mut client, "rw", pb::LockMode::Shared, 60_000)
                    .await
                    .expect("reader granted within the wait");
                record.readers.fetch_add(1, Ordering::SeqCst);
                let writer = record.writer.load(Ordering::SeqCst);
                assert_eq!(writer, 0, "reader {id} granted while writer {writer} holds");
                let last_writer = record.writer_fence.load(Ordering::SeqCst);
                assert!(
                    lock.fence > last_writer,
                    "reader fence {} after writer's {last_writer}",
                    lock.fence
                );
                record.max_fence.fetch_max(lock.fence, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                record.readers.fetch_sub(1, Ordering::SeqCst);
                let_go(&mut client, &lock).await;
            }
        }));
    }
    for id in 1..=WRITERS {
        let mut client = h.client_of(id % 2).await;
        let (record, go) = (record.clone(), writers_go.clone());
        tasks.push(tokio::spawn(async move {
            go.wait().await;
            for _ in 0..ROUNDS {
                let lock = take(&mut client, "rw", pb::LockMode::Exclusive, 60_000)
                    .await
                    .expect("writer granted within the wait");
                let previous = record.writer.swap(id, Ordering::SeqCst);
                assert_eq!(
                    previous, 0,
                    "writer {id} granted while writer {previous} holds"
                );
                let readers = record.readers.load(Ordering::SeqCst);
                assert_eq!(readers, 0, "writer {id} granted beside {readers} readers");
                let before = record.max_fence.fetch_max(lock.fence, Ordering::SeqCst);
                assert!(
                    lock.fence > before,
                    "writer fence {} after {before}",
                    lock.fence
                );
                record.writer_fence.store(lock.fence, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                assert_eq!(record.readers.load(Ordering::SeqCst), 0);
                assert_eq!(record.writer.swap(0, Ordering::SeqCst), id);
                let_go(&mut client, &lock).await;
            }
        }));
    }
    let results = tokio::time::timeout(Duration::from_secs(180), futures::future::join_all(tasks))
        .await
        .expect("all contenders finish in bounded time");
    for result in results {
        result.expect("contender task");
    }
}

/// Readers hold hand over hand (each takes its next shared grant before it
/// releases the current one), so without writer preference the resource
/// is never free of readers and a writer would wait forever. A waiting
/// writer's marker makes the readers' next grants fail, they let go, and
/// the writer gets the lock within its wait.
async fn a_waiting_writer_stops_new_readers(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let writer_done = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for id in 0..3 {
        let mut client = h.client_of(id % 2).await;
        let (writer_done, refused) = (writer_done.clone(), refused.clone());
        readers.push(tokio::spawn(async move {
            let mut current = until_granted(&mut client, "stream", pb::LockMode::Shared).await;
            while !writer_done.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(2)).await;
                match take(&mut client, "stream", pb::LockMode::Shared, 0).await {
                    Ok(next) => {
                        let_go(&mut client, &current).await;
                        current = next;
                    }
                    Err(status) if status.code() == Code::Aborted => {
                        refused.fetch_add(1, Ordering::SeqCst);
                        let_go(&mut client, &current).await;
                        // Back in line behind the writer.
                        current = until_granted(&mut client, "stream", pb::LockMode::Shared).await;
                    }
                    // Too few answers in time (a starved host): keep
                    // holding, try again.
                    Err(status) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
                }
            }
            let_go(&mut client, &current).await;
        }));
    }
    // Readers are in and chaining: an exclusive try-lock is refused.
    let mut writer = h.client_of(0).await;
    eventually(Duration::from_secs(10), "readers hold the resource", || {
        let mut c = writer.clone();
        async move {
            matches!(
                take(&mut c, "stream", pb::LockMode::Exclusive, 0).await,
                Err(s) if s.code() == Code::Aborted
            )
        }
    })
    .await;
    let lock = take(&mut writer, "stream", pb::LockMode::Exclusive, 30_000)
        .await
        .expect("the waiting writer is not starved by arriving readers");
    assert!(!lock.token.starts_with('s'));
    assert!(
        refused.load(Ordering::SeqCst) > 0,
        "some reader was turned away"
    );
    assert!(release(&mut writer, &lock).await.expect("release"));
    writer_done.store(true, Ordering::SeqCst);
    let results = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(readers))
        .await
        .expect("readers finish");
    for result in results {
        result.expect("reader task");
    }
}

/// Shared grants one by one: both held at once, each validated, extended
/// and released by its own token on either replica; an exclusive grant
/// waits for the last of them and gets a higher fence; a shared grant
/// after it a higher one still; a Hold session takes a shared grant too;
/// an unknown mode is INVALID_ARGUMENT naming `mode`.
async fn shared_grants_extend_release_validate(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let (mut c0, mut c1) = (h.client_of(0).await, h.client_of(1).await);
    let a = take(&mut c0, "doc", pb::LockMode::Shared, 0)
        .await
        .expect("a");
    let b = take(&mut c1, "doc", pb::LockMode::Shared, 0)
        .await
        .expect("b");
    assert_ne!(a.token, b.token);
    assert!(validate(&mut c1, &a).await.expect("validate").held);
    assert!(validate(&mut c0, &b).await.expect("validate").held);
    let refused = take(&mut c0, "doc", pb::LockMode::Exclusive, 0)
        .await
        .expect_err("readers hold");
    assert_eq!(refused.code(), Code::Aborted);
    let extended = extend(&mut c1, &a, 20_000)
        .await
        .expect("extend a shared grant");
    assert_eq!(
        extended.fence, a.fence,
        "Extend reports the grant's own fence"
    );
    assert!(std_duration(extended.validity) > Duration::from_secs(10));
    assert!(release(&mut c1, &a).await.expect("release a"));
    assert!(!validate(&mut c0, &a).await.expect("validate").held);
    assert!(
        !release(&mut c0, &a).await.expect("again"),
        "released already"
    );
    assert!(
        validate(&mut c0, &b).await.expect("validate").held,
        "b unaffected"
    );
    let refused = take(&mut c1, "doc", pb::LockMode::Exclusive, 0)
        .await
        .expect_err("b still holds");
    assert_eq!(refused.code(), Code::Aborted);
    assert!(release(&mut c0, &b).await.expect("release b"));
    let w = take(&mut c1, "doc", pb::LockMode::Exclusive, 5_000)
        .await
        .expect("free once the last reader left");
    assert!(
        w.fence > a.fence.max(b.fence),
        "writer {} after readers",
        w.fence
    );
    let refused = take(&mut c0, "doc", pb::LockMode::Shared, 0)
        .await
        .expect_err("a writer holds");
    assert_eq!(refused.code(), Code::Aborted);
    assert!(!validate(&mut c0, &b).await.expect("validate").held);
    assert!(release(&mut c0, &w).await.expect("release w"));
    let r = take(&mut c1, "doc", pb::LockMode::Shared, 5_000)
        .await
        .expect("shared after the writer");
    assert!(
        r.fence > w.fence,
        "reader {} after writer {}",
        r.fence,
        w.fence
    );

    // A Hold session gets the mode for free.
    let (requests, outgoing) = tokio::sync::mpsc::channel(4);
    requests
        .send(pb::HoldRequest {
            request: Some(pb::hold_request::Request::Acquire(request(
                "doc",
                pb::LockMode::Shared,
                2_000,
                0,
            ))),
        })
        .await
        .expect("queue");
    let mut events = c0
        .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect("Hold opens")
        .into_inner();
    match events.message().await.expect("event") {
        Some(pb::HoldEvent {
            event: Some(pb::hold_event::Event::Acquired(lock)),
        }) => {
            assert!(lock.token.starts_with('s'), "beside reader r");
            assert!(validate(&mut c1, &r).await.expect("validate").held);
        }
        other => panic!("expected acquired, got {other:?}"),
    }
    requests.send(release_message()).await.expect("release");
    assert!(release(&mut c1, &r).await.expect("release r"));

    let mut bad = request("doc", pb::LockMode::Shared, 1_000, 0);
    bad.mode = 7;
    let status = c0.acquire(bad).await.expect_err("unknown mode");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("mode"), "{}", status.message());
}

/// `redlockctl run --shared`: a shared run inside a shared run of the same
/// resource gets it (a mutex would answer 81, held); an exclusive run
/// inside a shared one is refused with 81; `--shared` with `--at-least` is
/// a usage error.
async fn redlockctl_run_shared(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let addr = h.daemons[0].addr;
    let ctl = bin::require("redlockctl");
    let inner_exit =
        |inner: &str| format!("'{}' run {inner} cfg -- true; echo inner=$?", ctl.display());
    for (inner, code) in [("--shared", "0"), ("", "81")] {
        let script = inner_exit(inner);
        let out = output_within(
            redlockctl(addr, &["run", "--shared", "cfg", "--", "sh", "-c", &script]),
            Duration::from_secs(30),
        )
        .await;
        assert_exit(&out, 0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("inner={code}")),
            "{inner}: {stdout}"
        );
    }
    let out = output_within(
        redlockctl(
            addr,
            &["run", "--shared", "--at-least", "1s", "cfg", "--", "true"],
        ),
        Duration::from_secs(30),
    )
    .await;
    assert_exit(&out, 64);
}

/// Wake-on-release: with `wait_fallback` at 30 s (a waiting writer would
/// otherwise retry only after 30 s, its reader's ttl being 60 s), the
/// reader's release wakes the waiting writer at once, through the other
/// replica. The bound below is 15 s, half the fallback: generous for a
/// loaded host, and still far from what a writer left to its fallback
/// would take.
async fn a_released_reader_wakes_a_waiting_writer(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, |config| {
        config.redlock.wait_fallback = Duration::from_secs(30);
    })
    .await;
    h.start_daemon().await;
    let (mut c0, mut c1) = (h.client_of(0).await, h.client_of(1).await);
    let reader = c0
        .acquire(request("wake", pb::LockMode::Shared, 60_000, 0))
        .await
        .expect("shared grant")
        .into_inner()
        .lock
        .expect("lock");
    let writer = tokio::spawn(async move {
        let lock = take(&mut c1, "wake", pb::LockMode::Exclusive, 50_000).await;
        (lock, std::time::Instant::now())
    });
    // The writer's refused attempt set its marker: it is waiting now.
    eventually(
        Duration::from_secs(20),
        "the waiting writer's marker",
        || async {
            for i in 0..5 {
                let marker = h
                    .raw(i, "HGET", vec!["redlock:fence:wake".into(), "ww".into()])
                    .await;
                if marker.as_string().is_some() {
                    return true;
                }
            }
            false
        },
    )
    .await;
    let released_at = std::time::Instant::now();
    assert!(release(&mut c0, &reader).await.expect("release"));
    let (lock, granted_at) = tokio::time::timeout(Duration::from_secs(45), writer)
        .await
        .expect("the writer answers within its wait")
        .expect("writer task");
    let lock = lock.expect("the writer is granted");
    assert!(lock.fence > reader.fence);
    let after = granted_at.duration_since(released_at);
    assert!(
        after < Duration::from_secs(15),
        "granted {after:?} after the release: not woken by it"
    );
}

/// A resource is a read-write lock or a semaphore, not both at once: while
/// a shared grant holds it, a permit request fails with
/// FAILED_PRECONDITION (as for a plain lock), and while a permit holds it,
/// so does a shared request; SHARED with a limit is INVALID_ARGUMENT
/// naming `mode`.
async fn semaphores_and_readers_exclude_each_other(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    let (mut c0, mut c1) = (h.client_of(0).await, h.client_of(1).await);
    let permit = |resource: &str| pb::AcquireRequest {
        limit: 2,
        ..request(resource, pb::LockMode::Exclusive, 10_000, 0)
    };
    let reader = take(&mut c0, "both/a", pb::LockMode::Shared, 0)
        .await
        .expect("shared grant");
    let refused = c1
        .acquire(permit("both/a"))
        .await
        .expect_err("readers hold");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(release(&mut c0, &reader).await.expect("release"));

    let held = c1
        .acquire(permit("both/b"))
        .await
        .expect("permit")
        .into_inner()
        .lock
        .expect("lock");
    let refused = take(&mut c0, "both/b", pb::LockMode::Shared, 0)
        .await
        .expect_err("a permit holds");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(release(&mut c1, &held).await.expect("release"));

    let both = pb::AcquireRequest {
        limit: 2,
        ..request("both/c", pb::LockMode::Shared, 10_000, 0)
    };
    let status = c0.acquire(both).await.expect_err("shared with a limit");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("mode"), "{}", status.message());
}
