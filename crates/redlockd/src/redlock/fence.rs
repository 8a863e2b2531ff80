//! Fencing tokens: every grant of a resource carries a number strictly greater
//! than the fence of every earlier grant of it, across all daemon replicas.
//!
//! # Design
//!
//! Each master keeps, next to the lock key, a fence hash (see
//! [`super::keys::LockKeys`]) whose field `max` is the largest fence that
//! master has seen committed for the resource. A grant takes one round in
//! the common case, two otherwise:
//!
//! 1. *Acquire with a proposal*: the engine proposes a fence `F`
//!    ([`Proposer`]): above every fence it proposed before, and about the
//!    masters' wall clock in microseconds plus a lead. The script that
//!    performs `SET lock token NX PX ttl` returns the master's old `max` and
//!    its `TIME`, atomically with the SET; where the SET succeeded *and*
//!    `old max < F` *and* `TIME <= F <= TIME + window` ([`Proposal`]), it
//!    also writes `max = F`, `holder = token`, `fence = F` and the hash's
//!    expiry, raises the horizon to the lock's ttl, and says it *took* the
//!    proposal. If every master of the counted granting quorum took it
//!    ([`one_round`]), the grant's fence is `F` and there is no second
//!    round.
//! 2. *Commit* (the fallback: some counted master did not take `F`: its
//!    counter was at or above `F`, its clock outside the window, or the
//!    engine had nothing to propose yet): the engine picks
//!    `fence = max(max over the counted grants + 1, largest TIME)`, each
//!    `max` as the acquire left it (`F` where it was taken) ([`next_fence`]) and sends it to *every* master, not only those whose
//!    grant was counted. Each master writes it *only where our token still
//!    holds the lock*: one that refused, or whose SET did not land, answers
//!    no; one whose grant arrived after the acquire round was decided
//!    commits too, and can stand in for a granting master that fails now.
//!    The grant stands only once a quorum acknowledged the commit within
//!    `node_timeout`, and this round counts in `elapsed`; otherwise the
//!    attempt is released on every master.
//!
//! Why this is enough, with every kind of grant and after masters lose
//! their counters, and the assumptions it rests on (numbered, each with what
//! enforces it): `docs/design/fences.md`, the one home of the argument. In
//! short: a later conflicting grant's quorum shares a master with the
//! majority where the earlier fence was written while its key stood; there
//! it could only be admitted after that key was gone, so it read a counter
//! at least the earlier fence. Every kind (plain, shared, permit,
//! multi-resource) reads and raises the same counter per resource, `max`
//! in the resource's own fence hash. A master that lost its counters votes
//! again only [`clock_allowance`] after the last lock it may have held
//! ended, by which time the clock floor alone orders the next fence.
//!
//! Code-level notes the argument relies on:
//! - *One-round grants* (plain locks only): the proposal is taken only
//!   where `max < F` and `TIME <= F <= TIME + window`, atomically with the
//!   SET, and counted only if every master of the counted quorum took it
//!   ([`one_round`]); it raises the horizon there as a commit would. No
//!   proposal is made while any master is untrusted.
//! - *Stragglers and failed attempts* only ever raise counters (`max(max,
//!   F)`), costing numbers, never order; `F <= TIME + window` keeps them
//!   near the clock.
//! - *Several replicas* may propose the same `F`: the second grant finds
//!   `max >= F` on the master it shares with the first and falls back to
//!   `max + 1`.
//! - *The holder's record and terms* (`owner`, `kind`, `at`, `delay`, `nb`,
//!   `lu`, and the acquisition's epoch `ep`, `super::claim`) are written by
//!   the commit, or by the one-round acquire where it takes the proposal,
//!   in the same atomic step, so both paths leave one record.
//! - *Extend* reports the fence recorded beside the token only as
//!   [`vouched`] says: the one value the masters agree on, or a value a
//!   quorum reports.
//! - *Validity* counts from before the acquire round was sent on both
//!   paths.
//!
//! Fence hashes expire after `fence_ttl` (longer than any lock; refreshed by
//! every commit and extension, and by a one-round grant once per period of
//! fences, [`refresh_period`]) so resources never locked again do not leak
//! keys; after such an expiry the counter restarts from the masters' wall
//! clock, the floor. The fence stays below 2^53 until the year 2255, so
//! clients that hold numbers as IEEE doubles (JavaScript) read it exactly.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// What one granting master reported in the acquire round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceRead {
    /// The largest fence on this master for the resource before this
    /// acquire (0: none).
    pub max: u64,
    /// The master's wall-clock time in microseconds since the Unix epoch.
    pub now_micros: u64,
    /// Whether this master took the proposed fence: wrote it as `max` and
    /// as the holder's fence (so `max` was below it).
    pub took: bool,
}

