//! Where the kinds meet, against five real masters: a semaphore's permit,
//! plain, shared and multi-resource grants of ONE resource exclude each
//! other and draw their fences from one sequence, also after a rolling
//! restart of the masters; a reader is admitted as soon as a one-round
//! writer released; a release answers what it found when quarantined
//! masters answer too. Each test failed on the code before its fix (see
//! its doc).
//!
//! No assertion on time: waits are bounded and polled.

mod common;

use common::*;
use redlockd::config::Config;
use redlockd::pb;
use redlockd::redlock::{Holder, LockError, LockKeys, Master, Token};
use redlockd::server::{build_engine, Engine};
use redlockd_testkit::masters::Flavor;
use std::time::Duration;
use tonic::Code;

against_both_servers!(
    a_rolling_restart_keeps_a_permits_limit,
    fences_are_one_sequence_across_kinds,
    readers_get_in_once_a_one_round_writer_released,
    a_release_counts_quarantined_masters_answers,
    re_creation_never_puts_a_key_beside_an_excluded_holder,
);

/// Waits until every master of `engine` counts toward a quorum.
async fn all_trusted(engine: &Engine, limit: Duration, what: &str) {
    eventually(limit, what, || async {
        engine.nodes.iter().all(|n| n.trusted())
    })
    .await;
}

/// The daemons' configuration with masters 3 and 4 behind fault proxies
/// (which a test sets to `Blackhole` to make them unreachable).
async fn behind_proxies(h: &Harness) -> (Config, Vec<proxy::Proxy>) {
    let mut config = h.config();
    let mut proxies = Vec::new();
    for i in [3, 4] {
        let master = std::net::SocketAddr::from(([127, 0, 0, 1], h.masters.port(i)));
        let proxy = proxy::Proxy::start(master).await.expect("proxy");
        config.redlock.nodes[i] = format!("redis://{}", proxy.addr());
        proxies.push(proxy);
    }
    (config, proxies)
}

/// A semaphore's permit held by a session-like loop of extensions, granted
/// while masters 3 and 4 were unreachable (so only 0, 1 and 2 have its key
/// and the semaphore's limit record); then 3 and 4 come back and master 0
/// restarts empty, each waiting out its quarantine. The extensions put the
/// permit's key back on 0, 3 and 4: with its limit record, so a plain lock
/// (or a permit of another limit) is still refused. Before the fix the key
/// came back alone and a plain Acquire got three yes votes: two holders.
async fn a_rolling_restart_keeps_a_permits_limit(flavor: Flavor) {
    let (plain, other_limit) = rolling_restart(flavor, false).await;
    assert!(
        matches!(
            plain,
            Err(LockError::LimitConflict | LockError::Contended(_))
        ),
        "a plain lock beside a held permit: {plain:?}"
    );
    assert!(
        matches!(
            other_limit,
            Err(LockError::LimitConflict | LockError::Contended(_))
        ),
        "a permit of limit 3 beside one of limit 2: {other_limit:?}"
    );
}

/// The same steps with the fix taken out (`testing.counterfactuals =
/// ["recreate-without-limit"]`): the plain lock is granted beside the
/// permit, as it was before the fix. So the test above can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_fix_a_rolling_restart_admits_a_plain_lock() {
    let (plain, _) = rolling_restart(Flavor::Valkey, true).await;
    assert!(
        plain.is_ok(),
        "the counterfactual was not caught: {plain:?}"
    );
}

