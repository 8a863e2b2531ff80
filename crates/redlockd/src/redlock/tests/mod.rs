//! The whole engine driven by in-memory fake masters ([`FakeMaster`]) under
//! tokio's paused clock, so every timing below is exact: a `Slow` master
//! answers after exactly its delay, `node_timeout` fires exactly, and an
//! operation against instant masters takes exactly zero time.

mod deadline;
mod proclaim;

use super::fake::{self, Behaviour, FakeMaster, Op};
use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const MS: fn(u64) -> Duration = Duration::from_millis;
const TTL: Duration = Duration::from_secs(10);
const DRIFT: f64 = 0.01;
const RESOURCE: &str = "orders/42";
const NO_WAIT: Duration = Duration::ZERO;
const ALL: [usize; 5] = [0, 1, 2, 3, 4];

/// Five fake masters behind one engine.
struct Cluster {
    fakes: Vec<Arc<FakeMaster>>,
    engine: Arc<Redlock>,
    keys: LockKeys,
}

fn settings(node_timeout: Duration) -> Settings {
    fake::settings(node_timeout)
}

/// Five healthy masters with `node_timeout` 50 ms.
fn cluster() -> Cluster {
    cluster_with(MS(50))
}

fn cluster_with(node_timeout: Duration) -> Cluster {
    let fakes = fake::five();
    let engine =
        Redlock::new(fake::as_nodes(&fakes), settings(node_timeout)).expect("five masters");
    Cluster {
        fakes,
        engine: Arc::new(engine),
        keys: LockKeys::new("t:", RESOURCE),
    }
}

impl Cluster {
    fn set(&self, which: &[usize], behaviour: Behaviour) {
        for &i in which {
            self.fakes[i].set(behaviour);
        }
    }

    /// The token of the engine's acquire calls so far (there must be one).
    fn attempt_token(&self) -> String {
        let mut tokens: Vec<String> = self
            .fakes
            .iter()
            .flat_map(|fake| fake.calls())
            .filter(|call| call.op == Op::Acquire)
            .map(|call| call.token)
            .collect();
        tokens.dedup();
        assert_eq!(tokens.len(), 1, "expected the acquire calls of one token");
        tokens.remove(0)
    }

    /// Every master received a release of `token`, and none holds it now.
    fn assert_released_everywhere(&self, token: &str) {
        for fake in &self.fakes {
            let sent = fake
                .calls()
                .iter()
                .any(|call| call.op == Op::Release && call.token == token);
            assert!(sent, "{} never received the release", fake.name);
            assert_ne!(
                fake.holder(&self.keys).as_deref(),
                Some(token),
                "{} still holds the token",
                fake.name
            );
        }
    }

    /// Number of masters where `token` holds the lock now.
    fn held_by(&self, token: &str) -> usize {
        self.fakes
            .iter()
            .filter(|fake| fake.holder(&self.keys).as_deref() == Some(token))
            .count()
    }
}

/// What an instant round of `ttl` leaves: `ttl - drift`.
fn full_validity(ttl: Duration) -> Duration {
    validity::validity(ttl, Duration::ZERO, DRIFT).expect("ttl above drift")
}

/// A grant on five healthy masters takes no time, carries a fence from the masters, and exactly `ttl - drift` of validity.
#[tokio::test(start_paused = true)]
async fn grant_on_healthy_masters() {
    let c = cluster();
    let start = Instant::now();
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("five healthy masters grant");
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(lock.resource, RESOURCE);
    assert!(lock.fence > 0);
    // 10 s - (1% of 10 s + 2 ms) = 9 898 ms.
    assert_eq!(lock.validity, MS(9_898));
    assert_eq!(lock.validity, full_validity(TTL));
    // No counter yet: the fence is the latest clock of the granting quorum,
    // and it was committed on a quorum.
    assert!(c.fakes.iter().any(|f| f.wall_micros() == lock.fence));
    let committed = c
        .fakes
        .iter()
        .filter(|f| f.fence_max(&c.keys) == lock.fence)
        .count();
    assert!(committed >= 3, "fence committed on {committed} masters");
    assert_eq!(c.held_by(lock.token.expose()), 5);
}

