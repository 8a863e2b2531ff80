//! An in-memory master for tests: the engine's tests (`redlock::tests`) and
//! the handler tests (`service::tests`) drive the real engine over it, under
//! tokio's paused clock, so every timing is exact: a `Slow` master answers
//! after exactly its delay, `node_timeout` fires exactly, and an operation
//! against instant masters takes exactly zero time.
//!
//! [`FakeMaster`] implements the semantics of the Lua scripts in
//! `crate::valkey::scripts` on a `HashMap`, and applies each command when the
//! engine issues it, before any delay: a real master receives every command
//! of a round (the engine polls them all while it waits on the network), and
//! a command whose reply comes too late has still taken effect.

use super::claim::{Claim, Epoch};
use super::fence::{FenceRead, Proposal};
use super::{AcquireVote, ExtendVote, LockKeys, Master, NodeError, Token};
use futures::future::{self, BoxFuture, FutureExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How a fake master answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behaviour {
    /// Applies the command and answers at once.
    Up,
    /// Answers `Unavailable` at once and applies nothing.
    Down,
    /// Applies the command at once, answers after the delay.
    Slow(Duration),
    /// Stands for a command that waits `queued` in the daemon's own queue
    /// before its batch is sent, and is answered `answer` after the send.
    /// Applies the command at once (earlier than a real master would: its
    /// expiry is then earlier, never later, than the real one).
    Queued {
        /// Time in the daemon's queue before the send.
        queued: Duration,
        /// Time from the send to the answer.
        answer: Duration,
    },
}

/// The commands of [`Master`] a fake records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Acquire,
    CommitFence,
    Extend,
    Recreate,
    Release,
    Check,
    Proclaim,
}

/// One command a fake master received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) op: Op,
    pub(crate) token: String,
    /// Whether it took effect / found the token (granted, committed,
    /// extended, deleted, held); always false while `Down`.
    pub(crate) hit: bool,
}

/// The fence hash of one resource.
#[derive(Debug, Clone)]
pub(crate) struct FenceHash {
    max: u64,
    holder: Option<String>,
    fence: Option<u64>,
    /// The committed grant's owner and kind ([`super::Holder`]).
    owner: String,
    kind: String,
    /// The owner's version (`Proclaim`), 0 as granted.
    version: u64,
    /// The epoch recorded with the holder (`super::claim`), as the
    /// scripts keep it in `ep`.
    epoch: Option<Epoch>,
    expiry: Instant,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    /// Lock key -> (token, expiry).
    pub(crate) locks: HashMap<String, (String, Instant)>,
    /// Fence key -> hash.
    pub(crate) fences: HashMap<String, FenceHash>,
    pub(crate) calls: Vec<Call>,
}

impl State {
    /// Whether `token`'s record names an epoch other than `epoch` (an
    /// acquisition of its request id took the lock over), as the scripts
    /// check `ep`; never without an epoch to compare.
    fn superseded(&self, keys: &LockKeys, token: &Token, epoch: Option<Epoch>) -> bool {
        let Some(epoch) = epoch else { return false };
        self.fences.get(&keys.fence).is_some_and(|hash| {
            hash.holder.as_deref() == Some(token.expose())
                && hash.epoch.is_some_and(|recorded| recorded != epoch)
        })
    }

    /// Records `epoch` with `token`'s holder record, as a take-over does
    /// (a record of another token becomes the token's, without a fence).
    fn take(&mut self, keys: &LockKeys, token: &Token, epoch: Epoch, now: Instant) {
        let hash = self.fences.entry(keys.fence.clone()).or_insert(FenceHash {
            max: 0,
            holder: None,
            fence: None,
            owner: String::new(),
            kind: String::new(),
            version: 0,
            epoch: None,
            expiry: now,
        });
        if hash.holder.as_deref() != Some(token.expose()) {
            hash.holder = Some(token.expose().to_owned());
            hash.fence = None;
        }
        hash.epoch = Some(epoch);
    }

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
pub(crate) fn whole_millis(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).expect("durations in tests fit in u64 ms"))
}

