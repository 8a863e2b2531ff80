//! Locks on several resources at once (`AcquireRequest.resources`)
//! against five real masters and two daemons (replicas): many contenders
//! over overlapping sets, plain and multi, checked against a shared record
//! (no resource ever in two overlapping holds, fences growing per
//! resource); all or nothing when one resource is held (nothing of the
//! others is left on any master); Release, Extend and Validate through any
//! of the names; waiting woken by a release; Hold sessions; bad input.
//!
//! Timing: nothing asserts a duration; waits are bounded and polled.

mod common;

use common::*;
use futures::FutureExt;
use rand::seq::IndexedRandom;
use rand::Rng;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Code;

against_both_servers!(all_or_nothing_when_one_is_held, release_through_any_name,);

/// Calls answered UNAVAILABLE (too few masters answered within
/// `node_timeout`: a starved host) are tried again, a few times: the
/// contract makes them retryable, and nothing here is about availability.
async fn retrying<T, F, Fut>(mut call: F) -> (Result<T, tonic::Status>, bool)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let mut retried = false;
    for _ in 0..5 {
        match call().await {
            Err(status) if status.code() == Code::Unavailable => {
                retried = true;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return (other, retried),
        }
    }
    (call().await, retried)
}

/// `common::release`, retried on UNAVAILABLE. After one, the first call's
/// deletes may have landed all the same, so a retry's `was_held = false`
/// says nothing: it answers true then.
async fn release(client: &mut LockClient, lock: &pb::Lock) -> Result<bool, tonic::Status> {
    let (answer, retried) = retrying(|| {
        let (mut client, lock) = (client.clone(), lock.clone());
        async move { common::release(&mut client, &lock).await }
    })
    .await;
    answer.map(|held| held || retried)
}

/// `common::validate`, retried on UNAVAILABLE.
async fn validate(
    client: &mut LockClient,
    lock: &pb::Lock,
) -> Result<pb::ValidateResponse, tonic::Status> {
    retrying(|| {
        let (mut client, lock) = (client.clone(), lock.clone());
        async move { common::validate(&mut client, &lock).await }
    })
    .await
    .0
}

/// `common::extend`, retried on UNAVAILABLE.
async fn extend(
    client: &mut LockClient,
    lock: &pb::Lock,
    ttl_ms: u64,
) -> Result<pb::Lock, tonic::Status> {
    retrying(|| {
        let (mut client, lock) = (client.clone(), lock.clone());
        async move { common::extend(&mut client, &lock, ttl_ms).await }
    })
    .await
    .0
}

/// `common::acquire`, retried on UNAVAILABLE (a failed attempt leaves
/// nothing behind).
async fn acquire(
    client: &mut LockClient,
    resource: &str,
    ttl_ms: u64,
    wait_ms: u64,
) -> Result<pb::Lock, tonic::Status> {
    retrying(|| {
        let (mut client, resource) = (client.clone(), resource.to_owned());
        async move { common::acquire(&mut client, &resource, ttl_ms, wait_ms).await }
    })
    .await
    .0
}

fn multi(resources: &[&str], ttl_ms: u64, wait_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resources: resources.iter().map(|r| (*r).to_owned()).collect(),
        ttl: ms(ttl_ms),
        wait: ms(wait_ms),
        owner: "multi-test".into(),
        ..Default::default()
    }
}

async fn acquire_multi(
    client: &mut LockClient,
    request: pb::AcquireRequest,
) -> Result<pb::Lock, tonic::Status> {
    let answer = retrying(|| {
        let mut client = client.clone();
        let request = request.clone();
        async move { client.acquire(request).await }
    })
    .await
    .0?;
    Ok(answer
        .into_inner()
        .lock
        .expect("a granted Acquire carries the lock"))
}

/// `lock`, addressed through `resource`.
fn through(lock: &pb::Lock, resource: &str) -> pb::Lock {
    pb::Lock {
        resource: resource.to_owned(),
        ..lock.clone()
    }
}

async fn two_replicas(flavor: Flavor) -> Harness {
    let mut h = Harness::start(flavor).await;
    h.start_daemon().await;
    h
}

/// Until no master keeps a lock key of any of `resources`.
async fn keys_gone(h: &Harness, resources: &[&str]) {
    eventually(
        Duration::from_secs(10),
        "the lock keys are gone",
        || async {
            for resource in resources {
                for i in 0..5 {
                    if h.lock_value(i, resource).await.is_some() {
                        return false;
                    }
                }
            }
            true
        },
    )
    .await;
}