/// The rolling-restart steps (see `a_rolling_restart_keeps_a_permits_limit`),
/// with or without the limit's re-creation: what a plain Acquire and a
/// permit of another limit then get.
async fn rolling_restart(
    flavor: Flavor,
    counterfactual: bool,
) -> (
    Result<redlockd::redlock::Lock, LockError>,
    Result<redlockd::redlock::Lock, LockError>,
) {
    const TTL: Duration = Duration::from_secs(2);
    let mut h = Harness::start(flavor).await;
    let (mut config, proxies) = behind_proxies(&h).await;
    config.testing.counterfactuals.recreate_without_limit = counterfactual;
    let engine = build_engine(&config).await.expect("engine");
    all_trusted(&engine, Duration::from_secs(5), "a fresh cluster").await;
    for proxy in &proxies {
        proxy.set(proxy::Mode::Blackhole);
    }
    let permit = engine
        .redlock
        .acquire_detached_as(
            "sem".into(),
            None,
            TTL,
            Duration::ZERO,
            Holder::unary("").with_limit(2),
        )
        .await
        .expect("a permit from masters 0, 1, 2");
    let index = permit.token.permit().expect("a permit's token");
    let key = format!("redlock:lock:sem\u{1f}{index}");
    for proxy in &proxies {
        proxy.set(proxy::Mode::Pass);
    }
    // Kept alive as a Hold session keeps its lock.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let holder = std::sync::Arc::clone(&engine.redlock);
    let session = tokio::spawn(async move {
        let mut lock = permit;
        let end = holder
            .hold(
                &mut lock,
                TTL,
                1.0 / 3.0,
                async {
                    let _ = stopped.await;
                },
                |_| {},
            )
            .await;
        (lock, end)
    });
    // The extensions put the key on 3 and 4, then on 0 once it restarted
    // empty and its quarantine is over.
    has_key(&h, &[3, 4], &key).await;
    h.masters.restart(0).expect("restart master 0 without data");
    has_key(&h, &[0], &key).await;
    all_trusted(&engine, Duration::from_secs(10), "the quarantines over").await;
    if !counterfactual {
        for i in 0..5 {
            let limit = h
                .raw(i, "HGET", vec!["redlock:fence:sem".into(), "lim".into()])
                .await;
            assert_eq!(limit.as_string().as_deref(), Some("2"), "master {i}");
        }
    }
    let plain = engine
        .redlock
        .acquire("sem", Duration::from_secs(1), Duration::ZERO)
        .await;
    let other_limit = engine
        .redlock
        .acquire_detached_as(
            "sem".into(),
            None,
            Duration::from_secs(1),
            Duration::ZERO,
            Holder::unary("").with_limit(3),
        )
        .await;
    let _ = stop.send(());
    let (lock, _) = session.await.expect("the session ends");
    let _ = engine.redlock.release_held(&lock).await;
    (plain, other_limit)
}

/// Waits until each of `masters` has `key`.
async fn has_key(h: &Harness, masters: &[usize], key: &str) {
    for &i in masters {
        eventually(
            Duration::from_secs(10),
            "the permit's key is back",
            || async { h.raw(i, "EXISTS", vec![key.into()]).await.as_i64() == Some(1) },
        )
        .await;
    }
}

/// A grant of one kind, released, then a grant of another kind of the
/// same resource, for every ordered pair of kinds: the later fence is
/// greater. Before the fix a permit's fence came from a counter of its own
/// with only the clock as floor, below a plain holder's one-round fence
/// (about the masters' clock plus `node_timeout`) every time.
async fn fences_are_one_sequence_across_kinds(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let inversions = fence_inversions(&h).await;
    assert!(inversions.is_empty(), "{inversions:#?}");
}

/// The same pairs with the fix taken out (`testing.counterfactuals =
/// ["per-kind-fences"]`): a permit after a plain holder gets a lower fence,
/// as before the fix. So the test above can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_fix_a_permits_fence_is_below_the_plain_holders() {
    let h = Harness::start_with(Flavor::Valkey, |c| {
        c.testing.counterfactuals.per_kind_fences = true;
    })
    .await;
    let inversions = fence_inversions(&h).await;
    assert!(
        inversions
            .iter()
            .any(|i| i.starts_with("permit of 2 after plain")),
        "the counterfactual was not caught: {inversions:#?}"
    );
}

/// Builds a request of one kind for a resource.
type RequestOf = fn(&str) -> pb::AcquireRequest;

