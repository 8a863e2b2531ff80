//! The whole engine driven by in-memory fake masters under tokio's paused
//! clock, so every timing below is exact: a `Slow` master answers after
//! exactly its delay, `node_timeout` fires exactly, and an operation against
//! instant masters takes exactly zero time.
//!
//! [`FakeNode`] implements the semantics of the Lua scripts in
//! `crate::node::scripts` on a `HashMap`, and applies each command when the
//! engine issues it, before any delay: a real master receives every command
//! of a round (the engine polls them all while it waits on the network), and
//! a command whose reply comes too late has still taken effect.

use super::fence::FenceRead;
use super::*;
use futures::future::{self, BoxFuture, FutureExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const MS: fn(u64) -> Duration = Duration::from_millis;
const TTL: Duration = Duration::from_secs(10);
const DRIFT: f64 = 0.01;
const RESOURCE: &str = "orders/42";
const NO_WAIT: Duration = Duration::ZERO;
const ALL: [usize; 5] = [0, 1, 2, 3, 4];

/// How a fake master answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Applies the command and answers at once.
    Up,
    /// Answers `Unavailable` at once and applies nothing.
    Down,
    /// Applies the command at once, answers after the delay.
    Slow(Duration),
}

/// The five commands of [`Node`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Acquire,
    CommitFence,
    Extend,
    Recreate,
    Release,
    Check,
}

/// One command a fake master received.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    op: Op,
    token: String,
    /// Whether it took effect / found the token (granted, committed,
    /// extended, deleted, held); always false while `Down`.
    hit: bool,
}

/// The fence hash of one resource.
#[derive(Debug, Clone)]
struct FenceHash {
    max: u64,
    holder: Option<String>,
    fence: Option<u64>,
    expiry: Instant,
}

#[derive(Debug, Default)]
struct State {
    /// Lock key -> (token, expiry).
    locks: HashMap<String, (String, Instant)>,
    /// Fence key -> hash.
    fences: HashMap<String, FenceHash>,
    calls: Vec<Call>,
}

impl State {
    /// Drops what has expired by `now` (a key is gone once its expiry is reached).
    fn purge(&mut self, now: Instant) {
        self.locks.retain(|_, (_, expiry)| *expiry > now);
        self.fences.retain(|_, hash| hash.expiry > now);
    }

    fn holds(&self, keys: &LockKeys, token: &Token) -> bool {
        self.locks
            .get(&keys.lock)
            .is_some_and(|(held, _)| held == token.expose())
    }
}

/// Whole milliseconds, as `PX`, `PEXPIRE` and `PTTL` count them.
fn whole_millis(d: Duration) -> Duration {
    MS(u64::try_from(d.as_millis()).expect("durations in tests fit in u64 ms"))
}

/// An in-memory master.
struct FakeNode {
    name: String,
    behaviour: Mutex<Behaviour>,
    state: Mutex<State>,
    /// The fake wall clock reads `wall_at_epoch + (now - epoch)`.
    epoch: Instant,
    wall_at_epoch: u64,
}

impl FakeNode {
    /// A healthy master whose wall clock is `skew_ms` off a common base.
    fn new(name: String, skew_ms: i64) -> FakeNode {
        const BASE_MICROS: i64 = 1_700_000_000_000_000;
        FakeNode {
            name,
            behaviour: Mutex::new(Behaviour::Up),
            state: Mutex::new(State::default()),
            epoch: Instant::now(),
            wall_at_epoch: u64::try_from(BASE_MICROS + skew_ms * 1_000).expect("positive"),
        }
    }

    fn set(&self, behaviour: Behaviour) {
        *self.behaviour.lock().expect("behaviour lock") = behaviour;
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake state lock")
    }

    /// `TIME` in microseconds.
    fn wall_micros(&self) -> u64 {
        let since = u64::try_from((Instant::now() - self.epoch).as_micros()).expect("fits");
        self.wall_at_epoch + since
    }

    /// The token holding `keys` here now, if any.
    fn holder(&self, keys: &LockKeys) -> Option<String> {
        let mut state = self.state();
        state.purge(Instant::now());
        state.locks.get(&keys.lock).map(|(token, _)| token.clone())
    }

    /// Plants a lock held by `token` for `ttl`, as another client would.
    fn hold(&self, keys: &LockKeys, token: &Token, ttl: Duration) {
        let expiry = Instant::now() + whole_millis(ttl);
        self.state()
            .locks
            .insert(keys.lock.clone(), (token.expose().to_owned(), expiry));
    }

    /// The `max` field of the fence hash (0 when absent).
    fn fence_max(&self, keys: &LockKeys) -> u64 {
        let mut state = self.state();
        state.purge(Instant::now());
        state.fences.get(&keys.fence).map_or(0, |hash| hash.max)
    }

    fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// Receives one command: records it, applies it unless down, and answers
    /// according to the behaviour.
    fn serve<T: Send + 'static>(
        &self,
        op: Op,
        token: &Token,
        command: impl FnOnce(&mut State, Instant) -> (T, bool),
    ) -> BoxFuture<'static, Result<T, NodeError>> {
        let behaviour = *self.behaviour.lock().expect("behaviour lock");
        let mut state = self.state();
        let token = token.expose().to_owned();
        if behaviour == Behaviour::Down {
            state.calls.push(Call {
                op,
                token,
                hit: false,
            });
            let error = NodeError::Unavailable(format!("{} is down", self.name));
            return future::ready(Err(error)).boxed();
        }
        let now = Instant::now();
        state.purge(now);
        let (answer, hit) = command(&mut state, now);
        state.calls.push(Call { op, token, hit });
        match behaviour {
            Behaviour::Slow(delay) => async move {
                tokio::time::sleep(delay).await;
                Ok(answer)
            }
            .boxed(),
            Behaviour::Up | Behaviour::Down => future::ready(Ok(answer)).boxed(),
        }
    }
}