/// The lock names every resource asked, in order, each with a fence; the
/// first is also `resource` and `fence`.
fn check_shape(lock: &pb::Lock, resources: &[&str]) {
    let named: Vec<&str> = lock.resources.iter().map(|r| r.resource.as_str()).collect();
    assert_eq!(named, resources);
    assert_eq!(lock.resource, resources[0]);
    assert_eq!(lock.fence, lock.resources[0].fence);
    assert!(lock.resources.iter().all(|r| r.fence > 0));
}

/// One resource held by a plain lock: a multi-resource Acquire naming it is
/// refused (ABORTED) and leaves nothing of the others on any master, so
/// plain locks on them are granted at once, through the other replica.
/// Once it is free, the multi lock is granted, every key on a majority.
async fn all_or_nothing_when_one_is_held(flavor: Flavor) {
    let h = two_replicas(flavor).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);
    let held = acquire(&mut a, "aon/b", 30_000, 0)
        .await
        .expect("plain lock");
    let refused = acquire_multi(&mut b, multi(&["aon/a", "aon/b", "aon/c"], 30_000, 0))
        .await
        .expect_err("one resource is held");
    assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
    // Nothing of the others on any master (the clean-up ran before the
    // answer; a master that granted all keys had them deleted).
    for i in 0..5 {
        for resource in ["aon/a", "aon/c"] {
            assert_eq!(
                h.lock_value(i, resource).await,
                None,
                "{resource} on master {i}"
            );
        }
        assert_eq!(
            h.lock_value(i, "aon/b").await.as_deref(),
            Some(held.token.as_str())
        );
    }
    let la = acquire(&mut b, "aon/a", 30_000, 0)
        .await
        .expect("a is free");
    let lc = acquire(&mut a, "aon/c", 30_000, 0)
        .await
        .expect("c is free");
    for lock in [&la, &lc, &held] {
        assert!(release(&mut a, lock).await.expect("Release"));
    }
    let lock = acquire_multi(&mut b, multi(&["aon/a", "aon/b", "aon/c"], 30_000, 0))
        .await
        .expect("all free now");
    check_shape(&lock, &["aon/a", "aon/b", "aon/c"]);
    for (resource, before) in [
        ("aon/a", la.fence),
        ("aon/b", held.fence),
        ("aon/c", lc.fence),
    ] {
        assert!(h.holders(resource, &lock.token).await >= 3, "{resource}");
        let fence = lock
            .resources
            .iter()
            .find(|r| r.resource == resource)
            .expect("named");
        assert!(
            fence.fence > before,
            "{resource}: {} after {before}",
            fence.fence
        );
    }
    // A plain lock on any of them conflicts, through either replica.
    for (client, resource) in [(&mut a, "aon/c"), (&mut b, "aon/b")] {
        let refused = acquire(client, resource, 30_000, 0)
            .await
            .expect_err("held");
        assert_eq!(refused.code(), Code::Aborted, "{resource}: {refused:?}");
    }
    assert!(release(&mut a, &lock).await.expect("Release"));
}

/// A multi lock released through each of its names in turn (one per
/// lock), on the other replica: every key is gone, each resource is free.
async fn release_through_any_name(flavor: Flavor) {
    let h = two_replicas(flavor).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);
    let names = ["rel/x", "rel/y", "rel/z"];
    for name in names {
        let lock = acquire_multi(&mut a, multi(&names, 30_000, 0))
            .await
            .expect("free");
        check_shape(&lock, &names);
        assert!(release(&mut b, &through(&lock, name))
            .await
            .expect("Release"));
        keys_gone(&h, &names).await;
        assert!(!release(&mut b, &through(&lock, name)).await.expect("again"));
        for resource in names {
            let plain = acquire(&mut b, resource, 30_000, 0)
                .await
                .expect("free again");
            assert!(release(&mut b, &plain).await.expect("Release"));
        }
    }
    // A name the token does not carry is not this lock.
    let lock = acquire_multi(&mut a, multi(&names, 30_000, 0))
        .await
        .expect("free");
    h.held_everywhere("rel/y", &lock.token).await;
    assert!(!release(&mut b, &through(&lock, "rel/other"))
        .await
        .expect("not its name"));
    assert_eq!(h.holders("rel/y", &lock.token).await, 5);
    assert!(release(&mut a, &lock).await.expect("Release"));
}