/// With two of five masters down, acquire, extend, validate and release all succeed.
#[tokio::test(start_paused = true)]
async fn two_masters_down_is_survivable() {
    let c = cluster();
    c.set(&[1, 3], Behaviour::Down);
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("three masters are a quorum");
    assert!(lock.fence > 0);
    assert_eq!(lock.validity, full_validity(TTL));

    let extended = c
        .engine
        .extend(RESOURCE, &lock.token, TTL)
        .await
        .expect("extend on three masters");
    assert_eq!(extended.fence, lock.fence);
    assert_eq!(extended.validity, full_validity(TTL));

    let left = c
        .engine
        .validate(RESOURCE, &lock.token)
        .await
        .expect("validate on three masters");
    assert_eq!(left, Some(full_validity(TTL)));

    let held = c
        .engine
        .release(RESOURCE, &lock.token)
        .await
        .expect("release on three masters");
    assert!(held);
    c.assert_released_everywhere(lock.token.expose());
}

/// With three of five masters down, acquire fails with NoQuorum and the attempt is released on every master, the down ones included.
#[tokio::test(start_paused = true)]
async fn three_masters_down_is_no_quorum() {
    let c = cluster();
    c.set(&[0, 2, 4], Behaviour::Down);
    let error = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect_err("two masters are no quorum");
    assert!(
        matches!(error, LockError::NoQuorum(t) if t.failed() == 3),
        "{error:?}"
    );
    let token = c.attempt_token();
    c.assert_released_everywhere(&token);
    assert_eq!(c.held_by(&token), 0);
}

/// A master slower than node_timeout is timed out, the grant stands on the quick four, and the SET that landed on the slow one goes with the release.
#[tokio::test(start_paused = true)]
async fn slow_master_is_outvoted() {
    let c = cluster();
    c.set(&[0], Behaviour::Slow(MS(100)));
    let start = Instant::now();
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("four quick masters grant");
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(lock.validity, full_validity(TTL));
    // The late SET landed on the slow master all the same.
    assert_eq!(
        c.fakes[0].holder(&c.keys).as_deref(),
        Some(lock.token.expose())
    );

    let start = Instant::now();
    let held = c
        .engine
        .release(RESOURCE, &lock.token)
        .await
        .expect("release on four masters");
    assert!(held);
    // The release waits for every master, the slow one up to node_timeout.
    assert_eq!(start.elapsed(), MS(50));
    c.assert_released_everywhere(lock.token.expose());
}

/// Three masters down (failing at once) and two slow but healthy: the
/// attempt is decided at once, but its clean-up waits for the two live
/// masters' answers (the deletes that matter) rather than stopping at the
/// first three failures.
#[tokio::test(start_paused = true)]
async fn cleanup_waits_for_the_live_masters() {
    let c = cluster();
    c.set(&[0, 1, 2], Behaviour::Down);
    c.set(&[3, 4], Behaviour::Slow(MS(10)));
    let start = Instant::now();
    let error = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect_err("three masters down");
    assert!(matches!(error, LockError::NoQuorum(_)), "{error:?}");
    // The acquire round is decided at once (three failures); the clean-up
    // then waits the 10 ms of the live pair's answers (it stopped at 0 ms
    // when it heeded the first three failures).
    assert_eq!(start.elapsed(), MS(10));
}

/// Three masters slower than node_timeout: the attempt fails after node_timeout and is released on all five, the slow ones included.
#[tokio::test(start_paused = true)]
async fn slow_majority_fails_and_cleans_up() {
    let c = cluster();
    c.set(&[0, 2, 4], Behaviour::Slow(MS(100)));
    let start = Instant::now();
    let error = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect_err("three masters time out");
    assert!(
        matches!(error, LockError::NoQuorum(t) if t.failed() == 3),
        "{error:?}"
    );
    // 50 ms for the acquire round, then a tenth of it for the cleanup:
    // UNAVAILABLE comes about node_timeout after the call, not twice that.
    assert_eq!(start.elapsed(), MS(55));
    let token = c.attempt_token();
    c.assert_released_everywhere(&token);
    // The slow masters' late replies change nothing.
    tokio::time::sleep(MS(200)).await;
    c.assert_released_everywhere(&token);
    assert_eq!(c.held_by(&token), 0);
}

/// Masters answering after 90 ms of a 100 ms lease: the rounds eat the validity, the attempt fails and is released everywhere.
#[tokio::test(start_paused = true)]
async fn validity_eaten_by_slow_masters() {
    let c = cluster_with(MS(200));
    c.set(&ALL, Behaviour::Slow(MS(90)));
    let error = c
        .engine
        .acquire(RESOURCE, MS(100), NO_WAIT)
        .await
        .expect_err("no validity left after 180 ms");
    assert!(
        matches!(error, LockError::Expired(_) | LockError::NoQuorum(_)),
        "{error:?}"
    );
    let token = c.attempt_token();
    c.assert_released_everywhere(&token);
}

