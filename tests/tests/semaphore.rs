//! Semaphores (`AcquireRequest.limit`) against five real masters
//! and two daemon replicas: many contenders never exceed the limit (checked
//! against a shared record), the three-callers over-admission case driven
//! through fault proxies, the limit as part of the resource's identity
//! (FAILED_PRECONDITION), a permit's Release/Extend/Validate on any
//! replica, a waiter woken by a release, a Hold session's permit, bad input.
//!
//! No assertion on time: waits are bounded and polled.

mod common;

use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Code;

against_both_servers!(
    limit_is_part_of_the_identity,
    a_permit_s_lifecycle,
    a_permit_kept_by_extensions_keeps_its_limit,
);

fn permit_request(resource: &str, limit: u32, ttl_ms: u64, wait_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(ttl_ms),
        wait: ms(wait_ms),
        owner: "semaphore-test".into(),
        limit,
        ..Default::default()
    }
}

async fn take(
    c: &mut LockClient,
    resource: &str,
    limit: u32,
    ttl_ms: u64,
    wait_ms: u64,
) -> Result<pb::Lock, tonic::Status> {
    let response = c
        .acquire(permit_request(resource, limit, ttl_ms, wait_ms))
        .await?;
    Ok(response
        .into_inner()
        .lock
        .expect("a grant carries the lock"))
}

/// Releases `lock`, again while the daemon answers UNAVAILABLE (a starved
/// test machine: the masters' answers come late); `was_held`.
async fn let_go(c: &mut LockClient, lock: &pb::Lock) -> bool {
    for _ in 0..20 {
        match release(c, lock).await {
            Ok(was_held) => return was_held,
            Err(status) if status.code() == Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(status) => panic!("release: {status:?}"),
        }
    }
    panic!("release: UNAVAILABLE 20 times")
}

async fn two_replicas(flavor: Flavor) -> Harness {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    h
}

/// What the contenders hold now, and the last fence seen per permit.
#[derive(Default)]
struct Record {
    holders: usize,
    most: usize,
    grants: usize,
    last_fence: HashMap<u32, u64>,
    /// Validity windows: from the grant's arrival to the earlier of its
    /// send + validity and its Release's send.
    windows: Vec<(Instant, Instant)>,
}

/// The most windows open at one instant (half-open: an end before a start
/// at the same instant).
fn most_overlapping(windows: &[(Instant, Instant)]) -> usize {
    let mut edges: Vec<(Instant, i32)> = windows
        .iter()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    edges.sort();
    let (mut open, mut most) = (0, 0);
    for (_, delta) in edges {
        open += delta;
        most = most.max(open);
    }
    usize::try_from(most).unwrap_or(0)
}