/// Extend through the last name on the other replica: every key gets the
/// new ttl, every fence is the grant's. Validate through each name: held,
/// through a foreign name: not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_and_validate_through_any_name() {
    let h = two_replicas(Flavor::Valkey).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);
    let names = ["ext/p", "ext/q", "ext/r"];
    let lock = acquire_multi(&mut a, multi(&names, 2_000, 0))
        .await
        .expect("free");
    let extended = extend(&mut b, &through(&lock, "ext/r"), 60_000)
        .await
        .expect("Extend");
    assert_eq!(extended.resources, lock.resources);
    assert_eq!(extended.fence, lock.fence);
    assert_eq!(extended.token, lock.token);
    assert!(std_duration(extended.validity) > Duration::from_secs(30));
    // The reply stands on a quorum of extensions (the round stops once
    // decided); the last masters' commands are sent and land just after.
    let extended_on = |resource: &'static str| {
        let h = &h;
        async move {
            let mut n = 0;
            for i in 0..5 {
                let key = format!("redlock:lock:{resource}");
                let pttl = h.raw(i, "PTTL", vec![key.into()]).await.as_i64();
                n += usize::from(pttl.is_some_and(|pttl| pttl > 30_000));
            }
            n
        }
    };
    for resource in names {
        let now = extended_on(resource).await;
        assert!(
            now >= 3,
            "{resource}: extended on {now} masters at the reply"
        );
        eventually(Duration::from_secs(2), "extended on every master", || {
            extended_on(resource).map(|n| n == 5)
        })
        .await;
        let v = validate(&mut b, &through(&lock, resource))
            .await
            .expect("Validate");
        assert!(v.held, "{resource}");
        assert!(std_duration(v.validity) > Duration::from_secs(30));
    }
    let foreign = validate(&mut a, &through(&lock, "ext/other"))
        .await
        .expect("Validate");
    assert!(!foreign.held);
    // One resource lost (an operator deleted its key everywhere): the lock
    // as a whole is not held any more.
    for i in 0..5 {
        h.raw(i, "DEL", vec!["redlock:lock:ext/q".into()]).await;
    }
    let v = validate(&mut a, &through(&lock, "ext/p"))
        .await
        .expect("Validate");
    assert!(!v.held, "one of its resources is gone");
    let refused = extend(&mut a, &lock, 10_000)
        .await
        .expect_err("not all held");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    release(&mut a, &lock).await.expect("Release");
    keys_gone(&h, &names).await;
}

/// A multi waiter behind a plain holder (on the other replica) is granted
/// after the holder's release, long before the holder's ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_woken_by_release() {
    let h = two_replicas(Flavor::Valkey).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);
    let holder = acquire(&mut a, "wait/2", 120_000, 0).await.expect("plain");
    let before = h.lock_commands(0).await;
    let waiter = tokio::spawn(async move {
        acquire_multi(&mut b, multi(&["wait/1", "wait/2"], 30_000, 60_000)).await
    });
    // The waiter was refused at least once: a master saw its attempt and
    // the attempt's clean-up.
    eventually(Duration::from_secs(10), "the waiter tried", || async {
        h.lock_commands(0).await >= before + 2
    })
    .await;
    assert!(
        !waiter.is_finished(),
        "granted while the holder held wait/2"
    );
    assert!(release(&mut a, &holder).await.expect("Release"));
    let lock = waiter
        .await
        .expect("task")
        .expect("granted after the release");
    check_shape(&lock, &["wait/1", "wait/2"]);
    assert!(lock.resources[1].fence > holder.fence);
    assert!(release(&mut a, &lock).await.expect("Release"));
}