/// An in-memory master.
pub(crate) struct FakeMaster {
    /// Its name in logs and assertions.
    pub(crate) name: String,
    behaviour: Mutex<Behaviour>,
    state: Mutex<State>,
    /// When set, the fake gives up on each command this long after its
    /// send, as the real master does ([`Master::bounds_own_commands`]).
    bound: Mutex<Option<Duration>>,
    /// The fake wall clock reads `wall_at_epoch + (now - epoch)`.
    epoch: Instant,
    wall_at_epoch: u64,
}

impl FakeMaster {
    /// A healthy master whose wall clock is `skew_ms` off a common base.
    pub(crate) fn new(name: String, skew_ms: i64) -> FakeMaster {
        const BASE_MICROS: i64 = 1_700_000_000_000_000;
        FakeMaster {
            name,
            behaviour: Mutex::new(Behaviour::Up),
            state: Mutex::new(State::default()),
            bound: Mutex::new(None),
            epoch: Instant::now(),
            wall_at_epoch: u64::try_from(BASE_MICROS + skew_ms * 1_000).expect("positive"),
        }
    }

    pub(crate) fn set(&self, behaviour: Behaviour) {
        *self.behaviour.lock().expect("behaviour lock") = behaviour;
    }

    /// Makes the fake time out each command `node_timeout` after its send
    /// (see [`Behaviour::Queued`]) and say so to the engine.
    pub(crate) fn bound_commands(&self, node_timeout: Duration) {
        *self.bound.lock().expect("bound lock") = Some(node_timeout);
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake state lock")
    }

    /// `TIME` in microseconds.
    pub(crate) fn wall_micros(&self) -> u64 {
        let since = u64::try_from((Instant::now() - self.epoch).as_micros()).expect("fits");
        self.wall_at_epoch + since
    }

    /// The token holding `keys` here now, if any.
    pub(crate) fn holder(&self, keys: &LockKeys) -> Option<String> {
        let mut state = self.state();
        state.purge(Instant::now());
        state.locks.get(&keys.lock).map(|(token, _)| token.clone())
    }

    /// Plants a lock held by `token` for `ttl`, as another client would.
    pub(crate) fn hold(&self, keys: &LockKeys, token: &Token, ttl: Duration) {
        let expiry = Instant::now() + whole_millis(ttl);
        self.state()
            .locks
            .insert(keys.lock.clone(), (token.expose().to_owned(), expiry));
    }

    /// The `max` field of the fence hash (0 when absent).
    pub(crate) fn fence_max(&self, keys: &LockKeys) -> u64 {
        let mut state = self.state();
        state.purge(Instant::now());
        state.fences.get(&keys.fence).map_or(0, |hash| hash.max)
    }

    /// Rewrites the record of `keys`' fence hash as a grant of `fence`
    /// whose owner is `owner` at `version` (a Proclaim that landed here, or
    /// a commit that did not); the hash must exist.
    pub(crate) fn set_record(&self, keys: &LockKeys, fence: u64, owner: &str, version: u64) {
        let mut state = self.state();
        let hash = state.fences.get_mut(&keys.fence).expect("a fence hash");
        (hash.fence, hash.owner, hash.version) = (Some(fence), owner.to_owned(), version);
    }

    /// The fence, owner and owner's version the record of `keys` keeps.
    pub(crate) fn record(&self, keys: &LockKeys) -> Option<(Option<u64>, String, u64)> {
        let state = self.state();
        let hash = state.fences.get(&keys.fence)?;
        Some((hash.fence, hash.owner.clone(), hash.version))
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
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
        let (queued, delay) = match behaviour {
            Behaviour::Slow(delay) => (Duration::ZERO, delay),
            Behaviour::Queued { queued, answer } => (queued, answer),
            Behaviour::Up | Behaviour::Down => return future::ready(Ok(answer)).boxed(),
        };
        let bound = *self.bound.lock().expect("bound lock");
        async move {
            tokio::time::sleep(queued).await;
            match bound {
                Some(timeout) if delay > timeout => {
                    tokio::time::sleep(timeout).await;
                    Err(NodeError::Timeout)
                }
                _ => {
                    tokio::time::sleep(delay).await;
                    Ok(answer)
                }
            }
        }
        .boxed()
    }
}

impl Master for FakeMaster {
    fn name(&self) -> &str {
        &self.name
    }

    fn bounds_own_commands(&self) -> bool {
        self.bound.lock().expect("bound lock").is_some()
    }