/// Masters answering after 49 ms of a 100 ms lease: 2 ms are left, less than the 3 ms drift, so Expired, and the releases delete the keys before they expire.
#[tokio::test(start_paused = true)]
async fn validity_eaten_release_beats_expiry() {
    let c = cluster_with(MS(200));
    c.set(&ALL, Behaviour::Slow(MS(49)));
    let start = Instant::now();
    let error = c
        .engine
        .acquire(RESOURCE, MS(100), NO_WAIT)
        .await
        .expect_err("100 - 98 ms elapsed - 3 ms drift < 0");
    assert!(matches!(error, LockError::Expired(_)), "{error:?}");
    // Acquire round, commit round, release round.
    assert_eq!(start.elapsed(), MS(147));
    let token = c.attempt_token();
    for fake in &c.fakes {
        let deleted = fake
            .calls()
            .iter()
            .any(|call| call.op == Op::Release && call.token == token && call.hit);
        assert!(deleted, "{}: the release found no key to delete", fake.name);
    }
    c.assert_released_everywhere(&token);
}

/// A resource held by another token on a majority is Contended at once without a wait, and with a wait is granted only once the holder's keys expired.
#[tokio::test(start_paused = true)]
async fn contention_then_grant_after_expiry() {
    let c = cluster();
    let other = Token::generate().expect("OS RNG");
    let expiry = Instant::now() + MS(300);
    for fake in &c.fakes[..3] {
        fake.hold(&c.keys, &other, MS(300));
    }

    let error = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect_err("held by another on a majority");
    assert!(
        matches!(error, LockError::Contended(t) if t.no() == 3),
        "{error:?}"
    );
    // The other holder is untouched, and our attempt left nothing behind.
    assert_eq!(c.held_by(other.expose()), 3);
    assert!(c.fakes[3..].iter().all(|f| f.holder(&c.keys).is_none()));

    let lock = c
        .engine
        .acquire(RESOURCE, TTL, Duration::from_secs(1))
        .await
        .expect("granted once the other's keys expire");
    let now = Instant::now();
    assert!(now >= expiry, "granted {:?} before expiry", expiry - now);
    // At most one retry pause (20 ms) after the expiry.
    assert!(now <= expiry + MS(20), "granted {:?} late", now - expiry);
    assert_eq!(lock.validity, full_validity(TTL));
    assert_eq!(c.held_by(lock.token.expose()), 5);
}

/// Fences strictly increase over 200 grants, each with a different random pair of masters down, whether the previous lock was released or left to expire.
#[tokio::test(start_paused = true)]
async fn fences_increase_across_changing_quorums() {
    let c = cluster();
    let mut rng = StdRng::seed_from_u64(0x5eed_f0e5);
    let ttl = Duration::from_secs(1);
    let mut last_fence = 0;
    let mut last_pair = Vec::new();
    let (mut released, mut expired) = (0, 0);
    for cycle in 0..200 {
        let pair = loop {
            let mut pair = rand::seq::index::sample(&mut rng, 5, 2).into_vec();
            pair.sort_unstable();
            if pair != last_pair {
                break pair;
            }
        };
        c.set(&ALL, Behaviour::Up);
        c.set(&pair, Behaviour::Down);
        let lock = c
            .engine
            .acquire(RESOURCE, ttl, NO_WAIT)
            .await
            .unwrap_or_else(|e| panic!("cycle {cycle}, {pair:?} down: {e}"));
        assert!(
            lock.fence > last_fence,
            "cycle {cycle}, {pair:?} down: fence {} after {last_fence}",
            lock.fence
        );
        last_fence = lock.fence;
        if rng.random_bool(0.5) {
            let held = c
                .engine
                .release(RESOURCE, &lock.token)
                .await
                .unwrap_or_else(|e| panic!("cycle {cycle}: release: {e}"));
            assert!(held, "cycle {cycle}: released a lock it did not hold");
            released += 1;
        } else {
            tokio::time::sleep(ttl).await;
            assert_eq!(c.held_by(lock.token.expose()), 0);
            expired += 1;
        }
        last_pair = pair;
    }
    assert!(released > 50 && expired > 50, "{released} / {expired}");
}

