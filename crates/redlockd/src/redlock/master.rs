//! All the algorithm knows of a master: five atomic operations on one
//! resource's keys. The real implementation speaks to Valkey/Redis through
//! fred (`crate::valkey`); tests of the algorithm can drive fakes.
//!
//! An implementation should give up on a command after `node_timeout` by
//! itself, but need not: the engine stops waiting at its own deadline.
//!
//! Submission is synchronous: when a method returns, its command is queued
//! for the master (fred: in the master's batch queue), and commands to one
//! master reach it in the order the methods were called. The engine relies
//! on it to send a cleanup release only after the SETs it cleans up.
//! Dropping the returned future does not withdraw the command: a round stops
//! *listening* once decided, but a straggler's SET or PEXPIRE still lands
//! (a lock held on more masters than the quorum survives more losses).

use super::claim::{Claim, Epoch};
use super::fence::{FenceRead, Proposal};
use super::keys::LockKeys;
use super::token::Token;
use super::Holder;
use super::NodeError;
use futures::future::BoxFuture;
use std::time::Duration;

/// One master's answer to the acquire script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireVote {
    /// `SET NX PX` succeeded; the fence counter and clock read atomically with it.
    Granted(FenceRead),
    /// Someone else holds the key; its remaining time to live, when known.
    Refused {
        /// The holder's remaining PTTL on this master (or, when `delayed`,
        /// the time until its lock-delay ends).
        holder_ttl: Option<Duration>,
        /// The key was free, but a lock-delay still ran.
        delayed: bool,
    },
    /// The resource is held here under another limit (a plain lock where a
    /// semaphore's permit was asked, a semaphore of another limit, or a
    /// semaphore where a plain lock was asked; see `super::kinds::semaphore`).
    Conflict,
    /// The key is held by the acquisition's own token: an earlier
    /// acquisition with the same request id holds the lock (answered only
    /// to acquisitions with an epoch, `super::claim`).
    Own,
}

/// One master's answer to the all-or-none acquire of a lock on several
/// resources ([`Master::acquire_all`], `super::kinds::multi`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireAllVote {
    /// Every key was free and is now set; each resource's fence counter
    /// (in the order of the keys) and the clock, read atomically with it.
    Granted(Vec<FenceRead>),
    /// At least one key is held (or in a lock-delay); none was set.
    Refused {
        /// The longest time until this master is free of all of them, when
        /// known.
        holder_ttl: Option<Duration>,
        /// Only lock-delays stood in the way.
        delayed: bool,
    },
}

/// One master's answer to the extend script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendVote {
    /// The token held the key and its expiry was reset; the fence committed
    /// for this token on this master, when this master took part in the commit.
    Extended {
        /// The lock's fence, if this master recorded it.
        fence: Option<u64>,
    },
    /// Someone else holds the key here.
    NotHeld,
    /// The token holds the key, but another acquisition of its request id
    /// took the lock over (an own claim, see `super::claim`).
    Superseded,
    /// The key is gone here (the master restarted and lost it, or it expired).
    Missing,
}

/// What one master keeps of a resource's lock, as the inspect script reads
/// it (`crate::valkey::scripts::INSPECT`): for the operator's view only
/// ([`super::admin`]); the token never leaves the daemon.
#[derive(Clone, PartialEq, Eq)]
pub struct Seen {
    /// The token in the lock key.
    pub token: String,
    /// The lock key's remaining time to live.
    pub pttl: Duration,
    /// The fence hash's record of the latest commit, when it is this
    /// token's (absent: the record is another token's, or gone).
    pub record: Option<Record>,
}

/// The fence hash's record of a grant: what its commit wrote, or its
/// acquire where it took the proposed fence (a one-round grant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The grant's fence.
    pub fence: u64,
    /// The caller's `owner` label.
    pub owner: String,
    /// `unary`, or `hold:<replica>` for a session.
    pub kind: String,
    /// The master's clock at the commit (one-round: at the acquire),
    /// microseconds since the Unix epoch.
    pub at_micros: u64,
    /// The version of `owner`: 0 as granted, higher after each election
    /// leader's `Proclaim` (`super::proclaim`); a read keeps the owner of
    /// the highest version among the grant's records.
    pub version: u64,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seen")
            .field("token", &"<redacted>")
            .field("pttl", &self.pttl)
            .field("record", &self.record)
            .finish()
    }
}