    fn acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        proposal: Proposal,
        _waiter_marker: Duration,
        holder: &super::Holder,
    ) -> BoxFuture<'static, Result<AcquireVote, NodeError>> {
        let now_micros = self.wall_micros();
        let (owner, kind) = (holder.owner.to_string(), holder.kind.to_string());
        let (resumable, epoch) = (holder.epoch.is_some(), holder.epoch);
        self.serve(Op::Acquire, token, |state, now| {
            if let Some((held_by, expiry)) = state.locks.get(&keys.lock) {
                if resumable && held_by == token.expose() {
                    // As the script: its own token's key, for a request id.
                    return (AcquireVote::Own, false);
                }
                let holder_ttl = Some(whole_millis(*expiry - now));
                return (
                    AcquireVote::Refused {
                        holder_ttl,
                        delayed: false,
                    },
                    false,
                );
            }
            let expiry = now + whole_millis(ttl);
            state
                .locks
                .insert(keys.lock.clone(), (token.expose().to_owned(), expiry));
            // The key was free: a record of the token is an ended
            // acquisition's, and takes this one's epoch (as the script).
            if let (Some(hash), Some(_)) = (state.fences.get_mut(&keys.fence), epoch) {
                if hash.holder.as_deref() == Some(token.expose()) {
                    hash.epoch = epoch;
                }
            }
            let max = state.fences.get(&keys.fence).map_or(0, |hash| hash.max);
            let window = u64::try_from(proposal.window.as_micros()).expect("fits");
            let f = proposal.fence;
            let took = f > max && f >= now_micros && f <= now_micros + window;
            if took {
                let hash = state.fences.entry(keys.fence.clone()).or_insert(FenceHash {
                    max: 0,
                    holder: None,
                    fence: None,
                    owner: String::new(),
                    kind: String::new(),
                    version: 0,
                    epoch: None,
                    expiry: now,
                });
                hash.owner = owner;
                hash.version = 0;
                hash.kind = kind;
                hash.max = f;
                hash.holder = Some(token.expose().to_owned());
                hash.fence = Some(f);
                hash.epoch = epoch;
                hash.expiry = now + whole_millis(proposal.fence_ttl);
            }
            let read = FenceRead {
                max,
                now_micros,
                took,
            };
            (AcquireVote::Granted(read), true)
        })
    }

    fn commit_fence(
        &self,
        keys: &LockKeys,
        token: &Token,
        fence: u64,
        fence_ttl: Duration,
        _ttl: Duration,
        holder: &super::Holder,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        let (owner, kind, epoch) = (
            holder.owner.to_string(),
            holder.kind.to_string(),
            holder.epoch,
        );
        self.serve(Op::CommitFence, token, |state, now| {
            if !state.holds(keys, token) || state.superseded(keys, token, epoch) {
                return (false, false);
            }
            let hash = state.fences.entry(keys.fence.clone()).or_insert(FenceHash {
                max: 0,
                holder: None,
                fence: None,
                owner: String::new(),
                kind: String::new(),
                version: 0,
                epoch: None,
                expiry: now,
            });
            hash.owner = owner;
            hash.version = 0;
            hash.kind = kind;
            hash.max = hash.max.max(fence);
            hash.holder = Some(token.expose().to_owned());
            hash.fence = Some(fence);
            hash.epoch = epoch;
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
        claim: Claim,
    ) -> BoxFuture<'static, Result<ExtendVote, NodeError>> {
        self.serve(Op::Extend, token, |state, now| {
            if !state.locks.contains_key(&keys.lock) {
                return (ExtendVote::Missing, false);
            }
            if !state.holds(keys, token) {
                return (ExtendVote::NotHeld, false);
            }
            match claim {
                Claim::Own(epoch) if state.superseded(keys, token, Some(epoch)) => {
                    return (ExtendVote::Superseded, false);
                }
                Claim::Take(epoch) => state.take(keys, token, epoch, now),
                _ => {}
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
        _fence_ttl: Duration,
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
        // The fakes model neither lock-delay nor hold-at-least (both live in
        // the masters' scripts; tests/lock_terms.rs runs them on real ones).
        _ending: super::Ending,
        epoch: Option<Epoch>,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        self.serve(Op::Release, token, |state, _| {
            let deleted = state.holds(keys, token) && !state.superseded(keys, token, epoch);
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

    fn proclaim(
        &self,
        keys: &LockKeys,
        token: &Token,
        term: u64,
        version: u64,
        value: &str,
    ) -> BoxFuture<'static, Result<Option<u64>, NodeError>> {
        let value = value.to_owned();
        self.serve(Op::Proclaim, token, |state, _| {
            if !state.holds(keys, token) {
                return (None, false);
            }
            match state.fences.get_mut(&keys.fence) {
                Some(hash)
                    if hash.holder.as_deref() == Some(token.expose())
                        && hash.fence == Some(term) =>
                {
                    if hash.version > version {
                        return (Some(hash.version), false);
                    }
                    if hash.version == version && hash.owner != value {
                        return (Some(version + 1), false);
                    }
                    hash.owner = value;
                    hash.version = version;
                    (Some(version), true)
                }
                _ => (Some(0), false),
            }
        })
    }

    /// Read only, answered at once (a `Slow` master's delay is not applied).
    fn inspect(
        &self,
        keys: &LockKeys,
    ) -> BoxFuture<'static, Result<Option<super::master::Seen>, NodeError>> {
        if *self.behaviour.lock().expect("behaviour lock") == Behaviour::Down {
            return future::ready(Err(NodeError::Unavailable(format!(
                "{} is down",
                self.name
            ))))
            .boxed();
        }
        let mut state = self.state();
        let now = Instant::now();
        state.purge(now);
        let seen = state.locks.get(&keys.lock).map(|(token, expiry)| {
            let record = state
                .fences
                .get(&keys.fence)
                .filter(|hash| hash.holder.as_deref() == Some(token.as_str()))
                .and_then(|hash| {
                    Some(super::master::Record {
                        fence: hash.fence?,
                        owner: hash.owner.clone(),
                        version: hash.version,
                        kind: hash.kind.clone(),
                        at_micros: 0,
                    })
                });
            super::master::Seen {
                token: token.clone(),
                pttl: whole_millis(*expiry - now),
                record,
            }
        });
        future::ready(Ok(seen)).boxed()
    }

    /// The whole keyspace in one step, filtered by a `prefix*` pattern only.
    fn scan(
        &self,
        pattern: &str,
        _cursor: u64,
        _count: usize,
    ) -> BoxFuture<'static, Result<(u64, Vec<String>), NodeError>> {
        let prefix = pattern.trim_end_matches('*');
        let mut state = self.state();
        state.purge(Instant::now());
        let keys = state
            .locks
            .keys()
            .filter(|key| key.starts_with(prefix))
            .cloned()
            .collect();
        future::ready(Ok((0, keys))).boxed()
    }
}

/// The engine settings every engine test starts from: `node_timeout` as
/// given, drift 1 %, short retry pauses, the default limits.
pub(crate) fn settings(node_timeout: Duration) -> super::Settings {
    super::Settings {
        key_prefix: "t:".into(),
        node_timeout,
        drift_factor: 0.01,
        retry: super::RetryPolicy {
            min: Duration::from_millis(5),
            max: Duration::from_millis(20),
        },
        fence_ttl: Duration::from_secs(3600),
        wake_on_release: true,
        wait_fallback: Duration::from_secs(1),
        max_waiters_per_resource: 1_000,
        max_waiters: 100_000,
        admission: super::AdmissionLimits {
            max_in_flight: 128,
            max_queued: 20_000,
        },
    }
}

/// Five healthy fake masters, named `fake0`..`fake4`, with skewed wall
/// clocks, so that no fence can lean on the clock alone.
pub(crate) fn five() -> Vec<Arc<FakeMaster>> {
    let skews_ms = [0, 2_000, -3_000, 1_000, -1_000];
    skews_ms
        .iter()
        .enumerate()
        .map(|(i, &skew)| Arc::new(FakeMaster::new(format!("fake{i}"), skew)))
        .collect()
}

/// `fakes` as the engine takes its masters.
pub(crate) fn as_nodes(fakes: &[Arc<FakeMaster>]) -> Vec<Arc<dyn Master>> {
    fakes
        .iter()
        .map(|fake| Arc::clone(fake) as Arc<dyn Master>)
        .collect()
}