/// Dropping an acquire_detached future mid-attempt leaves no lock: the grant that completes afterwards is released on every master, and the resource is free at once.
#[tokio::test(start_paused = true)]
async fn detached_acquire_dropped_mid_attempt() {
    let c = cluster();
    c.set(&ALL, Behaviour::Slow(MS(30)));
    let mut pending = Box::pin(c.engine.acquire_detached(
        RESOURCE.into(),
        TTL,
        Duration::from_secs(1),
    ));
    assert!(tokio::time::timeout(MS(10), &mut pending).await.is_err());
    // Mid acquire round: the SETs landed, the replies are due at 30 ms.
    let token = c.attempt_token();
    assert_eq!(c.held_by(&token), 5);
    drop(pending);

    // Grant at 60 ms (acquire + commit), release sent at once.
    tokio::time::sleep(MS(200)).await;
    let committed = c.fakes.iter().any(|fake| {
        fake.calls()
            .iter()
            .any(|call| call.op == Op::CommitFence && call.hit)
    });
    assert!(committed, "the attempt was meant to end in a grant");
    c.assert_released_everywhere(&token);

    c.set(&ALL, Behaviour::Up);
    let start = Instant::now();
    c.engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("the resource is free again");
    assert_eq!(start.elapsed(), Duration::ZERO);
}

/// Dropping an acquire_detached future while its attempts fail stops the retries after the attempt in flight, which is released.
#[tokio::test(start_paused = true)]
async fn detached_acquire_dropped_stops_retrying() {
    let c = cluster();
    c.set(&[0, 1, 2], Behaviour::Slow(MS(100)));
    let mut pending = Box::pin(c.engine.acquire_detached(
        RESOURCE.into(),
        TTL,
        Duration::from_secs(10),
    ));
    assert!(tokio::time::timeout(MS(10), &mut pending).await.is_err());
    drop(pending);
    tokio::time::sleep(Duration::from_secs(1)).await;
    for fake in &c.fakes {
        let attempts = fake
            .calls()
            .iter()
            .filter(|call| call.op == Op::Acquire)
            .count();
        assert_eq!(
            attempts, 1,
            "{} saw retries after the caller left",
            fake.name
        );
    }
    let token = c.attempt_token();
    c.assert_released_everywhere(&token);
}

/// Dropping an acquire_detached future after the task handed it the grant, but before the caller polled it again, must not leave the lock behind either.
#[tokio::test(start_paused = true)]
async fn detached_acquire_dropped_after_grant_was_sent() {
    let c = cluster();
    let pending = c.engine.acquire_detached(RESOURCE.into(), TTL, NO_WAIT);
    // The task runs to its grant and sends it; the caller (say, a handler
    // whose client just reset the stream) is never polled again.
    tokio::time::sleep(MS(1)).await;
    let token = c.attempt_token();
    drop(pending);
    tokio::time::sleep(MS(100)).await;
    c.assert_released_everywhere(&token);
}

/// Each attempt of one acquisition has a token of its own: a failed
/// attempt's leftovers (a fence committed on a minority beside its token)
/// can never be taken for the granted lock's.
#[tokio::test(start_paused = true)]
async fn every_attempt_has_its_own_token() {
    let c = cluster();
    let holder = Token::generate().expect("OS RNG");
    for i in [0, 1, 2] {
        c.fakes[i].hold(&c.keys, &holder, MS(100));
    }
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, Duration::from_secs(2))
        .await
        .expect("granted once the holder's keys expire");
    let mut tokens: Vec<String> = c
        .fakes
        .iter()
        .flat_map(|fake| fake.calls())
        .filter(|call| call.op == Op::Acquire)
        .map(|call| call.token)
        .collect();
    tokens.sort();
    tokens.dedup();
    assert!(
        tokens.len() >= 2,
        "one token for every attempt: {}",
        tokens.len()
    );
    assert!(tokens.contains(&lock.token.expose().to_owned()));
}

/// Every master that extends the lock lost its fence record (a restart
/// without data, the lock key put back): Extend does not answer a fence it
/// cannot vouch for (0 would break "a later holder's fence is greater"), it
/// fails with FenceUnknown; a session, which knows its fence from the
/// grant, keeps extending.
#[tokio::test(start_paused = true)]
async fn extend_without_any_fence_record_is_an_error() {
    let c = cluster();
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("five healthy masters grant");
    for fake in &c.fakes {
        fake.state().fences.remove(&c.keys.fence);
    }
    match c.engine.extend(RESOURCE, &lock.token, TTL).await {
        Err(LockError::FenceUnknown) => {}
        other => panic!("expected FenceUnknown, got {other:?}"),
    }
    let (fence, extended) = c
        .engine
        .extend_lease(RESOURCE, &lock.token, TTL, super::Claim::Any)
        .await
        .expect("the lock itself is still held and extended");
    assert_eq!(fence, None);
    assert_eq!(extended.validity, full_validity(TTL));
}

