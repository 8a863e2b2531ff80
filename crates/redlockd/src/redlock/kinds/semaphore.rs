//! Semaphores: at most `limit` holders of a resource at once,
//! each with its own token and fence (`AcquireRequest.limit`; 0 or 1 is the
//! plain lock, unchanged).
//!
//! # Design: each permit is its own mutex
//!
//! A semaphore of limit L on resource R has L permits, numbered 0..L. Permit
//! `i` is an ordinary Redlock lock on keys of its own (the lock key and the
//! fence hash of R followed by the byte 0x1f and `i`, see
//! [`crate::redlock::keys`]). An acquisition attempt tries the permits one
//! after the other, in an order drawn at random per attempt, and each try is
//! exactly the plain lock's attempt ([`Redlock::attempt_once`]: acquire round,
//! fence commit round, clean-up on failure) on that permit's keys; the first
//! grant ends the attempt. The grant's token carries the permit's index
//! (`<token>.<i>`, see [`crate::redlock::Token::permit`]), so Extend, Release
//! and Validate, on any replica, find the permit's keys from (R, token) with no
//! shared state, and run unchanged. The index is public; the 128 random bits
//! before it remain the secret.
//!
//! # Safety: never more than L holders
//!
//! Each permit key is a mutex by the plain lock's argument (any two
//! majorities share a master, where `SET NX` lets only one token hold the
//! key at a time, within the lock's validity). A holder of the semaphore
//! holds one of the L permit keys, each by at most one holder at a time:
//! at most L holders. Nothing is counted per master, so the over-admission
//! of a per-master holder count (limit 2, five masters, three callers that
//! each win three masters while no master counts more than two) cannot
//! happen: two of those three callers would need the same permit key on
//! intersecting majorities.
//!
//! # The limit is part of the identity
//!
//! Permits of all limits share their keys by index, so a limit-3 caller
//! would take permit 2 beside two limit-2 holders: three holders where the
//! limit-2 callers count on two. Each master therefore keeps a limit record
//! per resource (the field `lim` of R's own fence hash, the limit of the
//! latest permit grant there: the plain acquire reads that hash anyway, so
//! the check costs it no command) and
//! refuses with a conflict, atomically with the `SET NX` attempt
//! (`crate::valkey::scripts::semaphore`):
//! - a permit where R's plain lock key exists, or where the record names
//!   another limit and a permit key of that limit exists;
//! - a plain lock where the record names a limit and one of its permit keys
//!   exists (`crate::valkey::scripts::ACQUIRE`).
//!
//! The same intersection argument gives: a grant under limit L and a grant
//! under another limit (or a plain lock) never overlap, because a master of
//! both majorities holds the earlier one's key when the later one asks, and
//! its record names the earlier one's limit (it is written with the permit
//! key, and outlives it: see below). When a majority answers conflict, the
//! caller gets [`LockError::LimitConflict`] (FAILED_PRECONDITION) at once,
//! even if it asked to wait; a minority of conflicts counts as refusals.
//!
//! The record outlives every permit key: a permit's grant and every
//! extension of a permit refresh R's fence hash to `fence_ttl`, which
//! config validation keeps above every lock's ttl (when the record was a
//! key of its own that only grants refreshed, so a permit
//! kept alive by Extends alone for longer than `fence_ttl` lost its record
//! and a request under another limit was then not refused;
//! `tests/semaphore.rs` covers it). A master that restarted empty lost the
//! record with the permit's key; the Extend that puts the key back
//! ([`crate::redlock::recreate`]) writes the record with it, from the limit the
//! permit's token carries (`<random>.<limit>.<index>`), and an extension
//! that finds the key without its record writes the record back. Without
//! that, a rolling restart of three masters while a permit is held (or one
//! restart, with two masters unreachable at the grant) let a plain lock
//! be granted beside the permit (`tests/semaphore.rs`,
//! `a_rolling_restart_keeps_a_permits_limit`). Residual: a record deleted
//! by hand (or the hash's whole key) while permits are held.
//!
//! # Fences: one sequence per resource
//!
//! A permit's fence comes from the resource's one fence sequence (`max` in R's
//! own fence hash), which plain, shared and multi-resource grants of R read and
//! raise too: its acquire reads R's `max` in the same step as its `SET NX`, and
//! its commit raises R's `max` where its key stands. So the plain lock's
//! argument ([`crate::redlock::fence`]) orders a permit's fence after every
//! earlier grant it excludes: a plain, shared or multi-resource holder of R, a
//! permit of another limit, and the earlier holder of the same permit. Permits
//! of one semaphore held at once are not ordered among themselves (two
//! concurrent grants can read the same `max` before either commits, and get
//! equal fences); they do not exclude each other, so no fence-checking resource
//! needs them ordered. (Before this, each permit counted in a hash of its own
//! with the masters' clock as its only floor, and a permit granted right after
//! a plain holder, whose one-round fence is a little ahead of the clock, got a
//! lower fence than it.)
//!
//! # Waiting
//!
//! Waiters queue per resource R, as for a plain lock: every permit's
//! release announces R, so any release wakes the front waiter, which tries
//! every permit again. A grant does not keep the next waiter waiting
//! behind it (other permits may be free): it moves up and tries at once.
//!
//! # Request ids
//!
//! An idempotent Acquire (`request_id`) derives its token from the request
//! id, before it knows which permit it gets; it is refused with `limit`
//! above 1 (INVALID_ARGUMENT), rather than half working.