/// 12 contenders over two replicas, 8 grants each of a limit-3 semaphore:
/// never more than 3 hold at once (a holder counts itself in when its grant
/// arrives and out before it sends its release, well within the validity),
/// never more than 3 validity windows overlap, and per permit every
/// grant's fence is above the previous one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_contenders_never_exceed_the_limit() {
    let h = two_replicas(Flavor::Valkey).await;
    let record = Arc::new(Mutex::new(Record::default()));
    let mut tasks = Vec::new();
    for n in 0..12 {
        let mut c = h.client_of(n % 2).await;
        let record = Arc::clone(&record);
        tasks.push(tokio::spawn(async move {
            let (mut granted, mut tries) = (0, 0);
            while granted < 8 {
                tries += 1;
                assert!(tries <= 200, "only {granted} grants in 200 tries");
                let sent = Instant::now();
                let lock = match take(&mut c, "sem/load", 3, 5_000, 30_000).await {
                    Ok(lock) => lock,
                    // A starved machine: masters too slow for a quorum.
                    Err(status) if status.code() == Code::Unavailable => continue,
                    Err(status) => panic!("acquire: {status:?}"),
                };
                granted += 1;
                let received = Instant::now();
                let valid_until = sent + std_duration(lock.validity);
                assert!(lock.permit < 3, "permit {}", lock.permit);
                assert!(lock.token.ends_with(&format!(".{}", lock.permit)));
                {
                    let mut r = record.lock().expect("record");
                    r.holders += 1;
                    r.grants += 1;
                    r.most = r.most.max(r.holders);
                    assert!(
                        r.holders <= 3,
                        "{} holders of a limit-3 semaphore",
                        r.holders
                    );
                    let last = r.last_fence.insert(lock.permit, lock.fence);
                    assert!(
                        last.is_none_or(|last| last < lock.fence),
                        "permit {}: fence {} after {last:?}",
                        lock.permit,
                        lock.fence
                    );
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                {
                    let mut r = record.lock().expect("record");
                    r.holders -= 1;
                    r.windows.push((received, valid_until.min(Instant::now())));
                }
                // Not released (UNAVAILABLE): it expires with its ttl,
                // held meanwhile, so the record only undercounts.
                if let Ok(was_held) = release(&mut c, &lock).await {
                    assert!(was_held);
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("contender");
    }
    let r = record.lock().expect("record");
    assert_eq!(r.grants, 96);
    assert_eq!(r.holders, 0);
    let overlapping = most_overlapping(&r.windows);
    assert!(overlapping <= 3, "{overlapping} validity windows at once");
    // A semaphore, not a mutex: with 12 contenders, permits were shared.
    assert!(r.most >= 2, "at most {} at once", r.most);
    eprintln!("most holders at once: {}", r.most);
}

/// A daemon of its own over the harness's masters, reaching only the
/// masters in `reach`: the others sit behind blackholed proxies.
async fn daemon_reaching(h: &Harness, reach: [usize; 3]) -> (daemon::Daemon, Vec<proxy::Proxy>) {
    let mut config = h.config();
    let mut proxies = Vec::new();
    for i in 0..5 {
        let master = std::net::SocketAddr::from(([127, 0, 0, 1], h.masters.port(i)));
        let proxy = proxy::Proxy::start(master).await.expect("proxy");
        config.redlock.nodes[i] = format!("redis://{}", proxy.addr());
        proxies.push(proxy);
    }
    let daemon = daemon::Daemon::start(config.validated().expect("valid"))
        .await
        .expect("daemon");
    let channel = client::endpoint(daemon.addr)
        .expect("endpoint")
        .connect_lazy();
    client::wait_serving(channel, Duration::from_secs(10))
        .await
        .expect("serving");
    for (i, proxy) in proxies.iter().enumerate() {
        if !reach.contains(&i) {
            proxy.set(proxy::Mode::Blackhole);
        }
    }
    (daemon, proxies)
}

/// The over-admission case, driven deliberately: limit 2, five
/// masters, three callers reaching {0,1,2}, {2,3,4} and {0,3,4}. A
/// per-master holder count would admit all three (no master ever counts
/// more than two); with a mutex per permit the third is refused, again
/// and again, and with both others released it gets a permit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_callers_cannot_over_admit() {
    let h = Harness::start(Flavor::Valkey).await;
    let mut callers = Vec::new();
    for reach in [[0, 1, 2], [2, 3, 4], [0, 3, 4]] {
        let (daemon, proxies) = daemon_reaching(&h, reach).await;
        let c = client::connect(daemon.addr).await.expect("client");
        callers.push((daemon, proxies, c));
    }
    let mut held = Vec::new();
    for (_, _, c) in callers.iter_mut().take(2) {
        held.push(
            take(c, "sem/three", 2, 30_000, 5_000)
                .await
                .expect("a permit"),
        );
    }
    assert_ne!(held[0].permit, held[1].permit);
    for round in 0..5 {
        let third = take(&mut callers[2].2, "sem/three", 2, 30_000, 0).await;
        let status = third.expect_err("a third holder of a limit-2 semaphore");
        assert!(
            matches!(status.code(), Code::Aborted | Code::Unavailable),
            "round {round}: {status:?}"
        );
    }
    // Concurrently too: the first two ask for more while the third asks.
    let (a, rest) = callers.split_at_mut(1);
    let (b, c) = rest.split_at_mut(1);
    let (ra, rb, rc) = tokio::join!(
        take(&mut a[0].2, "sem/three", 2, 30_000, 0),
        take(&mut b[0].2, "sem/three", 2, 30_000, 0),
        take(&mut c[0].2, "sem/three", 2, 30_000, 0),
    );
    assert!(ra.is_err() && rb.is_err() && rc.is_err());
    // Released through their own daemons, the third gets one.
    for (lock, (_, _, c)) in held.iter().zip(callers.iter_mut()) {
        assert!(let_go(c, lock).await);
    }
    let lock = take(&mut callers[2].2, "sem/three", 2, 30_000, 5_000)
        .await
        .expect("a permit once the others released");
    assert!(lock.permit < 2);
    for (daemon, _proxies, _) in callers {
        daemon.stop(Duration::from_secs(5)).await.expect("stop");
    }
}

/// The limit is part of the resource's identity: held as a plain lock, as
/// limit 2, or as limit 3, a request under another limit is
/// FAILED_PRECONDITION at once (even when it may wait), on either replica;
/// the same limit is served; once released, another limit is served.
async fn limit_is_part_of_the_identity(flavor: Flavor) {
    let h = two_replicas(flavor).await;
    let mut a = h.client_of(0).await;
    let mut b = h.client_of(1).await;

    let plain = acquire(&mut a, "sem/id", 30_000, 5_000)
        .await
        .expect("plain");
    let status = take(&mut b, "sem/id", 3, 30_000, 5_000)
        .await
        .expect_err("limit 3 on a plain lock");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(let_go(&mut a, &plain).await);

    let two = take(&mut a, "sem/id", 2, 30_000, 5_000)
        .await
        .expect("limit 2");
    let status = take(&mut b, "sem/id", 3, 30_000, 5_000)
        .await
        .expect_err("limit 3 beside limit 2");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let status = acquire(&mut b, "sem/id", 30_000, 5_000)
        .await
        .expect_err("a plain lock beside limit 2");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let status = take(&mut b, "sem/id", 1, 30_000, 0)
        .await
        .expect_err("limit 1 is the plain lock");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    // A lock on several resources, one of them the semaphore's, is
    // refused too (as held: it never stands beside the permits), and
    // leaves nothing of the other resource behind.
    let several = pb::AcquireRequest {
        resources: vec!["sem/id".into(), "sem/other".into()],
        ttl: ms(30_000),
        ..Default::default()
    };
    let status = b
        .acquire(several)
        .await
        .expect_err("several resources beside limit 2");
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    let other = acquire(&mut b, "sem/other", 30_000, 0)
        .await
        .expect("the other resource was left free");
    assert!(let_go(&mut b, &other).await);
    let second = take(&mut b, "sem/id", 2, 30_000, 5_000)
        .await
        .expect("the same limit");
    assert!(let_go(&mut a, &two).await);
    assert!(let_go(&mut b, &second).await);

    // Released: the stale limit record is no obstacle.
    let three = take(&mut b, "sem/id", 3, 30_000, 5_000)
        .await
        .expect("limit 3 once limit 2 is gone");
    assert!(let_go(&mut b, &three).await);
    let plain = acquire(&mut a, "sem/id", 30_000, 0)
        .await
        .expect("plain once the semaphore is gone");
    assert!(let_go(&mut a, &plain).await);
}

/// A permit kept alive by Extends alone, past `fence_ttl` after its grant
/// (5 s here): the resource's fence hash, which holds the semaphore's
/// limit (`lim`), is refreshed with it, so a plain lock and another limit
/// are still refused (FAILED_PRECONDITION) and the limit is still on a
/// majority of masters. When the limit record was a key of its own, it expired
/// `fence_ttl` after the grant, and a plain lock was then granted beside
/// the permit.
async fn a_permit_kept_by_extensions_keeps_its_limit(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, |c| {
        c.redlock.max_ttl = Duration::from_secs(3);
        c.redlock.max_hold_at_least = Duration::from_secs(1);
        c.redlock.max_lock_delay = Duration::from_secs(1);
        c.redlock.fence_ttl = Duration::from_secs(5);
    })
    .await;
    h.start_daemon().await;
    let mut a = h.client_of(0).await;
    let mut b = h.client_of(1).await;
    let mut permit = take(&mut a, "sem/long", 2, 2_500, 0)
        .await
        .expect("a permit");
    let granted = Instant::now();
    // Extends every 300 ms (ttl 2.5 s) until 7 s after the grant: 2 s past
    // the fence ttl.
    while granted.elapsed() < Duration::from_secs(7) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        permit = extend(&mut a, &permit, 2_500)
            .await
            .expect("the permit is extended");
    }
    let status = acquire(&mut b, "sem/long", 2_500, 0)
        .await
        .expect_err("a plain lock beside a long-extended permit");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let status = take(&mut b, "sem/long", 3, 2_500, 0)
        .await
        .expect_err("limit 3 beside a long-extended limit-2 permit");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let with_limit = h.fence_field_on("sem/long", "lim", "2").await;
    assert!(with_limit >= 3, "the limit on {with_limit} masters");
    assert!(let_go(&mut a, &permit).await);
}

/// A permit is validated, extended and released like a lock, through
/// either replica; a full semaphore answers ABORTED; the released permit
/// is the one the next caller gets; a waiter is served by a release.
///
/// `wait_fallback` is a minute and the permits' ttls 30 s and more, so
/// within its 20 s wait only the release's notice (the release goes
/// through the other replica) can wake the waiter.
async fn a_permit_s_lifecycle(flavor: Flavor) {
    let mut h = Harness::start_with(flavor, |c| {
        c.redlock.wait_fallback = Duration::from_secs(60);
    })
    .await;
    h.start_daemon().await;
    let mut a = h.client_of(0).await;
    let mut b = h.client_of(1).await;
    let first = take(&mut a, "sem/life", 2, 30_000, 5_000)
        .await
        .expect("1st");
    let second = take(&mut b, "sem/life", 2, 30_000, 5_000)
        .await
        .expect("2nd");
    assert_eq!(first.permit + second.permit, 1, "permits 0 and 1");
    let full = take(&mut a, "sem/life", 2, 30_000, 0)
        .await
        .expect_err("full");
    assert_eq!(full.code(), Code::Aborted, "{full:?}");

    assert!(validate(&mut b, &first).await.expect("validate").held);
    let extended = extend(&mut b, &first, 60_000).await.expect("extend");
    assert_eq!(
        (extended.fence, extended.permit, &extended.token),
        (first.fence, first.permit, &first.token)
    );
    assert!(std_duration(extended.validity) > Duration::from_secs(30));

    // A waiter on one replica, a release on the other, once the waiter's
    // first attempt (two permits, each tried and cleaned up) reached a
    // master: the release, not a free permit, is what serves it.
    let before = h.lock_commands(0).await;
    let waiter = {
        let mut c = h.client_of(1).await;
        tokio::spawn(async move { take(&mut c, "sem/life", 2, 30_000, 20_000).await })
    };
    eventually(
        Duration::from_secs(10),
        "the waiter tried both permits",
        || async { h.lock_commands(0).await >= before + 4 },
    )
    .await;
    assert!(let_go(&mut a, &first).await);
    let got = waiter
        .await
        .expect("waiter")
        .expect("a permit after the release");
    assert_eq!(got.permit, first.permit);
    assert!(got.fence > first.fence, "per-permit fences increase");
    assert!(!validate(&mut a, &first).await.expect("validate").held);
    assert!(!let_go(&mut a, &first).await);
    assert!(let_go(&mut a, &got).await);
    assert!(let_go(&mut a, &second).await);
}

/// A Hold session takes a permit too, and its end frees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_session_holds_a_permit() {
    use pb::hold_event::Event;
    let h = Harness::start(Flavor::Valkey).await;
    let mut c = h.client().await;
    let (requests, outgoing) = tokio::sync::mpsc::channel(4);
    requests
        .send(pb::HoldRequest {
            request: Some(pb::hold_request::Request::Acquire(permit_request(
                "sem/hold", 2, 3_000, 0,
            ))),
        })
        .await
        .expect("queue");
    let mut events = c
        .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect("Hold opens")
        .into_inner();
    let lock = match events.message().await {
        Ok(Some(pb::HoldEvent {
            event: Some(Event::Acquired(lock)),
        })) => lock,
        other => panic!("expected `acquired`, got {other:?}"),
    };
    assert!(lock.permit < 2 && lock.token.ends_with(&format!(".{}", lock.permit)));
    let other = take(&mut c, "sem/hold", 2, 3_000, 5_000)
        .await
        .expect("2nd permit");
    assert_ne!(other.permit, lock.permit);
    let status = take(&mut c, "sem/hold", 2, 3_000, 0)
        .await
        .expect_err("full");
    assert_eq!(status.code(), Code::Aborted);
    requests.send(release_message()).await.expect("release");
    let again = take(&mut c, "sem/hold", 2, 3_000, 5_000)
        .await
        .expect("the session's permit is free again");
    assert_eq!(again.permit, lock.permit);
}

/// Bad input is INVALID_ARGUMENT naming the field: a limit over
/// redlock.max_semaphore_limit (64 by default), a request id with a limit
/// above 1, a malformed permit token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_names_the_field() {
    let h = Harness::start(Flavor::Valkey).await;
    let mut c = h.client().await;
    let status = take(&mut c, "sem/bad", 65, 1_000, 0).await.expect_err("65");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().starts_with("limit: "), "{status:?}");
    take(&mut c, "sem/bad", 64, 1_000, 5_000)
        .await
        .expect("64 is allowed");
    let status = c
        .acquire(pb::AcquireRequest {
            request_id: "A".repeat(22),
            ..permit_request("sem/bad2", 2, 1_000, 0)
        })
        .await
        .expect_err("request id with a limit");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().starts_with("request_id: "), "{status:?}");
    for token in [
        format!("{}.2.01", "0f".repeat(16)),
        format!("{}.", "0f".repeat(16)),
        // An index without its limit: no daemon issues it.
        format!("{}.1", "0f".repeat(16)),
        format!("{}.1.2.3", "0f".repeat(16)),
    ] {
        let status = c
            .validate(pb::ValidateRequest {
                resource: "sem/bad".into(),
                token,
            })
            .await
            .expect_err("malformed");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().starts_with("token: "), "{status:?}");
    }
}