/// How a release ends a grant's terms on a master (its hold-at-least and
/// lock-delay, [`Holder::with_terms`]). The delay is for a holder that did
/// not let go: writes it may still have in flight drain before anyone else
/// gets the lock (docs/api.md). So only a lock that ran out keeps it, and
/// a lock a session lost (its extensions failed) ran out: its holder was
/// told a validity, and may not even have read `lost`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The holder lets go (Release, a session's orderly end): before the
    /// grant's hold-at-least has run, the key is shortened to end then
    /// instead; the lock-delay ends.
    Released,
    /// Deleted now whatever the terms, and the lock-delay ended: an
    /// operator's ForceRelease, a grant nobody received, a failed
    /// attempt's keys.
    Forced,
    /// What is left of a lost lock once its last validity is over (an
    /// extension's keys on a minority): deleted now, its lock-delay kept.
    Lapsed,
}

/// A Valkey/Redis master as the Redlock algorithm sees it.
pub trait Master: Send + Sync {
    /// A short name for logs and metrics (never a password).
    fn name(&self) -> &str;

    /// Whether this master's answers count toward a quorum now: false while
    /// it is in restart quarantine (it may have lost its keys) or refused (a
    /// replica, a duplicate). Commands are still sent to it.
    fn trusted(&self) -> bool {
        true
    }

    /// Whether this master gives up on each command by itself
    /// `node_timeout` after the command was actually sent (written to the
    /// master), not after it was submitted. The real master does (its
    /// batches wait in the daemon's queue while earlier ones are in flight,
    /// `crate::valkey::batch`); when every master of the engine does, a round
    /// does not cut a command short at `node_timeout` from its own start,
    /// since that time may have been spent in the daemon's queue: it waits
    /// up to [`super::round::QUEUE_ALLOWANCE`] `node_timeout`s longer as a
    /// backstop. Validity still counts from before the first send.
    fn bounds_own_commands(&self) -> bool {
        false
    }

    /// Whether this master answered anything (a command, a batch, a PING)
    /// since `at`: a master silent since then is not kept silent by the
    /// daemon's own queue (see `super::round`). The default says yes, which
    /// only matters for masters that bound their own commands.
    fn answered_since(&self, at: tokio::time::Instant) -> bool {
        let _ = at;
        true
    }

    /// Whether this master is silent now with commands outstanding (one of
    /// them went `node_timeout` without any answer from it, and it has not
    /// answered since). The default says no.
    fn is_silent(&self) -> bool {
        false
    }