/// Every ordered pair of kinds, three times, on one resource per round:
/// the pairs whose later grant's fence was not above the earlier one's.
async fn fence_inversions(h: &Harness) -> Vec<String> {
    let mut c = h.client().await;
    let mut inversions = Vec::new();
    let kinds: [(&str, RequestOf); 5] = [
        ("plain", |r| request(r)),
        ("permit of 2", |r| pb::AcquireRequest {
            limit: 2,
            ..request(r)
        }),
        ("permit of 3", |r| pb::AcquireRequest {
            limit: 3,
            ..request(r)
        }),
        ("shared", |r| pb::AcquireRequest {
            mode: pb::LockMode::Shared as i32,
            ..request(r)
        }),
        ("several resources", |r| pb::AcquireRequest {
            resources: vec![r.to_owned(), format!("{r}-other")],
            resource: String::new(),
            ..request(r)
        }),
    ];
    for round in 0..3 {
        // Every grant below is of one resource: each fence is above all
        // the earlier ones.
        let mut last = 0;
        for (first, make_first) in &kinds {
            for (second, make_second) in &kinds {
                let resource = format!("fences-{round}");
                let earlier = granted(&mut c, make_first(&resource)).await;
                if earlier.fence <= last {
                    inversions.push(format!(
                        "{first} after the previous grant: {} <= {last}",
                        earlier.fence
                    ));
                }
                assert!(release(&mut c, &earlier).await.expect("release"));
                let later = granted(&mut c, make_second(&resource)).await;
                if later.fence <= earlier.fence {
                    inversions.push(format!(
                        "{second} after {first}: {} <= {}",
                        later.fence, earlier.fence
                    ));
                }
                assert!(release(&mut c, &later).await.expect("release"));
                last = later.fence.max(earlier.fence);
            }
        }
    }
    inversions
}

/// A lock request of `resource` with a 10 s ttl and no wait.
fn request(resource: &str) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(10_000),
        owner: "cross-kind".into(),
        ..Default::default()
    }
}

/// The grant of `request` (a few tries while a starved machine answers
/// UNAVAILABLE).
async fn granted(c: &mut LockClient, request: pb::AcquireRequest) -> pb::Lock {
    for _ in 0..10 {
        match c.acquire(request.clone()).await {
            Ok(response) => return response.into_inner().lock.expect("a grant carries it"),
            Err(status) if status.code() == Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(status) => panic!("{}: {status:?}", request.resource),
        }
    }
    panic!("{}: no grant in 10 tries", request.resource)
}

/// A reader holds; a writer waits (its refused attempts set the
/// writer-waiting marker, which turns new readers away); the reader
/// releases and the writer is granted in one round; the writer releases.
/// A reader is then granted at once. Before the fix only the commit round
/// cleared the marker, so after a one-round writer readers got ABORTED for
/// up to twice `wait_fallback`.
async fn readers_get_in_once_a_one_round_writer_released(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut reader = h.client().await;
    let shared = |r: &str| pb::AcquireRequest {
        mode: pb::LockMode::Shared as i32,
        ..request(r)
    };
    // A first grant teaches the daemon the masters' clock: later plain
    // grants take the one-round path.
    let warm = granted(&mut reader, request("warm-up")).await;
    assert!(release(&mut reader, &warm).await.expect("release"));
    let held = granted(&mut reader, shared("rw")).await;
    let mut writer = h.client().await;
    let waiting = tokio::spawn(async move {
        let lock = writer
            .acquire(pb::AcquireRequest {
                wait: ms(30_000),
                ..request("rw")
            })
            .await
            .expect("the writer is granted once the reader left")
            .into_inner()
            .lock
            .expect("a grant carries it");
        (writer, lock)
    });
    // The writer's refused attempt set the marker on the masters.
    eventually(Duration::from_secs(5), "the writer waits", || async {
        let mut marked = 0;
        for i in 0..5 {
            let ww = h
                .raw(i, "HEXISTS", vec!["redlock:fence:rw".into(), "ww".into()])
                .await;
            marked += usize::from(ww.as_i64() == Some(1));
        }
        marked >= 3
    })
    .await;
    assert!(release(&mut reader, &held).await.expect("release"));
    let (mut writer, lock) = waiting.await.expect("the writer's task");
    assert!(release(&mut writer, &lock).await.expect("release"));
    match reader.acquire(shared("rw")).await {
        Ok(granted) => {
            let lock = granted.into_inner().lock.expect("a grant carries it");
            assert!(release(&mut reader, &lock).await.expect("release"));
        }
        Err(status) => panic!("a reader turned away after the writer left: {status:?}"),
    }
}

