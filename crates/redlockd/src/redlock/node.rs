//! All the algorithm knows of a master: five atomic operations on one
//! resource's keys. The real implementation speaks to Valkey/Redis through
//! fred (`crate::node`); tests of the algorithm can drive fakes.
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

use super::fence::{FenceRead, Proposal};
use super::keys::LockKeys;
use super::token::Token;
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
        /// The holder's remaining PTTL on this master.
        holder_ttl: Option<Duration>,
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
    /// The key is gone here (the master restarted and lost it, or it expired).
    Missing,
}

/// A Valkey/Redis master as the Redlock algorithm sees it.
pub trait Node: Send + Sync {
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
    /// `crate::node::batch`); when every master of the engine does, a round
    /// does not cut a command short at `node_timeout` from its own start,
    /// since that time may have been spent in the daemon's queue: it waits
    /// up to [`super::round::QUEUE_ALLOWANCE`] `node_timeout`s longer as a
    /// backstop. Validity still counts from before the first send.
    fn bounds_own_commands(&self) -> bool {
        false
    }

    /// `SET lock token NX PX ttl`, and on success read the fence counter and
    /// the master's clock in the same atomic step, and take the proposed
    /// fence where it fits (see [`super::fence`]). Where refused, a
    /// non-zero `waiter_marker` sets the resource's waiter marker for that
    /// long, so that the holder's release publishes a notice (see
    /// [`Node::release`]).
    fn acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        proposal: Proposal,
        waiter_marker: Duration,
    ) -> BoxFuture<'static, Result<AcquireVote, NodeError>>;

    /// Records `fence` as the resource's fence (raising `max` if needed) and
    /// refreshes the fence hash's expiry, only if `token` holds the lock
    /// here. Returns whether it did. `ttl` is the lock's: a grant stands
    /// only once a majority committed, so this is where a master learns
    /// that a lock was granted and how long it can live (the restart
    /// quarantine's horizon, `crate::node::horizon`).
    fn commit_fence(
        &self,
        keys: &LockKeys,
        token: &Token,
        fence: u64,
        fence_ttl: Duration,
        ttl: Duration,
    ) -> BoxFuture<'static, Result<bool, NodeError>>;

    /// Compare-and-PEXPIRE: resets the lock's expiry to `ttl` (and the fence
    /// hash's to `fence_ttl`) if `token` holds it.
    fn extend(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
    ) -> BoxFuture<'static, Result<ExtendVote, NodeError>>;

    /// `SET lock token NX PX ttl`: puts a lock that still holds on a majority
    /// back on a master that lost it. Returns whether it was set.
    fn recreate(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
    ) -> BoxFuture<'static, Result<bool, NodeError>>;

    /// Compare-and-delete; returns whether the token's key was deleted.
    /// Where it deleted and the resource's waiter marker is there (some
    /// replica has waiters, [`LockKeys::waiters`]), it also publishes
    /// `notice` on the release channel ([`LockKeys::channel`]), so waiters on
    /// every replica wake up.
    fn release(
        &self,
        keys: &LockKeys,
        token: &Token,
        notice: &str,
    ) -> BoxFuture<'static, Result<bool, NodeError>>;

    /// The lock's remaining PTTL here if `token` holds it, else `None`.
    fn check(
        &self,
        keys: &LockKeys,
        token: &Token,
    ) -> BoxFuture<'static, Result<Option<Duration>, NodeError>>;
}