    /// `SET lock token NX PX ttl`, and on success read the fence counter and
    /// the master's clock in the same atomic step, and take the proposed
    /// fence where it fits (see [`super::fence`]): there it also records
    /// `holder` and the grant's terms, exactly as [`Master::commit_fence`]
    /// does, since a one-round grant has no commit. Where refused because
    /// the key is held, a non-zero `waiter_marker` sets the resource's
    /// waiter marker for that long, so that the holder's release publishes
    /// a notice (see [`Master::release`]). Refused with
    /// [`AcquireVote::Conflict`] where the resource is held under another
    /// limit than `keys.limit` (see `super::kinds::semaphore`).
    fn acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        proposal: Proposal,
        waiter_marker: Duration,
        holder: &Holder,
    ) -> BoxFuture<'static, Result<AcquireVote, NodeError>>;

    /// Sets every key of `keys` (a lock on several resources) to `token`
    /// with `ttl` if all of them are free, else none, in one atomic step;
    /// on success, each resource's fence counter and the clock. The
    /// default answers an error: only masters that implement it can serve
    /// such locks (the test fakes do not). Where refused because some are
    /// held, a non-zero `waiter_marker` sets each held resource's waiter
    /// marker for that long, as [`Master::acquire`] does.
    fn acquire_all(
        &self,
        keys: &[LockKeys],
        token: &Token,
        ttl: Duration,
        waiter_marker: Duration,
    ) -> BoxFuture<'static, Result<AcquireAllVote, NodeError>> {
        let _ = (keys, token, ttl, waiter_marker);
        Box::pin(async {
            Err(NodeError::Protocol(
                "this master does not take several resources at once".to_owned(),
            ))
        })
    }

    /// Records `fence` as the resource's fence (raising `max` if needed) and
    /// refreshes the fence hash's expiry, only if `token` holds the lock
    /// here, with the holder's `owner` and `kind` (see [`Record`]).
    /// Returns whether it did. `ttl` is the lock's: a grant stands
    /// only once a majority committed, so this is where a master learns
    /// that a lock was granted and how long it can live (the restart
    /// quarantine's horizon, `crate::valkey::horizon`).
    fn commit_fence(
        &self,
        keys: &LockKeys,
        token: &Token,
        fence: u64,
        fence_ttl: Duration,
        ttl: Duration,
        holder: &Holder,
    ) -> BoxFuture<'static, Result<bool, NodeError>>;

    /// Compare-and-PEXPIRE: resets the lock's expiry to `ttl` (and the fence
    /// hash's to `fence_ttl`) if `token` holds it, as `claim` allows
    /// (`super::claim`: an own claim is refused where another acquisition
    /// of the token took the lock over; a take records its epoch).
    fn extend(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
        claim: Claim,
    ) -> BoxFuture<'static, Result<ExtendVote, NodeError>>;

    /// `SET lock token NX PX ttl`: puts a lock that still holds on a majority
    /// back on a master that lost it; a semaphore permit's with its
    /// semaphore's limit record (the token's limit), in the resource's fence
    /// hash kept for at least `fence_ttl`. Returns whether it was set.
    fn recreate(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
    ) -> BoxFuture<'static, Result<bool, NodeError>>;

    /// Compare-and-delete; returns whether the token's key was deleted.
    /// Where it deleted and the resource's waiter marker is there (some
    /// replica has waiters: the field `wm` of [`LockKeys::base_fence`]),
    /// it also publishes
    /// `notice` on the release channel ([`LockKeys::channel`]), so waiters on
    /// every replica wake up. What becomes of the grant's hold-at-least and
    /// lock-delay is `ending`'s to say ([`Ending`]). With the releasing
    /// acquisition's `epoch`, nothing is
    /// deleted where another acquisition of the token took the lock over
    /// (`super::claim`); without, whatever the epoch (a client's Release).
    fn release(
        &self,
        keys: &LockKeys,
        token: &Token,
        notice: &str,
        ending: Ending,
        epoch: Option<Epoch>,
    ) -> BoxFuture<'static, Result<bool, NodeError>>;

    /// Publishes `notice` (an encoded leadership notice, `super::notices`) on
    /// the release notices' `channel`, for other replicas' observers of an
    /// election. Best effort, answered by nothing the engine waits for; the
    /// default publishes nothing (the test fakes have no pub/sub).
    fn announce(&self, channel: &str, notice: &str) -> BoxFuture<'static, Result<(), NodeError>> {
        let _ = (channel, notice);
        Box::pin(async { Ok(()) })
    }

    /// Replaces the owner recorded with `token`'s grant of fence `term`
    /// by `value`, as version `version`, unless the record keeps a higher
    /// one (an election leader's `Proclaim`, `super::proclaim`); touches
    /// nothing else. `None`: the token does not hold the lock here;
    /// `Some(kept)`: the version the record keeps after the call (`version`:
    /// this value is recorded; above: a newer value stays; 0: the token
    /// holds the key but no record of its grant of that term is kept here,
    /// nothing written). See `crate::valkey::scripts::PROCLAIM`.
    fn proclaim(
        &self,
        keys: &LockKeys,
        token: &Token,
        term: u64,
        version: u64,
        value: &str,
    ) -> BoxFuture<'static, Result<Option<u64>, NodeError>>;

    /// The lock's remaining PTTL here if `token` holds it, else `None`.
    fn check(
        &self,
        keys: &LockKeys,
        token: &Token,
    ) -> BoxFuture<'static, Result<Option<Duration>, NodeError>>;

    /// What this master keeps of the resource's lock, whoever holds it
    /// (`None`: no lock key). Read only.
    fn inspect(&self, keys: &LockKeys) -> BoxFuture<'static, Result<Option<Seen>, NodeError>>;

    /// One `SCAN cursor MATCH pattern COUNT count` step: the next cursor (0
    /// when done) and the keys found. Never `KEYS`.
    fn scan(
        &self,
        pattern: &str,
        cursor: u64,
        count: usize,
    ) -> BoxFuture<'static, Result<(u64, Vec<String>), NodeError>>;
}
