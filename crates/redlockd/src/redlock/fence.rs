//! Fencing tokens: every grant of a resource carries a number strictly greater
//! than the fence of every earlier grant of it, across all daemon replicas.
//!
//! # Design
//!
//! Each master keeps, next to the lock key, a fence hash (see
//! [`super::keys::LockKeys`]) whose field `max` is the largest fence that
//! master has seen committed for the resource. A grant works in two rounds:
//!
//! 1. *Acquire*: the script that performs `SET lock token NX PX ttl` also
//!    returns the master's `max` and its wall-clock time in microseconds
//!    (`TIME`), atomically with the SET.
//! 2. *Commit*: with a quorum of grants in hand, the engine picks
//!    `fence = max(max over the counted grants + 1, largest TIME)`
//!    ([`next_fence`]) and sends it to *every* master, not only those whose
//!    grant was counted. Each master writes it *only where our token still
//!    holds the lock*: one that refused, or whose SET did not land, answers
//!    no; one whose grant arrived after the acquire round was decided
//!    commits too, and can stand in for a granting master that fails now.
//!    The grant stands only once a quorum acknowledged the commit within
//!    `node_timeout`, and this round counts in `elapsed`; otherwise the
//!    attempt is released on every master.
//!
//! Why this is enough: let G1 be a grant that committed fence F1 on a majority
//! C1, and G2 any grant whose hold starts after G1's. G2's granting quorum Q2
//! shares a master m with C1. G1 committed on m while its key was on m, and
//! G2's SET NX on m succeeded only once that key was gone (it expired or was
//! released), so G2's read of `max` on m, atomic with its SET, already saw F1:
//! F2 > F1. Reading the per-master counters without the commit round is not
//! enough: two quorums can see different counters.
//!
//! Fence hashes expire after `fence_ttl` (longer than any lock; refreshed by
//! every commit and extension) so resources that are never locked again do
//! not leak keys. After such an expiry the counter restarts from the masters'
//! wall clock, which is why the fence has the clock as its floor: a fence is
//! about the master's time of grant in microseconds since the Unix epoch, so
//! a later grant starts above any fence handed out more than `fence_ttl` ago.
//!
//! Assumptions (Redlock's own, plus one): a majority of masters keep their
//! data; masters' wall clocks do not step back by more than `fence_ttl`. The
//! fence stays below 2^53 until the year 2255, so clients that hold numbers as
//! IEEE doubles (JavaScript) read it exactly.

/// What one granting master reported in the acquire round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceRead {
    /// The largest fence committed on this master for the resource (0: none).
    pub max: u64,
    /// The master's wall-clock time in microseconds since the Unix epoch.
    pub now_micros: u64,
}

/// The fence for a grant whose quorum reported `reads`: above every counter,
/// and no lower than the latest wall clock among them.
pub(crate) fn next_fence(reads: impl IntoIterator<Item = FenceRead>) -> u64 {
    reads.into_iter().fold(1, |fence, read| {
        fence.max(read.max.saturating_add(1)).max(read.now_micros)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(max: u64, now_micros: u64) -> FenceRead {
        FenceRead { max, now_micros }
    }

    /// The counter wins when it is ahead of the clock.
    #[test]
    fn counter_above_clock() {
        assert_eq!(next_fence([read(500, 10), read(7, 20)]), 501);
    }

    /// The clock wins after the fence hash expired (counter back at 0).
    #[test]
    fn clock_floor_after_expiry() {
        assert_eq!(next_fence([read(0, 1_000), read(0, 1_005)]), 1_005);
    }

    /// An empty read set still yields a valid (non-zero) fence.
    #[test]
    fn never_zero() {
        assert_eq!(next_fence([]), 1);
    }

    proptest! {
        /// The fence is strictly above every counter in the quorum.
        #[test]
        fn above_every_counter(reads in proptest::collection::vec((0u64..u64::MAX - 1, 0u64..1u64 << 53), 1..7)) {
            let fence = next_fence(reads.iter().map(|&(m, t)| read(m, t)));
            for (m, t) in reads {
                prop_assert!(fence > m);
                prop_assert!(fence >= t);
            }
        }
    }
}