use crate::redlock::admission::Admitted;
use crate::redlock::attempt::Failure;
use crate::redlock::keys::LockKeys;
use crate::redlock::round::Subject;
use crate::redlock::{Holder, Lock, LockError, Redlock, Token, WakeWaiters};
use rand::seq::SliceRandom;
use std::sync::Arc;
use std::time::Duration;

impl Redlock {
    /// One attempt at a permit of the semaphore of `holder.limit` on
    /// `resource`: tries each permit once, in random order, until one is
    /// granted. Fails with the first conflict (another limit holds the
    /// resource), else with an outage's error if any permit's try met one,
    /// else contended, with the earliest time a permit's holder frees up.
    /// A front waiter's `waiter_marker` sets the resource's waiter marker
    /// where a permit is held (see `crate::valkey::scripts::semaphore`).
    pub(in crate::redlock) async fn attempt_permit(
        &self,
        resource: &str,
        ttl: Duration,
        waiter_marker: Duration,
        holder: &Arc<Holder>,
        admitted: &Admitted<'_>,
        cleanup: WakeWaiters,
    ) -> Result<Lock, Failure> {
        let limit = holder.limit;
        let mut order: Vec<u32> = (0..limit).collect();
        order.shuffle(&mut rand::rng());
        let mut contended: Option<Failure> = None;
        let mut outage: Option<Failure> = None;
        for index in order {
            let subject = Arc::new(Subject {
                keys: LockKeys::permit(
                    &self.settings.key_prefix,
                    resource,
                    index,
                    (limit, self.settings.fence_ttl),
                ),
                resource: resource.to_owned(),
                token: Token::generate_permit(index, limit).map_err(LockError::from)?,
                epoch: None,
            });
            match self
                .attempt_once(&subject, ttl, waiter_marker, holder, admitted, cleanup)
                .await
            {
                Ok((fence, (validity, deadline))) => {
                    return Ok(Lock {
                        resource: resource.to_owned(),
                        token: subject.token.clone(),
                        fence,
                        validity,
                        deadline,
                        members: Vec::new(),
                        epoch: None,
                    })
                }
                Err(failure) => match failure.error {
                    LockError::LimitConflict => return Err(failure),
                    LockError::Contended(_) => {
                        contended = Some(earlier_free(contended, failure));
                    }
                    _ => outage = Some(failure),
                },
            }
        }
        Err(outage
            .or(contended)
            .unwrap_or_else(|| LockError::Internal("a semaphore without permits").into()))
    }
}

/// Of two contended failures, the one whose holder frees up first (an
/// unknown time counts as never).
fn earlier_free(kept: Option<Failure>, new: Failure) -> Failure {
    match kept {
        Some(kept) => match (kept.holder_free_in, new.holder_free_in) {
            (Some(a), Some(b)) if b < a => new,
            (None, Some(_)) => new,
            _ => kept,
        },
        None => new,
    }
}

#[cfg(test)]
mod tests;