/// Extend keeps the grant's fence (also through a quorum that includes masters outside the commit), and once the keys expired it is NotHeld.
#[tokio::test(start_paused = true)]
async fn extend_keeps_fence_and_fails_after_expiry() {
    let c = cluster();
    let ttl = MS(100);
    let lock = c
        .engine
        .acquire(RESOURCE, ttl, NO_WAIT)
        .await
        .expect("five healthy masters grant");

    let extended = c
        .engine
        .extend(RESOURCE, &lock.token, ttl)
        .await
        .expect("still held");
    assert_eq!(extended.fence, lock.fence);
    assert_eq!(extended.token, lock.token);
    assert_eq!(extended.validity, full_validity(ttl));

    let committed: Vec<usize> = ALL
        .into_iter()
        .filter(|&i| c.fakes[i].fence_max(&c.keys) == lock.fence)
        .collect();
    assert_eq!(
        committed, ALL,
        "the commit goes to every master holding the lock"
    );
    // Only one master that recorded the fence in this round: two forget it
    // (as if they had missed the commit), one more is down.
    for i in [2, 3] {
        c.fakes[i].state().fences.remove(&c.keys.fence);
    }
    c.set(&[1], Behaviour::Down);
    let extended = c
        .engine
        .extend(RESOURCE, &lock.token, ttl)
        .await
        .expect("still held on a quorum");
    assert_eq!(extended.fence, lock.fence);

    c.set(&ALL, Behaviour::Up);
    tokio::time::sleep(ttl).await;
    let error = c
        .engine
        .extend(RESOURCE, &lock.token, ttl)
        .await
        .expect_err("the keys expired");
    assert!(matches!(error, LockError::NotHeld(_)), "{error:?}");
    assert_eq!(c.held_by(lock.token.expose()), 0);
}

/// A command's `node_timeout` starts when its batch is sent, not when the
/// round starts: every master's commands wait 40 ms in the daemon's queue
/// and are answered 30 ms after their send (node_timeout 50 ms). Each
/// round takes 70 ms, past `start + node_timeout`, and the lock is granted;
/// its validity still counts the whole time from before the first send.
/// Before the change every master counted as timed out at 50 ms.
#[tokio::test(start_paused = true)]
async fn node_timeout_counts_from_the_send() {
    let c = cluster();
    for fake in &c.fakes {
        fake.bound_commands(MS(50));
    }
    c.set(
        &ALL,
        Behaviour::Queued {
            queued: MS(40),
            answer: MS(30),
        },
    );
    let start = Instant::now();
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("masters answering within node_timeout of the send grant");
    let took = start.elapsed();
    assert!(took >= MS(70), "the rounds took {took:?}");
    assert!(
        lock.validity <= validity::validity(TTL, MS(70), DRIFT).expect("ttl above drift"),
        "validity {:?} must count the queue wait",
        lock.validity
    );
    assert!(c.held_by(lock.token.expose()) >= 3);
}

/// The same queue wait, but the masters answer 60 ms after the send, past
/// `node_timeout`: they time out, counted from the send (40 + 50 ms), and
/// the caller hears of an outage, not a grant.
#[tokio::test(start_paused = true)]
async fn node_timeout_after_the_send_still_fails() {
    let c = cluster();
    for fake in &c.fakes {
        fake.bound_commands(MS(50));
    }
    c.set(
        &ALL,
        Behaviour::Queued {
            queued: MS(40),
            answer: MS(60),
        },
    );
    let start = Instant::now();
    let error = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect_err("masters slower than node_timeout after the send");
    assert!(matches!(error, LockError::NoQuorum(_)), "{error:?}");
    assert!(
        start.elapsed() >= MS(90),
        "gave up after {:?}",
        start.elapsed()
    );
}

