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
//! Why this is enough: let G1 be a grant whose fence F1 was written, while
//! its key was there, on a majority C1: the commit quorum of a two-round
//! grant, or the granting quorum of a one-round grant (each of its masters
//! wrote `max >= F1` in the same atomic step as the SET). Let G2 be any grant
//! whose hold starts after G1's. G2's granting quorum Q2 shares a master m
//! with C1. G2's SET NX on m succeeded only once G1's key was gone from m (it
//! expired or was released), so after F1 was written there, and G2's read of
//! `max` on m, atomic with its SET, saw at least F1. Then F2 > F1 either way:
//! a one-round G2 requires every old `max` of Q2 below F2; a two-round G2
//! takes one more than the largest counter of Q2 (`next_fence`). Reading the
//! per-master counters without writing them on a majority is not enough: two
//! quorums can see different counters.
//!
//! The cases the one-round path must survive (issue 16), each checked:
//! - *Restart without data.* Same as with two rounds: the restarted master
//!   lost the key and the counter together, and stays out of quorums until
//!   every lock that may have lived on it has expired (restart quarantine,
//!   `crate::node::horizon`). Since a one-round grant stands without a
//!   commit, the acquire raises the horizon (and the daemon's local horizon)
//!   where it took the proposal, as the commit does; a master that took it
//!   for an attempt that then failed holds a horizon a ttl too long, which
//!   only lengthens a quarantine. No proposal is made while any master is
//!   untrusted, so that attempts turned away during a restart quarantine do
//!   not lengthen the next one.
//! - *Stragglers.* A master whose acquire answers after the round was
//!   decided is not in the counted quorum; the argument uses only the
//!   counted quorum. What it wrote is `max(max, F)` where its SET succeeded:
//!   counters only grow, so no later fence is lowered. A late two-round
//!   commit still goes to every master, as before.
//! - *Failed attempts that raised counters.* An attempt short of a quorum (or
//!   one that falls back and fails its commit) may leave `max = F` on some
//!   masters. Counters only grow; later grants take fences above them, so
//!   this costs numbers, never order. Because `F` is bounded by the master's
//!   clock (`F <= TIME + window`), such leftovers cannot push fences far
//!   ahead of the clock.
//! - *Several daemon replicas.* The argument is per master and per grant;
//!   it never compares proposals of different daemons. Two replicas may
//!   propose the same `F`: the second grant then finds `max >= F` on the
//!   master it shares with the first and falls back to `max + 1`.
//! - *Clock-floored proposals.* `F` is taken as a fence only where
//!   `TIME <= F` on every counted master, so the clock floor below holds
//!   for one-round fences too; and `F <= TIME + window` keeps them within
//!   `window` of a master's clock, so the floor argument needs
//!   `fence_ttl > window` (the engine proposes nothing otherwise). A daemon
//!   whose estimate of the masters' clock is off just falls back.
//! - *A key that expired before the commit reached it* (fallback path):
//!   unchanged, the commit is refused there and counts as a no. On the
//!   one-round path there is no commit to arrive late: `F` is written in
//!   the same atomic step as the SET. The grant's validity still counts
//!   from before the acquire round was sent.
//! - *Validity* still counts from before the acquire round was sent; a
//!   one-round grant's is longer by the round it skips, and is as true as
//!   before: every counted key was set after that instant with the full ttl.
//!   (A client that counts it from the answer's arrival instead of from its
//!   request's send, against the README's advice, overstates it by the
//!   answer's transit; with a grant one round sooner after a key's expiry,
//!   such a client's margin is one round smaller than before.)
//! - *Extend* reports the largest `fence` recorded for the token among the
//!   masters that extended: `F` where the proposal was taken, the committed
//!   fence (always greater than `F`) where a fallback commit landed.
//! - *The holder's record and the grant's terms* (issue 18: `owner`, `kind`,
//!   `at`, `lock_delay`, `hold_at_least`). The commit records them beside
//!   the token; a one-round grant has no commit, so the acquire writes the
//!   very same fields where it takes the proposal, under the same condition
//!   (our token holds the key: its SET just succeeded), in the same atomic
//!   step (`crate::node::scripts::ACQUIRE`). `Inspect`, `List`, the
//!   lock-delay and the hold-at-least therefore read one record whichever
//!   path fixed the fence; `at` and the delay's not-before time count from
//!   the acquire's instant, the key's own start, so `nb` is exactly the
//!   key's expiry plus the delay. The not-before check of a lock-delay runs
//!   before the SET, so a one-round grant never skips it. A failed attempt
//!   that took the proposal on a minority leaves its record and `nb` there
//!   until its clean-up release, which deletes its key and clears `nb`;
//!   where that release is lost, the master refuses the resource until its
//!   key expires plus the delay: availability on a minority, as a failed
//!   commit's leftovers, never exclusion.
//! - *Request ids* (issue 22): all attempts of one acquisition share one
//!   derived token. A failed attempt's key that outlived its clean-up on
//!   some master refuses the next attempt's SET there, which is then not
//!   counted; without a commit, that master keeps the failed attempt's
//!   record. See `Redlock::acquire_detached_as` for why that costs at worst
//!   liveness, never two writers.
//! - *Other kinds* (issue 19): a semaphore's permit, a shared grant and a
//!   lock on several resources take no proposal (their scripts answer
//!   without `took`, read as not taken), so they always commit with
//!   `max + 1` as before; one-round grants are the plain lock's only. The
//!   plain acquire still checks the semaphore's limit first (the fence
//!   hash's `lim`, read by the same `HMGET` as `max`), and a one-round
//!   plain grant on a resource with shared holders cannot happen: the
//!   sentinel in the lock key refuses its `SET NX`. A plain grant's fence
//!   taken in one round is written to the same `max` that shared grants'
//!   commits raise, so the argument above covers conflicts between them.
//!
//! Fence hashes expire after `fence_ttl` (longer than any lock; refreshed by
//! every commit and extension) so resources that are never locked again do
//! not leak keys. After such an expiry the counter restarts from the masters'
//! wall clock, which is why the fence has the clock as its floor: a fence is
//! about the master's time of grant in microseconds since the Unix epoch, so
//! a later grant starts above any fence handed out more than `fence_ttl` ago.
//!
//! Assumptions (Redlock's own, plus one): a majority of masters keep their
//! data; masters' wall clocks do not step back by more than `fence_ttl`
//! minus the proposal window. The
//! fence stays below 2^53 until the year 2255, so clients that hold numbers as
//! IEEE doubles (JavaScript) read it exactly.

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
        let window = lead * 2 + CLOCK_SLACK;
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(max: u64, now_micros: u64) -> FenceRead {
        FenceRead {
            max,
            now_micros,
            took: false,
        }
    }

    fn took(max: u64, now_micros: u64) -> FenceRead {
        FenceRead {
            took: true,
            ..read(max, now_micros)
        }
    }

    fn proposal(fence: u64) -> Proposal {
        Proposal {
            fence,
            ..Proposal::NONE
        }
    }

    /// The counter wins when it is ahead of the clock.
    #[test]
    fn counter_above_clock() {
        assert_eq!(
            next_fence(Proposal::NONE, [read(500, 10), read(7, 20)]),
            501
        );
    }

    /// The clock wins after the fence hash expired (counter back at 0).
    #[test]
    fn clock_floor_after_expiry() {
        assert_eq!(
            next_fence(Proposal::NONE, [read(0, 1_000), read(0, 1_005)]),
            1_005
        );
    }

    /// An empty read set still yields a valid (non-zero) fence.
    #[test]
    fn never_zero() {
        assert_eq!(next_fence(Proposal::NONE, []), 1);
    }

    /// One round only when every counted master took the proposal.
    #[test]
    fn one_round_needs_every_master() {
        let p = proposal(1_000);
        assert!(one_round(p, [took(5, 990), took(999, 995), took(0, 998)]));
        assert!(!one_round(
            p,
            [took(5, 990), read(1_200, 995), took(0, 998)]
        ));
        assert!(!one_round(Proposal::NONE, [took(0, 0)]));
    }

    /// The fallback fence is above a proposal some masters took.
    #[test]
    fn fallback_above_taken_proposal() {
        let p = proposal(1_000);
        assert_eq!(next_fence(p, [took(5, 990), read(1_200, 995)]), 1_201);
        assert_eq!(next_fence(p, [took(5, 990), read(20, 995)]), 1_001);
    }

    /// Proposals strictly increase and follow the observed clock plus the lead.
    #[tokio::test(start_paused = true)]
    async fn proposals_increase_from_the_observed_clock() {
        let proposer = Proposer::new(Duration::from_millis(50), Duration::from_secs(3600));
        assert_eq!(proposer.propose(true), Proposal::NONE);
        proposer.observe([read(0, 1_000_000), read(0, 2_000_000)]);
        let first = proposer.propose(true).fence;
        assert_eq!(first, 2_050_000);
        assert_eq!(proposer.propose(true).fence, first + 1);
        assert_eq!(proposer.propose(false), Proposal::NONE);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(proposer.propose(true).fence, 3_050_000);
        // A clock read that went back never lowers proposals.
        proposer.observe([read(0, 10)]);
        assert_eq!(proposer.propose(true).fence, 3_050_001);
    }

    /// A fence ttl within the window disables proposals.
    #[test]
    fn short_fence_ttl_proposes_nothing() {
        let proposer = Proposer::new(Duration::from_millis(50), Duration::from_millis(500));
        proposer.observe([read(0, 1_000_000)]);
        assert_eq!(proposer.propose(true), Proposal::NONE);
    }

    proptest! {
        /// The fence is strictly above every counter in the quorum, the
        /// proposal where taken, and no lower than any clock.
        #[test]
        fn above_every_counter(
            reads in proptest::collection::vec((0u64..u64::MAX - 1, 0u64..1u64 << 53, any::<bool>()), 1..7),
            fence in 0u64..1u64 << 53,
        ) {
            let p = proposal(fence);
            let got = next_fence(p, reads.iter().map(|&(m, t, k)| FenceRead { max: m, now_micros: t, took: k }));
            for (m, t, k) in reads {
                prop_assert!(got > m);
                prop_assert!(got >= t);
                if k {
                    prop_assert!(got > fence);
                }
            }
        }
    }
}