/// A proposed fence, sent with every acquire (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// The proposed fence; 0 proposes nothing (no master takes it).
    pub fence: u64,
    /// A master takes the proposal only if `TIME <= fence <= TIME + window`.
    pub window: Duration,
    /// Expiry of the fence hash where the proposal is taken.
    pub fence_ttl: Duration,
}

impl Proposal {
    /// No proposal: the grant takes the commit round.
    pub const NONE: Proposal = Proposal {
        fence: 0,
        window: Duration::ZERO,
        fence_ttl: Duration::from_secs(1),
    };
}

/// How far a master's clock may be behind a proposal (on top of the lead)
/// and the proposal still taken: masters' clocks a little apart, and the
/// daemon's estimate of them a little stale.
const CLOCK_SLACK: Duration = Duration::from_secs(1);

/// How far ahead of a master's clock a proposal may be and still be taken
/// ([`Proposal::window`]), for proposals `lead` ahead of the estimate.
pub(crate) fn proposal_window(lead: Duration) -> Duration {
    lead * 2 + CLOCK_SLACK
}

/// How often, by the fences' own clock, a plain one-round grant renews its
/// fence hash's expiry: once per period of this length, at the first grant
/// whose fence falls in a new one (`FENCE_REFRESH_US` in the acquire
/// script), not at every grant. One `PEXPIRE` fewer per grant on each
/// master of a resource locked again and again (docs/benchmarks.md, "A
/// fence hash renewed once per period").
///
/// Only a renewal to this daemon's own `fence_ttl` counts: every renewal
/// records the value it renewed to in the hash (`ft`), and a grant whose
/// hash names another (a replica with a shorter setting renewed it last)
/// renews whatever the period.
///
/// Why it is safe: a fence is taken only within `window` of the master's
/// clock, so the grant that renewed the expiry was at most `period +
/// window` before any later grant of the same period, and the other
/// writers of `max` (the commits) and every extension renew it too. After any grant
/// the hash therefore has at least `fence_ttl - period - window` left. An
/// eighth of `fence_ttl`, only where `fence_ttl >= 2 x (outlived +
/// window)`: the hash then still outlives the lock and its delays
/// (`outlived`, what config validation holds `fence_ttl` above) and the
/// clock floor's window by far (docs/design/fences.md, A8). Otherwise one
/// microsecond: every grant's fence is in a new period, and every grant
/// renews the expiry, as before.
pub(crate) fn refresh_period(
    fence_ttl: Duration,
    outlived: Duration,
    window: Duration,
) -> Duration {
    match outlived
        .checked_add(window)
        .and_then(|sum| sum.checked_mul(2))
    {
        Some(needed) if fence_ttl >= needed => fence_ttl / 8,
        _ => Duration::from_micros(1),
    }
}

/// How long after a lock's end a master that lost its fence counters must
/// still sit out, so that the clock floor alone orders the next fence above
/// the lock's (assumption A5 of `docs/design/fences.md`): a fence is at
/// most [`proposal_window`] ahead of the clock of the master that took it,
/// and two trusted masters' clocks are at most 2 x `max_clock_offset` apart
/// (each within it of its daemon's host), plus one more for daemon hosts
/// that disagree by up to it. Every horizon a master keeps, and this
/// daemon's own (`crate::valkey::horizon`), is raised by this much beyond the
/// lock's ttl.
pub fn clock_allowance(node_timeout: Duration, max_clock_offset: Duration) -> Duration {
    proposal_window(node_timeout) + max_clock_offset * 3
}

/// Picks the fences this engine proposes: strictly increasing, and about the
/// masters' wall clock plus `lead`. The masters' clock is estimated from the
/// latest granting quorum's `TIME` readings, advanced on the engine's
/// monotonic clock (tokio's, so paused-clock tests see it move exactly).
#[derive(Debug)]
pub(crate) struct Proposer {
    /// When `offset` counts from.
    epoch: Instant,
    /// Masters' clock (µs) minus monotonic µs since `epoch`, once known.
    offset: AtomicI64,
    known: AtomicBool,
    /// The last fence proposed.
    last: AtomicU64,
    /// How far ahead of the estimated master clock a proposal is: at least
    /// the time a command takes to reach a master.
    lead: Duration,
    /// See [`Proposal::window`].
    window: Duration,
    fence_ttl: Duration,
    /// Proposals need `fence_ttl > window` (the clock floor, see the module doc).
    enabled: bool,
}