/// A lock held on masters 0, 1 and 2 only (3 and 4 unreachable while it
/// was granted); 3 and 4 come back empty and 0 restarts empty: all three
/// are rightly quarantined for the lock's horizon. Its Release reaches all
/// five masters: the answer is what they found (held on two, not on a
/// majority: `was_held = false`), and the key is gone everywhere. Before
/// the fix the quarantined masters' answers counted as failures and the
/// Release was UNAVAILABLE ("2 yes, 0 no, 3 failed").
async fn a_release_counts_quarantined_masters_answers(flavor: Flavor) {
    const TTL: Duration = Duration::from_secs(30);
    let mut h = Harness::start(flavor).await;
    let (config, proxies) = behind_proxies(&h).await;
    let engine = build_engine(&config).await.expect("engine");
    all_trusted(&engine, Duration::from_secs(5), "a fresh cluster").await;
    for proxy in &proxies {
        proxy.set(proxy::Mode::Blackhole);
    }
    let lock = engine
        .redlock
        .acquire("kept", TTL, Duration::ZERO)
        .await
        .expect("granted by masters 0, 1, 2");
    for proxy in &proxies {
        proxy.set(proxy::Mode::Pass);
    }
    h.masters.restart(3).expect("master 3 back, empty");
    h.masters.restart(4).expect("master 4 back, empty");
    h.masters.restart(0).expect("master 0 back, empty");
    for i in [0, 3, 4] {
        let state = engine.nodes[i].state();
        eventually(Duration::from_secs(5), "quarantined", || async {
            state.unsettled().is_none() && state.quarantined() && engine.nodes[i].is_up()
        })
        .await;
    }
    let was_held = engine
        .redlock
        .release(&lock.resource, &lock.token)
        .await
        .expect("every master answered");
    assert!(!was_held, "held on two masters of five: not on a majority");
    assert!(h.keys("redlock:lock:kept").await.is_empty());
}

/// The re-creation an Extend sends to a master that lost the lock's key
/// (`RECREATE`) checks what the kind's acquire checks: a permit's key is not
/// put back where the resource's plain key stands, nor a plain key where a
/// permit is held under the limit record. Before, `SET NX` on the permit's
/// own key put it beside a plain holder that had taken that master while
/// the key was gone, and the permit's next extension counted the master
/// toward a majority it no longer had (two holders; found by the model
/// check, `tools/model`, with a lost acquire and an extension sent near the
/// end of validity). Driven here on one real master, directly.
async fn re_creation_never_puts_a_key_beside_an_excluded_holder(flavor: Flavor) {
    const TTL: Duration = Duration::from_secs(30);
    let h = Harness::start(flavor).await;
    let engine = build_engine(&h.config()).await.expect("engine");
    all_trusted(&engine, Duration::from_secs(5), "a fresh cluster").await;
    let fence_ttl = h.config().redlock.fence_ttl;
    let permit = Token::generate_permit(0, 2).expect("OS RNG");
    let permit_keys = LockKeys::permit("redlock:", "beside", 0, (0, Duration::ZERO));
    let plain = Token::generate().expect("OS RNG");
    let plain_keys = LockKeys::new("redlock:", "beside");
    // Master 0: a plain holder's key stands; the permit's is not put back.
    h.raw(
        0,
        "SET",
        vec![
            "redlock:lock:beside".into(),
            plain.expose().into(),
            "PX".into(),
            "30000".into(),
        ],
    )
    .await;
    let node = &engine.nodes[0];
    let put_back = node.recreate(&permit_keys, &permit, TTL, fence_ttl).await;
    assert_eq!(put_back.ok(), Some(false), "a permit beside a plain holder");
    // Master 1: nothing there; the permit's key comes back, with its limit.
    let node = &engine.nodes[1];
    let put_back = node.recreate(&permit_keys, &permit, TTL, fence_ttl).await;
    assert_eq!(put_back.ok(), Some(true), "the permit's key put back");
    let limit = h
        .raw(1, "HGET", vec!["redlock:fence:beside".into(), "lim".into()])
        .await;
    assert_eq!(limit.as_string().as_deref(), Some("2"));
    // Master 1 again: the plain key is not put back beside that permit.
    let put_back = node.recreate(&plain_keys, &plain, TTL, fence_ttl).await;
    assert_eq!(
        put_back.ok(),
        Some(false),
        "a plain key beside a held permit"
    );
    engine.close().await;
}
