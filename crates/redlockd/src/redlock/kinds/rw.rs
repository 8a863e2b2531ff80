//! Read-write locks: `AcquireRequest.mode` = `SHARED` grants a
//! read lock that coexists with other shared grants of the resource and
//! never with an exclusive one. `EXCLUSIVE` (0, the default) is today's
//! lock on today's key, unchanged for a resource nobody reads.
//!
//! # Design
//!
//! On each master (scripts: `crate::valkey::scripts::rw`):
//! - the shared holders of a resource are the members of a sorted set
//!   (`<prefix>readers:<resource>`, [`crate::redlock::keys`]) scored by their
//!   expiry in ms on the master's own clock (`TIME`); expired members are
//!   pruned by every shared script;
//! - while the set has an unexpired member, the resource's lock key holds
//!   the sentinel [`crate::redlock::keys::SHARED_SENTINEL`] (never a token) and
//!   expires no earlier than the latest member (every shared script
//!   re-covers it, or deletes it when the last member leaves). So the
//!   exclusive scripts need no change to respect readers: an exclusive
//!   `SET NX` fails while a shared holder holds, and no exclusive
//!   compare-and-expire/delete ever matches the sentinel;
//! - a shared grant on a master requires no exclusive token in the lock key
//!   (it may hold the sentinel) and no running writer-waiting marker;
//! - the mode travels in the token: a shared grant's token is `s` and 32 hex
//!   characters ([`crate::redlock::token::SHARED_PREFIX`]). Extend, Release and
//!   Validate carry only (resource, token): the token says which structure
//!   holds it, and [`crate::redlock::keys::LockKeys::for_token`] picks the
//!   shared scripts. Nothing else in the engine knows the mode: quorum,
//!   validity, the fence rounds, recreation after a master's loss, waiting,
//!   request ids (the derived token gets the prefix too) and Hold sessions run
//!   as for the mutex.
//!
//! # Safety: never an exclusive holder beside another holder
//!
//! A grant (either mode) stands only with a quorum Q of masters (a
//! majority) that granted it, within its validity, which Redlock computes
//! as for the mutex: the quorum-th remaining time minus elapsed time and
//! drift. While a grant G is valid, its entry (exclusive: its token in the
//! lock key; shared: its member, and with it the sentinel, which outlives
//! every member) stands on every master of Q, barring a master's data loss,
//! which the restart quarantine covers as for the mutex. Now let E be an
//! exclusive grant and G any other grant (shared or exclusive) whose
//! validity overlaps E's. Their quorums intersect in a master m (two
//! majorities of the same masters). On m, at the instant of the later of
//! the two acquire scripts, the earlier grant's entry stood:
//! - E later: E's `SET NX` found the lock key set (G's token, or the
//!   sentinel G's member keeps), so m refused E;
//! - G later and shared: its script found E's token in the lock key and
//!   refused;
//! - G later and exclusive: the mutex's own argument.
//!
//! So at most one of them has m, and one of the two quorums is not a
//! quorum: contradiction. Two shared grants need no exclusion and get none.
//!
//! # Fences
//!
//! Every grant, either mode, takes its fence from the resource's one counter
//! (`max` in the fence hash, `crate::redlock::fence`): the acquire script reads
//! `max` atomically with the grant, the engine picks one above the quorum's
//! reads, and the commit raises `max` where the grant stands. A shared grant
//! records its own fence beside its token (`r:<token>`) so an Extend reports
//! it. The fence module's argument carries over with "the key was gone" read as
//! "the entry conflicting with mine was gone": a grant G2 that conflicts with
//! an earlier committed G1 (at least one of them exclusive) succeeds on a
//! master m of G1's commit quorum only after G1's entry left m (as above, they
//! cannot stand together there), and G1 committed on m while its entry stood,
//! so G2 read G1's fence: F2 > F1. Two shared grants may share a fence value:
//! they do not conflict.
//!
//! # Writer preference
//!
//! A waiting exclusive acquisition refused on a master because shared holders
//! hold there (the lock key holds the sentinel) sets the writer-waiting marker
//! on that master: the fence hash's `ww` = the master's now + [`writer_mark`]
//! ms. New shared grants are refused there until it ends (their waiters retry
//! when it ends); shared holders already in may extend, recreate and release. A
//! waiting writer retries at least every `wait_fallback` (and at once when the
//! last shared holder on a master releases: the release is announced as for the
//! mutex), and every refused retry refreshes the marker, so the marker lasts
//! while it waits. A writer that is granted clears the marker with its fence
//! commit (where it commits; other writers still waiting set it again when
//! readers next refuse them); one that stops waiting otherwise (gave up,
//! crashed) stops refreshing, and its marker ends by itself within
//! [`writer_mark`]: a crashed waiter holds new readers back for at most that
//! long. Markers only ever refuse shared grants: they touch liveness, never the
//! exclusion above. Choice (the issue is silent): a try-lock writer (wait 0)
//! sets no marker, so a failed try does not hold readers back.
//!
//! # Limits
//!
//! A shared grant has no `lock_delay` or `hold_at_least` and no `limit`
//! above 1 (refused at the door, naming `mode`); the operator's
//! `Inspect`/`List` see the sentinel but not the individual shared holders.
//!
//! Semaphores (`super::semaphore`): a resource is one or the other at a time. A
//! permit's acquire script refuses while the resource's plain lock key exists,
//! which the sentinel is; the shared acquire script refuses, as the exclusive
//! one does, while the limit field (`lim` of the fence hash, which it reads
//! anyway) names a limit one of whose permits is held. Both answer
//! FAILED_PRECONDITION.

use std::time::Duration;

/// How long an exclusive acquisition refused by shared holders keeps new
/// shared grants out on that master: twice `wait_fallback`, the longest a
/// waiting writer goes between attempts (plus the round it takes), so the
/// marker of a writer that still waits never lapses.
pub(crate) fn writer_mark(wait_fallback: Duration) -> Duration {
    wait_fallback.saturating_mul(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The marker outlasts the longest pause between a waiter's attempts.
    #[test]
    fn marker_outlasts_a_waiters_pause() {
        let fallback = Duration::from_secs(1);
        assert!(writer_mark(fallback) > fallback);
        assert_eq!(writer_mark(fallback), Duration::from_secs(2));
    }
}