/// `redlockctl run --limit 2`: runs beside one other permit holder with
/// $REDLOCK_PERMIT set to the other permit; with both permits held it
/// exits 81 (ABORTED) without running the command; a plain `run` on the
/// semaphore is refused (FAILED_PRECONDITION).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlockctl_run_with_a_limit() {
    use common::ctl::{output_within, redlockctl};
    let h = Harness::start(Flavor::Valkey).await;
    let addr = h.daemons[0].addr;
    let mut c = h.client().await;
    let held = take(&mut c, "sem/ctl", 2, 30_000, 5_000)
        .await
        .expect("1st");
    let script = "echo permit=$REDLOCK_PERMIT fence=$REDLOCK_FENCE";
    let waiting = [
        "run", "--limit", "2", "--wait", "5s", "sem/ctl", "--", "sh", "-c", script,
    ];
    let out = output_within(redlockctl(addr, &waiting), Duration::from_secs(20)).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout.contains(&format!("permit={}", 1 - held.permit)),
        "{stdout}"
    );
    let other = take(&mut c, "sem/ctl", 2, 30_000, 5_000)
        .await
        .expect("2nd");
    let args = ["run", "--limit", "2", "sem/ctl", "--", "sh", "-c", script];
    let out = output_within(redlockctl(addr, &args), Duration::from_secs(20)).await;
    assert_eq!(out.status.code(), Some(81), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ABORTED"),
        "{out:?}"
    );
    let plain = ["run", "sem/ctl", "--", "true"];
    let out = output_within(redlockctl(addr, &plain), Duration::from_secs(20)).await;
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("FAILED_PRECONDITION"),
        "{out:?}"
    );
    assert!(let_go(&mut c, &held).await);
    assert!(let_go(&mut c, &other).await);
}

/// The shared record's window check counts what overlaps, and touching
/// windows (one ends as the next starts) do not.
#[test]
fn the_window_check_counts_overlaps() {
    let t = Instant::now();
    let at = |ms: u64| t + Duration::from_millis(ms);
    let windows = [
        (at(0), at(10)),
        (at(5), at(15)),
        (at(6), at(7)),
        (at(10), at(20)),
    ];
    assert_eq!(most_overlapping(&windows), 3);
    assert_eq!(most_overlapping(&[(at(0), at(10)), (at(10), at(20))]), 1);
}