/// A queue that never drains is bounded by the round's backstop
/// (`QUEUE_ALLOWANCE` more `node_timeout`s): commands still queued at
/// 200 ms count as failed, and since the masters time their commands out
/// themselves, the silence is the daemon's own backlog: the daemon is
/// overloaded (RESOURCE_EXHAUSTED), the masters are not blamed.
#[tokio::test(start_paused = true)]
async fn queue_wait_is_bounded_by_the_backstop() {
    let c = cluster();
    for fake in &c.fakes {
        fake.bound_commands(MS(50));
    }
    c.set(
        &ALL,
        Behaviour::Queued {
            queued: MS(500),
            answer: MS(1),
        },
    );
    let start = Instant::now();
    let error = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect_err("nothing is sent before the backstop");
    let LockError::Backlogged(tally) = &error else {
        panic!("expected the daemon's backlog, got {error:?}");
    };
    assert_eq!((tally.failed(), tally.late()), (5, 5));
    assert!(
        error.to_string().starts_with("the daemon is overloaded"),
        "{error}"
    );
    assert!(
        start.elapsed() < MS(500),
        "gave up after {:?}",
        start.elapsed()
    );
}

/// Three masters down (failing at once) and two stuck in the daemon's
/// queue: the masters' own failures lost the round, so it is an outage
/// (UNAVAILABLE), whatever the queue did. With two down, the three stuck in
/// the queue decided it: the daemon's backlog.
#[tokio::test(start_paused = true)]
async fn masters_failures_stay_an_outage_beside_a_backlog() {
    let c = cluster();
    for fake in &c.fakes {
        fake.bound_commands(MS(50));
    }
    c.set(&[0, 1, 2], Behaviour::Down);
    c.set(
        &[3, 4],
        Behaviour::Queued {
            queued: MS(500),
            answer: MS(1),
        },
    );
    let error = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect_err("three masters down");
    assert!(matches!(error, LockError::NoQuorum(_)), "{error:?}");

    c.set(
        &[2],
        Behaviour::Queued {
            queued: MS(500),
            answer: MS(1),
        },
    );
    let error = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect_err("three masters stuck in the queue");
    let LockError::Backlogged(tally) = &error else {
        panic!("expected the daemon's backlog, got {error:?}");
    };
    assert_eq!((tally.failed(), tally.late()), (5, 3));
}

/// Split-vote back-off: an attempt that splits the vote (two masters held by
/// someone else, two granted, one down) backs off for longer than a round,
/// and release notices arriving every millisecond (the other contender's
/// clean-ups) do not cut the back-off short. Each attempt takes 10 ms
/// (acquire and clean-up rounds, 5 ms each), then waits at least as long,
/// so at most 11 attempts fit in 200 ms; woken by every notice (the old
/// 1 ms tie-break), about 18 would.
#[tokio::test(start_paused = true)]
async fn split_vote_backs_off_through_wake_ups() {
    let c = cluster();
    c.set(&ALL, Behaviour::Slow(MS(5)));
    c.set(&[4], Behaviour::Down);
    let other = Token::generate().expect("OS RNG");
    for fake in &c.fakes[..2] {
        fake.hold(&c.keys, &other, TTL);
    }
    let engine = Arc::clone(&c.engine);
    let notices = tokio::spawn(async move {
        loop {
            tokio::time::sleep(MS(1)).await;
            engine.notice_received(&notices::Notice::new(RESOURCE).encode());
        }
    });
    let error = c
        .engine
        .acquire(RESOURCE, TTL, MS(200))
        .await
        .expect_err("two masters stay held by another");
    notices.abort();
    assert!(wait::is_split(&error), "{error:?}");
    let attempts = c.fakes[2]
        .calls()
        .iter()
        .filter(|call| call.op == Op::Acquire)
        .count();
    assert!(
        (2..=11).contains(&attempts),
        "{attempts} attempts in 200 ms"
    );
}

/// A fake master seen from one replica: every command reaches it `delay`
/// after it is issued (and is applied then), as over a slower link.
struct Far {
    inner: Arc<FakeMaster>,
    delay: Duration,
}

impl Far {
    fn late<T: Send + 'static>(
        &self,
        call: impl FnOnce(Arc<FakeMaster>) -> futures::future::BoxFuture<'static, T> + Send + 'static,
    ) -> futures::future::BoxFuture<'static, T> {
        use futures::FutureExt;
        let inner = Arc::clone(&self.inner);
        let delay = self.delay;
        async move {
            tokio::time::sleep(delay).await;
            call(inner).await
        }
        .boxed()
    }
}

