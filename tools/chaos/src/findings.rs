//! What the checkers report: the properties checked ([`Check`]), a
//! violation with its evidence, and the findings of a run (violations and
//! the figures around them). Every checker module writes into these; none
//! of them needs another checker to do so.

use crate::history::{Grant, Time};
use std::collections::BTreeMap;

/// The properties checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Check {
    /// Two conflicting grants of one resource (any kinds, distinct
    /// tokens) with overlapping validity windows (`crate::exclusion`).
    Overlap,
    /// A grant certainly made after a conflicting one got a fence not
    /// above it, or two conflicting grants share a fence
    /// (`crate::exclusion`).
    FenceOrder,
    /// A Release's `was_held` contradicts the history.
    WasHeld,
    /// Two critical sections of one resource overlapped (paused and
    /// overrunning holders excluded).
    CriticalSections,
    /// A register lost an acknowledged update.
    LostUpdates,
    /// The fenced register applied a write of a holder already superseded.
    StaleWrites,
    /// The fenced register refused a holder that was within its validity.
    FencedValidHolder,
    /// A client frozen mid-session wrote outside its validity, or after
    /// resuming under the lock it held when frozen (`crate::frozen`).
    FrozenClient,
    /// A burst call answered UNAVAILABLE while every master was healthy
    /// (`crate::burst`): overload blamed on the masters.
    BurstUnavailable,
    /// More than L permits of limit L held at once on one resource
    /// (`crate::exclusion`; two holders of one permit are an overlap).
    SemaphoreLimit,
    /// After an Acquire answered DEADLINE_EXCEEDED, a majority of the
    /// masters, all healthy throughout, still held its lock key once the
    /// daemon had long enough to clean up (`crate::leftovers`).
    LeftLocked,
    /// A frozen (vanished) holder's lock with a lock_delay was granted to
    /// another client before the delay could have run (`crate::frozen`),
    /// or a conflicting grant was answered inside the lock_delay of a
    /// grant left to expire (`crate::lock_delay`).
    LockDelay,
    /// A conflicting grant answered inside the `hold_at_least` of a grant
    /// released before it ran (`crate::hold_at_least`).
    HoldAtLeast,
    /// An observer of an election was told a term below one it had been
    /// told, or one term twice in a stream (`crate::elections`).
    ObserverWentBack,
    /// An observer of an election was told a value its term's leader never
    /// had: another candidate's, another term's, or a Proclaim's value as
    /// version 0 (`crate::observers`).
    ObserverWrongValue,
}

impl Check {
    /// Every check, in report order.
    pub(crate) const ALL: [Check; 15] = [
        Check::Overlap,
        Check::FenceOrder,
        Check::WasHeld,
        Check::CriticalSections,
        Check::LostUpdates,
        Check::StaleWrites,
        Check::FencedValidHolder,
        Check::FrozenClient,
        Check::BurstUnavailable,
        Check::SemaphoreLimit,
        Check::LeftLocked,
        Check::LockDelay,
        Check::HoldAtLeast,
        Check::ObserverWentBack,
        Check::ObserverWrongValue,
    ];

    /// Name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Check::Overlap => "overlapping_validity",
            Check::FenceOrder => "fence_order",
            Check::WasHeld => "was_held",
            Check::CriticalSections => "critical_section_overlap",
            Check::LostUpdates => "lost_updates",
            Check::StaleWrites => "stale_fenced_writes",
            Check::FencedValidHolder => "fenced_register_refused_valid_holder",
            Check::FrozenClient => "frozen_client_stale_write",
            Check::BurstUnavailable => "burst_unavailable_masters_healthy",
            Check::SemaphoreLimit => "semaphore_over_limit",
            Check::LeftLocked => "left_locked_after_deadline_exceeded",
            Check::LockDelay => "lock_delay_cut_short",
            Check::HoldAtLeast => "hold_at_least_cut_short",
            Check::ObserverWentBack => "observer_went_back",
            Check::ObserverWrongValue => "observer_told_a_value_its_term_never_had",
        }
    }
}

/// One violation, with what proves it.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    /// Which property.
    pub check: Check,
    /// The evidence, readable.
    pub detail: String,
}

/// What the checkers found, violations and the figures around them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Findings {
    /// Every violation.
    pub violations: Vec<Violation>,
    /// Kleppmann pauses: holders that slept past their validity.
    pub paused: usize,
    /// Fenced writes of paused holders that the register refused.
    pub paused_writes_refused: usize,
    /// Fenced writes of paused holders applied (nobody newer had come).
    pub paused_writes_applied: usize,
    /// Critical sections that ran past their validity unintentionally.
    pub overran: usize,
    /// Grants answered after their window had already ended.
    pub empty_windows: usize,
    /// The smallest gap between the end of a holder's window, when its
    /// lock was left to expire, and the next grant of the resource: how
    /// close to the edge the expiry hand-offs came.
    pub tightest_expiry: Option<Time>,
    /// `was_held = false` inside the validity window while a fault was on
    /// (the key may really have been lost with a restarted master): not a
    /// violation, reported.
    pub not_held_under_faults: usize,
    /// What the cross-kind sweep saw.
    pub kinds: KindFigures,
}

impl Findings {
    /// Violations of `check`.
    pub(crate) fn count(&self, check: Check) -> usize {
        self.violations.iter().filter(|v| v.check == check).count()
    }
}

/// What the sweep saw besides violations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KindFigures {
    /// Pairs of shared grants (distinct tokens) whose windows overlapped:
    /// readers really shared.
    pub shared_overlaps: usize,
    /// Most permits of each limit held at once on one resource.
    pub most_permits: BTreeMap<u32, usize>,
    /// Pairs of grants of distinct kinds whose windows overlapped without
    /// conflicting (permits of one limit, readers): the mix really mixed.
    pub pairs_held_together: usize,
    /// Grants with a `hold_at_least` released before it ran: the holds
    /// `crate::hold_at_least` judged.
    pub holds_released_early: usize,
    /// Grants left to expire with a `lock_delay`: the delays
    /// `crate::lock_delay` judged.
    pub delays_left_to_expire: usize,
}

/// A grant in a violation's evidence.
pub(crate) fn describe(g: &Grant) -> String {
    format!(
        "grant#{} client {} replica {} fence {} received {:.3}s valid until {:.3}s",
        g.id,
        g.client,
        g.replica,
        g.fence,
        g.received.as_secs_f64(),
        g.valid_until.as_secs_f64()
    )
}