impl Node for FakeNode {
    fn name(&self) -> &str {
        &self.name
    }

    fn acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
    ) -> BoxFuture<'static, Result<AcquireVote, NodeError>> {
        let now_micros = self.wall_micros();
        self.serve(Op::Acquire, token, |state, now| {
            if let Some((_, expiry)) = state.locks.get(&keys.lock) {
                let holder_ttl = Some(whole_millis(*expiry - now));
                return (AcquireVote::Refused { holder_ttl }, false);
            }
            let expiry = now + whole_millis(ttl);
            state
                .locks
                .insert(keys.lock.clone(), (token.expose().to_owned(), expiry));
            let max = state.fences.get(&keys.fence).map_or(0, |hash| hash.max);
            (AcquireVote::Granted(FenceRead { max, now_micros }), true)
        })
    }

    fn commit_fence(
        &self,
        keys: &LockKeys,
        token: &Token,
        fence: u64,
        fence_ttl: Duration,
        _ttl: Duration,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        self.serve(Op::CommitFence, token, |state, now| {
            if !state.holds(keys, token) {
                return (false, false);
            }
            let hash = state.fences.entry(keys.fence.clone()).or_insert(FenceHash {
                max: 0,
                holder: None,
                fence: None,
                expiry: now,
            });
            hash.max = hash.max.max(fence);
            hash.holder = Some(token.expose().to_owned());
            hash.fence = Some(fence);
            hash.expiry = now + whole_millis(fence_ttl);
            (true, true)
        })
    }

    fn extend(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
    ) -> BoxFuture<'static, Result<ExtendVote, NodeError>> {
        self.serve(Op::Extend, token, |state, now| {
            if !state.locks.contains_key(&keys.lock) {
                return (ExtendVote::Missing, false);
            }
            if !state.holds(keys, token) {
                return (ExtendVote::NotHeld, false);
            }
            if let Some((_, expiry)) = state.locks.get_mut(&keys.lock) {
                *expiry = now + whole_millis(ttl);
            }
            let fence = state.fences.get_mut(&keys.fence).and_then(|hash| {
                hash.expiry = now + whole_millis(fence_ttl);
                let ours = hash.holder.as_deref() == Some(token.expose());
                hash.fence.filter(|&f| ours && f > 0)
            });
            (ExtendVote::Extended { fence }, true)
        })
    }

    fn recreate(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        self.serve(Op::Recreate, token, |state, now| {
            if state.locks.contains_key(&keys.lock) {
                return (false, false);
            }
            let expiry = now + whole_millis(ttl);
            state
                .locks
                .insert(keys.lock.clone(), (token.expose().to_owned(), expiry));
            (true, true)
        })
    }

    fn release(
        &self,
        keys: &LockKeys,
        token: &Token,
        _notice: &str,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        self.serve(Op::Release, token, |state, _| {
            let deleted = state.holds(keys, token);
            if deleted {
                state.locks.remove(&keys.lock);
            }
            (deleted, deleted)
        })
    }

    fn check(
        &self,
        keys: &LockKeys,
        token: &Token,
    ) -> BoxFuture<'static, Result<Option<Duration>, NodeError>> {
        self.serve(Op::Check, token, |state, now| {
            let pttl = state
                .locks
                .get(&keys.lock)
                .filter(|(held, _)| held == token.expose())
                .map(|(_, expiry)| whole_millis(*expiry - now));
            (pttl, pttl.is_some())
        })
    }
}

/// Five fake masters behind one engine.
struct Cluster {
    fakes: Vec<Arc<FakeNode>>,
    engine: Arc<Redlock>,
    keys: LockKeys,
}

fn settings(node_timeout: Duration) -> Settings {
    Settings {
        key_prefix: "t:".into(),
        node_timeout,
        drift_factor: DRIFT,
        retry: RetryPolicy {
            min: MS(5),
            max: MS(20),
        },
        fence_ttl: Duration::from_secs(3600),
        wake_on_release: true,
        wait_fallback: Duration::from_secs(1),
        max_waiters_per_resource: 1_000,
        max_waiters: 100_000,
    }
}

/// Five healthy masters with `node_timeout` 50 ms.
fn cluster() -> Cluster {
    cluster_with(MS(50))
}

fn cluster_with(node_timeout: Duration) -> Cluster {
    // Skewed wall clocks, so that no fence can lean on the clock alone.
    let skews_ms = [0, 2_000, -3_000, 1_000, -1_000];
    let fakes: Vec<Arc<FakeNode>> = skews_ms
        .iter()
        .enumerate()
        .map(|(i, &skew)| Arc::new(FakeNode::new(format!("fake{i}"), skew)))
        .collect();
    let nodes: Vec<Arc<dyn Node>> = fakes
        .iter()
        .map(|fake| Arc::clone(fake) as Arc<dyn Node>)
        .collect();
    let engine = Redlock::new(nodes, settings(node_timeout)).expect("five masters");
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