impl Proposer {
    /// Proposals `lead` ahead of the masters' clock (the engine uses
    /// `node_timeout`), for fence hashes that expire after `fence_ttl`.
    pub(crate) fn new(lead: Duration, fence_ttl: Duration) -> Proposer {
        let window = proposal_window(lead);
        Proposer {
            epoch: Instant::now(),
            offset: AtomicI64::new(0),
            known: AtomicBool::new(false),
            last: AtomicU64::new(0),
            lead,
            window,
            fence_ttl,
            enabled: fence_ttl > window,
        }
    }

    fn mono_micros(&self) -> i64 {
        i64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    /// The next proposal; [`Proposal::NONE`] before any master clock was
    /// seen, or when `propose` is false (a master is not trusted).
    pub(crate) fn propose(&self, propose: bool) -> Proposal {
        if !propose || !self.enabled || !self.known.load(Ordering::Relaxed) {
            return Proposal::NONE;
        }
        let lead = i64::try_from(self.lead.as_micros()).unwrap_or(i64::MAX);
        let estimate = self
            .offset
            .load(Ordering::Relaxed)
            .saturating_add(self.mono_micros())
            .saturating_add(lead);
        let floor = u64::try_from(estimate).unwrap_or(0);
        let mut last = self.last.load(Ordering::Relaxed);
        let fence = loop {
            let fence = floor.max(last.saturating_add(1));
            match self
                .last
                .compare_exchange_weak(last, fence, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break fence,
                Err(now) => last = now,
            }
        };
        Proposal {
            fence,
            window: self.window,
            fence_ttl: self.fence_ttl,
        }
    }

    /// Learns the masters' clock from a granting quorum's readings (the
    /// latest clock among them).
    pub(crate) fn observe(&self, reads: impl IntoIterator<Item = FenceRead>) {
        let Some(latest) = reads.into_iter().map(|r| r.now_micros).max() else {
            return;
        };
        let latest = i64::try_from(latest).unwrap_or(i64::MAX);
        self.offset
            .store(latest.saturating_sub(self.mono_micros()), Ordering::Relaxed);
        self.known.store(true, Ordering::Relaxed);
    }
}

/// Whether a grant whose counted quorum reported `reads` for `proposal` has
/// its fence without a commit round: every one of them took it.
pub(crate) fn one_round(proposal: Proposal, reads: impl IntoIterator<Item = FenceRead>) -> bool {
    proposal.fence > 0
        && reads
            .into_iter()
            .all(|read| read.took && read.max < proposal.fence)
}

/// The fence an Extend can vouch for, from the fences recorded beside the
/// token on the masters that extended it (`reports`; a master that lost
/// its record reports none): the one value if they all agree; else the
/// value a quorum of masters reported; else none.
///
/// Why not the largest: the attempts of one acquisition with a request id
/// share a token, and a failed attempt can leave its own fence beside the
/// token on a minority of masters (a commit that landed there before the
/// attempt gave up, its clean-up lost). That fence may be above the grant's
/// (it was proposed later), and a later holder's fence is only guaranteed
/// above the one on a majority: reporting the stray one would let a later
/// holder's fence be lower than the one this holder presents. The grant's
/// own fence is on a majority (its commit quorum, or the masters that took
/// its proposal), so when records disagree, only a value on a quorum is
/// the grant's. A token without a request id belongs to one attempt, whose
/// records all say the same.
pub(crate) fn vouched(reports: &[u64], quorum: super::Quorum) -> Option<u64> {
    let first = *reports.first()?;
    if reports.iter().all(|&fence| fence == first) {
        return Some(first);
    }
    reports
        .iter()
        .copied()
        .find(|&candidate| reports.iter().filter(|&&f| f == candidate).count() >= quorum.needed())
}

/// The fence for a two-round grant whose quorum reported `reads` for
/// `proposal`: above every counter as the acquire left it (the proposal
/// where it was taken), and no lower than the latest wall clock among them.
pub(crate) fn next_fence(proposal: Proposal, reads: impl IntoIterator<Item = FenceRead>) -> u64 {
    reads.into_iter().fold(1, |fence, read| {
        let counter = match read.took {
            true => read.max.max(proposal.fence),
            false => read.max,
        };
        fence.max(counter.saturating_add(1)).max(read.now_micros)
    })
}

#[cfg(test)]
mod tests;