impl Master for Far {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        proposal: super::Proposal,
        waiter_marker: Duration,
        holder: &Holder,
    ) -> futures::future::BoxFuture<'static, Result<AcquireVote, NodeError>> {
        let (keys, token, holder) = (keys.clone(), token.clone(), holder.clone());
        self.late(move |n| n.acquire(&keys, &token, ttl, proposal, waiter_marker, &holder))
    }
    fn commit_fence(
        &self,
        keys: &LockKeys,
        token: &Token,
        fence: u64,
        fence_ttl: Duration,
        ttl: Duration,
        holder: &Holder,
    ) -> futures::future::BoxFuture<'static, Result<bool, NodeError>> {
        let (keys, token, holder) = (keys.clone(), token.clone(), holder.clone());
        self.late(move |n| n.commit_fence(&keys, &token, fence, fence_ttl, ttl, &holder))
    }
    fn extend(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
        claim: super::Claim,
    ) -> futures::future::BoxFuture<'static, Result<ExtendVote, NodeError>> {
        let (keys, token) = (keys.clone(), token.clone());
        self.late(move |n| n.extend(&keys, &token, ttl, fence_ttl, claim))
    }
    fn recreate(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
    ) -> futures::future::BoxFuture<'static, Result<bool, NodeError>> {
        let (keys, token) = (keys.clone(), token.clone());
        self.late(move |n| n.recreate(&keys, &token, ttl, fence_ttl))
    }
    fn release(
        &self,
        keys: &LockKeys,
        token: &Token,
        notice: &str,
        ending: super::Ending,
        epoch: Option<super::Epoch>,
    ) -> futures::future::BoxFuture<'static, Result<bool, NodeError>> {
        let (keys, token, notice) = (keys.clone(), token.clone(), notice.to_owned());
        self.late(move |n| n.release(&keys, &token, &notice, ending, epoch))
    }
    fn proclaim(
        &self,
        keys: &LockKeys,
        token: &Token,
        term: u64,
        version: u64,
        value: &str,
    ) -> futures::future::BoxFuture<'static, Result<Option<u64>, NodeError>> {
        let (keys, token, value) = (keys.clone(), token.clone(), value.to_owned());
        self.late(move |n| n.proclaim(&keys, &token, term, version, &value))
    }

    fn check(
        &self,
        keys: &LockKeys,
        token: &Token,
    ) -> futures::future::BoxFuture<'static, Result<Option<Duration>, NodeError>> {
        let (keys, token) = (keys.clone(), token.clone());
        self.late(move |n| n.check(&keys, &token))
    }
    fn inspect(
        &self,
        keys: &LockKeys,
    ) -> futures::future::BoxFuture<'static, Result<Option<master::Seen>, NodeError>> {
        let keys = keys.clone();
        self.late(move |n| n.inspect(&keys))
    }
    fn scan(
        &self,
        pattern: &str,
        cursor: u64,
        count: usize,
    ) -> futures::future::BoxFuture<'static, Result<(u64, Vec<String>), NodeError>> {
        let pattern = pattern.to_owned();
        self.late(move |n| n.scan(&pattern, cursor, count))
    }
}

/// Split-vote back-off: two replicas, each near two masters and 3 ms from the
/// other two, with the fifth master down, start at the same instant: each
/// wins its near masters and is refused by the far ones, a split vote.
/// They back off for random times longer than a round, and one of them
/// soon gets the lock while the other waits for it: exactly one grant, and
/// the loser does not retry every round for the rest of its wait (its own
/// clean-up used to wake it: `WakeWaiters::NotSelf`).
#[tokio::test(start_paused = true)]
async fn two_split_contenders_converge() {
    let fakes = fake::five();
    fakes[4].set(Behaviour::Down);
    let replica = |near: [usize; 2]| {
        let nodes: Vec<Arc<dyn Master>> = fakes
            .iter()
            .enumerate()
            .map(|(i, fake)| {
                let delay = if near.contains(&i) {
                    Duration::ZERO
                } else {
                    MS(3)
                };
                Arc::new(Far {
                    inner: Arc::clone(fake),
                    delay,
                }) as Arc<dyn Master>
            })
            .collect();
        Arc::new(Redlock::new(nodes, settings(MS(50))).expect("five masters"))
    };
    let (a, b) = (replica([0, 1]), replica([2, 3]));
    let wait = Duration::from_secs(2);
    let start = Instant::now();
    let (ra, rb) = tokio::join!(
        async {
            let r = a.acquire(RESOURCE, TTL, wait).await;
            (r, start.elapsed())
        },
        async {
            let r = b.acquire(RESOURCE, TTL, wait).await;
            (r, start.elapsed())
        }
    );
    let granted: Vec<_> = [&ra, &rb]
        .into_iter()
        .filter_map(|(r, at)| r.as_ref().ok().map(|_| *at))
        .collect();
    assert_eq!(granted.len(), 1, "exactly one grant: {ra:?} {rb:?}");
    let attempts = fakes[0]
        .calls()
        .iter()
        .filter(|call| call.op == Op::Acquire)
        .count();
    // The loser's attempts won master 1 and were cleaned up: the clean-up
    // no longer wakes the loser itself, which retried every round (about
    // 280 attempts in the 2 s wait before the fix).
    assert!(
        (2..=10).contains(&attempts),
        "{attempts} acquire commands on fake0"
    );
    assert!(
        granted[0] < MS(500),
        "converged only after {:?}",
        granted[0]
    );
}