/// A Hold session on several resources: the acquired lock names them all,
/// plain locks on them conflict while it lasts, its release frees all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_session_on_several_resources() {
    use pb::hold_event::Event;
    let h = two_replicas(Flavor::Valkey).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);
    let (requests, outgoing) = tokio::sync::mpsc::channel(4);
    requests
        .send(pb::HoldRequest {
            request: Some(pb::hold_request::Request::Acquire(multi(
                &["hold/1", "hold/2"],
                2_000,
                0,
            ))),
        })
        .await
        .expect("queue");
    let mut events = a
        .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect("Hold")
        .into_inner();
    let lock = match events.message().await {
        Ok(Some(pb::HoldEvent {
            event: Some(Event::Acquired(lock)),
        })) => lock,
        other => panic!("expected acquired, got {other:?}"),
    };
    check_shape(&lock, &["hold/1", "hold/2"]);
    // Renewed by the session past its first ttl: still conflicts then.
    let renewed_after = Instant::now() + Duration::from_millis(2_500);
    loop {
        let refused = acquire(&mut b, "hold/2", 1_000, 0).await.expect_err("held");
        assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
        if Instant::now() >= renewed_after {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    requests
        .send(release_message())
        .await
        .expect("send release");
    keys_gone(&h, &["hold/1", "hold/2"]).await;
    for resource in ["hold/1", "hold/2"] {
        let plain = acquire(&mut b, resource, 1_000, 0).await.expect("free");
        assert!(release(&mut b, &plain).await.expect("Release"));
    }
}

/// Bad input is INVALID_ARGUMENT naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input() {
    let h = Harness::start(Flavor::Valkey).await;
    let mut c = h.client().await;
    let too_many: Vec<String> = (0..17).map(|i| format!("many/{i}")).collect();
    let many: Vec<&str> = too_many.iter().map(String::as_str).collect();
    for (request, field) in [
        (
            pb::AcquireRequest {
                resource: "both".into(),
                ..multi(&["a", "b"], 1_000, 0)
            },
            "resources",
        ),
        (multi(&["a", "b", "a"], 1_000, 0), "resources"),
        (multi(&["a", ""], 1_000, 0), "resources"),
        (multi(&["a", "b\u{7}"], 1_000, 0), "resources"),
        (multi(&many, 1_000, 0), "resources"),
        (
            pb::AcquireRequest {
                request_id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
                ..multi(&["a", "b"], 1_000, 0)
            },
            "request_id",
        ),
    ] {
        let status = acquire_multi(&mut c, request.clone())
            .await
            .expect_err("invalid");
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{request:?}: {status:?}"
        );
        assert!(
            status.message().starts_with(&format!("{field}:")),
            "{request:?}: {status:?}"
        );
    }
    // Sixteen (the default maximum) is fine, and nothing was left behind.
    let lock = acquire_multi(&mut c, multi(&many[..16], 1_000, 0))
        .await
        .expect("16");
    assert_eq!(lock.resources.len(), 16);
    assert!(release(&mut c, &lock).await.expect("Release"));
    assert!(h.keys("redlock:lock:a").await.is_empty());
    // A token with a tampered list is no token of this lock's.
    let mut forged = through(&lock, "many/0");
    forged.token.push_str("0a");
    let status = release(&mut c, &forged).await.expect_err("malformed");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
}

/// One grant in the shared record: who held which resource when.
#[derive(Debug, Clone)]
struct Held {
    resource: String,
    fence: u64,
    /// When the grant's answer arrived (it was granted before).
    from: Instant,
    /// When its release was sent (it stood until after).
    until: Instant,
}

/// Many contenders through both replicas over overlapping sets of five
/// resources, plain and multi, each holding briefly and releasing: no
/// resource is ever in two overlapping holds, and each resource's fences
/// grow in the order of the holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_contenders_over_overlapping_sets() {
    const CONTENDERS: usize = 12;
    const ROUNDS: usize = 6;
    let pool = ["cc/0", "cc/1", "cc/2", "cc/3", "cc/4"];
    let h = two_replicas(Flavor::Valkey).await;
    let record: Arc<Mutex<Vec<Held>>> = Arc::default();
    let mut tasks = Vec::new();
    for n in 0..CONTENDERS {
        let mut client = h.client_of(n % 2).await;
        let record = Arc::clone(&record);
        tasks.push(tokio::spawn(async move {
            let mut granted = 0;
            for _ in 0..ROUNDS {
                let (names, request): (Vec<&str>, _) = {
                    let mut rng = rand::rng();
                    let size = rng.random_range(1..=3);
                    let names: Vec<&str> = pool.choose_multiple(&mut rng, size).copied().collect();
                    // Single resources: plain locks for half the contenders.
                    let request = match size == 1 && n % 2 == 0 {
                        true => pb::AcquireRequest {
                            resource: names[0].to_owned(),
                            ttl: ms(10_000),
                            wait: ms(20_000),
                            ..Default::default()
                        },
                        false => multi(&names, 10_000, 20_000),
                    };
                    (names, request)
                };
                let lock = match acquire_multi(&mut client, request).await {
                    Ok(lock) => lock,
                    Err(status) if status.code() == Code::Aborted => continue,
                    Err(status) => panic!("contender {n}: {status:?}"),
                };
                let from = Instant::now();
                granted += 1;
                let work = Duration::from_millis(rand::rng().random_range(0..5));
                tokio::time::sleep(work).await;
                let until = Instant::now();
                let fences: Vec<(String, u64)> = match lock.resources.is_empty() {
                    true => vec![(lock.resource.clone(), lock.fence)],
                    false => lock
                        .resources
                        .iter()
                        .map(|r| (r.resource.clone(), r.fence))
                        .collect(),
                };
                let named: Vec<&str> = fences.iter().map(|(r, _)| r.as_str()).collect();
                assert_eq!(named, names, "contender {n}");
                {
                    let mut record = record.lock().expect("record");
                    for (resource, fence) in fences {
                        record.push(Held {
                            resource,
                            fence,
                            from,
                            until,
                        });
                    }
                }
                assert!(
                    release(&mut client, &lock).await.expect("Release"),
                    "contender {n}"
                );
            }
            granted
        }));
    }
    let mut granted = 0;
    for task in tasks {
        granted += task.await.expect("contender");
    }
    let record = record.lock().expect("record").clone();
    let mut by_resource: HashMap<&str, Vec<&Held>> = HashMap::new();
    for held in &record {
        by_resource.entry(&held.resource).or_default().push(held);
    }
    for (resource, mut holds) in by_resource {
        holds.sort_by_key(|held| held.from);
        for pair in holds.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(a.until < b.from, "{resource}: {a:?} overlaps {b:?}");
            assert!(
                a.fence < b.fence,
                "{resource}: fence {} then {}",
                a.fence,
                b.fence
            );
        }
    }
    println!("{granted} grants, {} resource holds checked", record.len());
    assert!(granted >= CONTENDERS * ROUNDS / 2, "only {granted} grants");
}

/// `redlockctl run a b -- cmd` holds both resources while the command
/// runs (a plain lock on either is refused then), gives the command every
/// name and fence, and releases both when it exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlockctl_run_on_several_resources() {
    use common::ctl::{assert_exit, describe, output_within, redlockctl};
    let h = Harness::start(Flavor::Valkey).await;
    let mut c = h.client().await;
    // The command tries a plain lock on the second resource while it runs:
    // refused (exit 81, busy), which it reports on stdout.
    let script = "printf '%s|%s\\n' \"$REDLOCK_RESOURCES\" \"$REDLOCK_FENCES\"; \
                  redlockctl acquire ctl/b --ttl 1s; echo \"plain:$?\"";
    let mut command = redlockctl(
        h.daemons[0].addr,
        &["run", "ctl/a", "ctl/b", "--", "sh", "-c", script],
    );
    let ctl = redlockd_testkit::bin::require("redlockctl");
    let dir = ctl.parent().expect("bin dir").to_owned();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    command.env("PATH", path);
    let out = output_within(command, Duration::from_secs(60)).await;
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (names, rest) = stdout
        .split_once('|')
        .unwrap_or_else(|| panic!("{}", describe(&out)));
    assert_eq!(names, "ctl/a\nctl/b", "{}", describe(&out));
    let fences: Vec<u64> = rest
        .lines()
        .take(2)
        .map(|f| f.parse().expect("a fence"))
        .collect();
    assert!(
        fences.len() == 2 && fences.iter().all(|f| *f > 0),
        "{}",
        describe(&out)
    );
    assert!(
        stdout.contains("plain:81"),
        "a plain lock was not refused: {}",
        describe(&out)
    );
    keys_gone(&h, &["ctl/a", "ctl/b"]).await;
    let plain = acquire(&mut c, "ctl/b", 1_000, 0)
        .await
        .expect("free after run");
    assert!(plain.fence > fences[1]);
}

/// The lock's terms hold per resource: a multi lock with a lock_delay
/// left to expire keeps each of its resources for the delay (a plain lock
/// on one, and a multi lock naming one with a free resource, are refused,
/// and the free resource is left untouched); `owner` is each resource's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_delay_holds_per_resource() {
    let h = two_replicas(Flavor::Valkey).await;
    let (mut a, mut b) = (h.client_of(0).await, h.client_of(1).await);
    let request = pb::AcquireRequest {
        lock_delay: ms(20_000),
        ..multi(&["delay/1", "delay/2"], 300, 0)
    };
    let lock = acquire_multi(&mut a, request).await.expect("free");
    check_shape(&lock, &["delay/1", "delay/2"]);
    // On a quorum of masters at least: the grant did not wait for the
    // others, which may not have run it yet.
    let recorded = h.fence_field_on("delay/2", "owner", "multi-test").await;
    assert!(recorded >= 3, "the owner recorded on {recorded} masters");
    // Its holder vanishes: the keys expire, the delay keeps both.
    keys_gone(&h, &["delay/1", "delay/2"]).await;
    let refused = acquire(&mut b, "delay/2", 1_000, 0)
        .await
        .expect_err("delayed");
    assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
    let refused = acquire_multi(&mut b, multi(&["delay/3", "delay/1"], 1_000, 0))
        .await
        .expect_err("delay/1 is delayed");
    assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
    for i in 0..5 {
        assert_eq!(h.lock_value(i, "delay/3").await, None, "master {i}");
    }
}