/// An acquisition waits on its own task for as long as its caller waits
/// (in a burst, in the admission queue): its future must not carry its
/// largest branch inline. It was 1,416 bytes (the request-id resume path
/// inline) before those branches were boxed (10,000 `Hold`
/// sessions opened at once, under 100 MB).
#[tokio::test(start_paused = true)]
async fn a_waiting_acquisition_stays_small() {
    let c = cluster();
    let holder = Arc::new(Holder::session("owner", "replica"));
    let acquisition = c.engine.acquire_until_stopped(
        RESOURCE,
        None,
        TTL,
        Duration::from_secs(1),
        &holder,
        std::future::pending(),
    );
    let size = std::mem::size_of_val(&acquisition);
    println!("an acquisition's future: {size} bytes");
    assert!(size <= 800, "an acquisition's future is {size} bytes");
}

/// A caller that has left (`stop` completed) ends a waiting acquisition,
/// whichever way it waits: `stop` is a future that must not be polled
/// again once complete. Before the fix, an attempt refused for it (the
/// caller left while the attempt waited for admission) looped back into the
/// wait, which polled `stop` again: a panic in the acquisition's task (a
/// Campaign half-closed at once found it).
#[tokio::test(start_paused = true)]
async fn a_waiting_acquisition_whose_caller_left_ends_cancelled() {
    for wake_on_release in [true, false] {
        let fakes = fake::five();
        let mut settings = settings(MS(50));
        settings.wake_on_release = wake_on_release;
        let engine = Redlock::new(fake::as_nodes(&fakes), settings).expect("five masters");
        let holder = Arc::new(Holder::session("owner", "replica"));
        let outcome = engine
            .acquire_until_stopped(
                RESOURCE,
                None,
                TTL,
                Duration::from_secs(1),
                &holder,
                std::future::ready(()),
            )
            .await;
        assert!(
            matches!(outcome, Err(LockError::Cancelled)),
            "{wake_on_release}: {outcome:?}"
        );
        let resources = [RESOURCE.to_owned(), format!("{RESOURCE}/2")];
        let outcome = engine
            .acquire_multi_until_stopped(
                &resources,
                TTL,
                Duration::from_secs(1),
                &holder,
                std::future::ready(()),
            )
            .await;
        assert!(
            matches!(outcome, Err(LockError::Cancelled)),
            "several resources, {wake_on_release}: {outcome:?}"
        );
    }
}

/// An acquisition with a request id goes straight to its attempt (no
/// Extend round first: the masters answer "own token" only when an earlier
/// acquisition of the request id holds the key); a retry of it finds its
/// own token's key, takes the lock over with one Extend and answers the
/// same lock, fence included.
#[tokio::test(start_paused = true)]
async fn a_request_id_resumes_lazily() {
    let c = cluster();
    let id = RequestId::parse("Lz7-q_7wLm2Pn9Rt4Vx8Yc").expect("a request id");
    let acquire = || {
        c.engine.acquire_detached_as(
            RESOURCE.to_owned(),
            Some(&id),
            TTL,
            NO_WAIT,
            Holder::unary("owner"),
        )
    };
    let first = acquire().await.expect("granted");
    let extends = |c: &Cluster| {
        c.fakes
            .iter()
            .flat_map(|fake| fake.calls())
            .filter(|call| call.op == Op::Extend)
            .count()
    };
    assert_eq!(extends(&c), 0, "no Extend round before the first attempt");
    let again = acquire().await.expect("the same lock");
    assert_eq!((&again.token, again.fence), (&first.token, first.fence));
    assert_eq!(extends(&c), 5, "one Extend round took the lock over");
    assert_ne!(again.epoch, first.epoch, "the retry's own epoch");
}
