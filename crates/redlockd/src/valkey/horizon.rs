//! The horizon restart quarantine (`redlock.restart_quarantine = "horizon"`,
//! the default): how long a master that may have lost its keys must sit
//! out, worked out from what the other masters and this daemon know rather
//! than from the worst case (`max_ttl`). This file holds the arithmetic and
//! the argument; the reading of the masters is in `super::quarantine`.
//!
//! # The hazard
//!
//! A master that restarts without its data, that is swapped for another
//! server behind the same address (a new `run_id`: a promoted replica behind
//! Sentinel, a virtual IP or DNS), or whose clock jumps forward (its keys
//! expire early) may no longer hold a lock it granted. If it voted at once,
//! a second client could win it together with the masters the first holder
//! never reached: two holders. It must not vote until every lock it may have
//! lost has expired, and that is all the quarantine is for.
//!
//! # Horizons
//!
//! Every master keeps one key, `<key_prefix>horizon`. The batch script
//! (`super::scripts::batch_script`) raises its expiry to the lock's ttl in
//! the same atomic step as each fence commit, extension and re-creation,
//! where the token holds the lock. A grant stands only once a majority of
//! (trusted) masters committed it, and an extension only once a majority
//! extended it, so every lock a holder believes in has its horizon on a
//! quorum; masters whose grant came late commit, and raise it, too.
//!
//! - **H (horizon invariant).** On a master that has not lost its data since
//!   it committed or extended a lock, the horizon key lives at least as long
//!   as that lock's key. A holder stops believing in its lock before the key
//!   expires (Redlock's validity is `ttl - elapsed - drift`, counted from
//!   before the command was sent), so the horizon outlives every holder's
//!   belief in a lock committed or extended there.
//! - **L (local horizon).** This daemon also remembers, on its monotonic
//!   clock, the latest `send time + ttl` of every fence commit and extension
//!   it sent ([`LocalHorizon`]): no holder of a lock this daemon granted or
//!   extended believes in it past that instant.
//!
//! The horizon is not raised by acquisitions that do not end in a grant
//! (refusals, attempts short of a quorum). An earlier version raised it on
//! every acquire, so that more masters would know; then every call turned
//! away while a fresh daemon's masters were still being checked made the
//! next quarantine last one more ttl (a first grant 1.2 s after start-up
//! instead of 0.2 s, with 1 s locks), and the argument below needs only a
//! quorum.
//!
//! # The rule
//!
//! When a master C is seen to have possibly lost its data (a young
//! `uptime_in_seconds` when first seen, a new `run_id`, a clock jump), it
//! stops voting at once under the blanket bound (`max_ttl` + drift from its
//! start, or from now for a new `run_id` or a clock jump), because its
//! horizon is not known yet. Then every other master is asked for its
//! horizon's PTTL. C's own horizon is not read: a master that persists
//! with `appendfsync everysec` can come back with an old horizon and without
//! the last raise. With N masters and a quorum of Q, the answers *settle*
//! the quarantine ([`settle`]) when either
//!
//! - **(a)** at least `N - Q + 1` of the masters that answered are trusted
//!   (verified, not refused, not themselves in quarantine), or
//! - **(b)** every other master that can hold a lock answered (all but the
//!   refused ones and C itself listed twice), trusted or not.
//!
//! C then sits out until the latest of `received + pttl + margin(pttl)`
//! over the answers and `local + margin`, where `margin(p) = p * df / (1 -
//! df) + 5 ms` (`df`: `drift_factor`), or not at all if that is past or no
//! horizon exists anywhere (a new cluster). A horizon without expiry (set
//! by hand) counts as `max_ttl` + drift. If the answers do not settle, the
//! blanket bound stays, and the masters are asked again (backing off) until
//! they do or the blanket ends. Several replicas each decide on their own,
//! from what they read.
//!
//! # Why it is safe
//!
//! Take a lock whose holder still believes in it, and let S be the masters
//! that acknowledged the operation its belief rests on (the commit, or the
//! last extension): |S| ≥ Q. A second grant needs Q votes, so at least one
//! from S (|S| + Q > N), from a master that no longer holds the key, that
//! is one that lost it. It is enough to show that such a master, C, does
//! not vote again while the holder believes in the lock.
//!
//! - Under (a): S has at least Q - 1 members among the N - 1 others, and at
//!   least N - Q + 1 trusted others answered, so one trusted answerer M is in
//!   S. If M kept its data since the lock was written, H says M's horizon
//!   outlives the holder's belief. If M lost its data since, M was
//!   quarantined when that was seen and is trusted again, so its own
//!   quarantine ended, which by the same argument happened after the
//!   holder's belief ended: a contradiction (unless M's quarantine was
//!   settled under (b) within the residual case below).
//! - Under (b): every member of S other than C answered; one of them that
//!   kept its data covers the lock by H.
//! - If this daemon granted or extended the lock, L covers it whatever the
//!   masters lost.
//! - The margin: a PTTL is counted on the other master's clock. If that
//!   clock runs slower than ours by up to `df` (the assumption behind
//!   Redlock's drift term), `p` of its milliseconds last at most `p / (1 -
//!   df)` of ours; the 5 ms cover the millisecond rounding of PTTL and of
//!   our own clock, like Redlock's 2 ms.
//!
//! The assumptions: every restart is seen (a restart drops the connection,
//! and `INFO` is read on every new connection; a master first seen after
//! more than `max_ttl` + drift of uptime cannot hold a lost lock that is
//! still valid, provided every daemon sharing the masters uses the same
//! `max_ttl`, which the blanket quarantine assumes too); clocks run at
//! about the same rate and jumps are caught by the clock check (as for
//! Redlock itself).
//!
//! So the default covers any number of masters restarting, one after the
//! other or together, each sitting out as long as the longest lock at risk
//! runs, **as long as one master that recorded each valid lock keeps its
//! data** (and answers, or enough trusted masters answer), or this daemon
//! granted the lock. When too few other masters answer, it is the blanket
//! quarantine.
//!
//! # Not covered: every horizon lost at once
//!
//! If every master that recorded a lock loses its data before the lock
//! expires (all masters restart together, or exactly the lock's quorum does
//! while the others never received its writes), and the daemon deciding did
//! not grant it (it restarted too, or another replica did), nothing
//! remembers the lock. The restarted masters answer "no horizon", which is
//! exactly what a new cluster answers, and vote at once; a second client
//! can then get the lock while its holder still believes in it. This is the
//! price of serving a new cluster at once: a cluster whose masters all just
//! started cannot be told from one whose masters all just lost their data.
//! The blanket quarantine (`"max_ttl"`) covers this case, by refusing for
//! `max_ttl` after any such start (an hour by default, with every master
//! quarantined: no lock at all). Choose it when losing every master's data
//! while locks are held is a risk you cannot take; a protected resource
//! that checks fences is safe either way for the ordering of writes
//! (`crate::redlock::fence`).
//!
//! # Persistence (`appendfsync`)
//!
//! A master that restarts with its data is still seen as restarted (young
//! uptime, new `run_id`) and quarantined as if it were empty.
//!
//! - `appendfsync always`: it lost nothing, horizon included; it sits out
//!   anyway (its own horizon is not trusted, see above), for as long as the
//!   others' horizons say. The whole-cluster case above cannot happen: the
//!   horizons come back with the data (keys keep their absolute expiry).
//! - `everysec` (or `no`, leaving it to the OS): a restart can lose the last
//!   second (or more) of writes, lock keys and horizon raises alike, and
//!   the lock may stand on fewer masters than its holder was told. The
//!   other masters' horizons cover C as above. If every master restarts at
//!   once, the horizons mostly come back from disk, so the residual case
//!   shrinks to locks whose every write fell in that lost window.
//! - No persistence (the test masters): everything is lost, as argued above.
//!
//! # Compared with the blanket quarantine
//!
//! The blanket (`"max_ttl"`) keeps a restarted master out for `max_ttl` +
//! drift from its start, whatever was locked: it needs nothing from the
//! other masters and covers every combination of restarts, at the price of
//! an hour (by default) per restarted master, and of refusing every lock on
//! a new cluster for an hour. The horizon keeps it out as long as the
//! longest lock that can be at risk (seconds for typical ttls; nothing on a
//! new cluster), at the price of the residual case above and of one key per
//! master. With too few masters to ask, the horizon is the blanket.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Fixed part of the margin added to every horizon: Redlock's 2 ms of
/// expiry granularity, plus the millisecond rounding of PTTL and of our
/// reading of it.
pub(crate) const MARGIN_FLOOR: Duration = Duration::from_millis(5);

/// What one other master said its horizon was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Horizon {
    /// No horizon key: no lock with a ttl reached the master since it
    /// started, or the longest has expired.
    Absent,
    /// The key's remaining time to live, on the master's clock.
    Remaining(Duration),
    /// A horizon key without expiry (written by hand): counted as
    /// `max_ttl`.
    Persistent,
}

impl Horizon {
    /// From a `PTTL` reply: -2 absent, -1 no expiry, else milliseconds.
    pub(crate) fn from_pttl(pttl: i64) -> Horizon {
        match u64::try_from(pttl) {
            Ok(ms) => Horizon::Remaining(Duration::from_millis(ms)),
            Err(_) if pttl == -1 => Horizon::Persistent,
            Err(_) => Horizon::Absent,
        }
    }
}

/// One other master's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reading {
    /// What it said.
    pub horizon: Horizon,
    /// When the answer arrived (the master read its clock before that).
    pub received: Instant,
    /// Whether the master was trusted (its own answers counted) both when
    /// asked and when it answered: rule (a) of the module doc.
    pub trusted: bool,
}

/// Who could be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Census {
    /// Masters configured (N).
    pub masters: usize,
    /// The quorum (Q).
    pub quorum: usize,
    /// Other masters that can hold a lock (not refused, not the restarted
    /// master itself under another name): rule (b) needs them all.
    pub candidates: usize,
}

/// What the readings say about a quarantine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Enough masters answered: the master votes again at `until`, or at
    /// once when `None`.
    Settled {
        /// End of the quarantine; `None`: nothing is at risk.
        until: Option<Instant>,
    },
    /// Too few masters answered: keep the blanket bound and ask again.
    Unsettled,
}

/// Trusted answers that settle a quarantine on their own: `N - Q + 1`, so
/// that they include a member of any quorum other than the restarted master
/// (rule (a)).
pub(crate) fn trusted_needed(masters: usize, quorum: usize) -> usize {
    (masters + 1).saturating_sub(quorum)
}

/// The allowance for a horizon of `remaining` counted on another clock:
/// `remaining * df / (1 - df)` plus [`MARGIN_FLOOR`].
pub(crate) fn margin(remaining: Duration, drift_factor: f64) -> Duration {
    let factor = if (0.0..1.0).contains(&drift_factor) {
        drift_factor / (1.0 - drift_factor)
    } else {
        // Validation keeps drift_factor in [0, 0.5); be safe anyway.
        1.0
    };
    Duration::try_from_secs_f64(remaining.as_secs_f64() * factor)
        .unwrap_or(Duration::MAX)
        .saturating_add(MARGIN_FLOOR)
}

/// Until when one answer says a lost lock may still be believed in;
/// `None`: no horizon. `max_ttl` stands in for a horizon without expiry.
pub(crate) fn reading_end(
    reading: &Reading,
    drift_factor: f64,
    max_ttl: Duration,
) -> Option<Instant> {
    let remaining = match reading.horizon {
        Horizon::Absent => return None,
        Horizon::Remaining(remaining) => remaining,
        Horizon::Persistent => max_ttl,
    };
    Some(later(
        reading.received,
        remaining.saturating_add(margin(remaining, drift_factor)),
    ))
}

/// Until when this daemon's own grants may be believed in (`local` from
/// [`LocalHorizon::latest`]), with the same margin; `None` if past.
pub(crate) fn local_end(
    local: Option<Instant>,
    drift_factor: f64,
    now: Instant,
) -> Option<Instant> {
    let local = local.filter(|at| *at > now)?;
    Some(later(local, margin(local - now, drift_factor)))
}

/// The rule of the module doc: whether `readings` (the other candidates'
/// answers) settle the quarantine of a master, and until when.
pub(crate) fn settle(
    readings: &[Reading],
    census: Census,
    local: Option<Instant>,
    drift_factor: f64,
    max_ttl: Duration,
    now: Instant,
) -> Verdict {
    let trusted = readings.iter().filter(|r| r.trusted).count();
    let covered = trusted >= trusted_needed(census.masters, census.quorum)
        || readings.len() >= census.candidates;
    if !covered {
        return Verdict::Unsettled;
    }
    let until = readings
        .iter()
        .filter_map(|r| reading_end(r, drift_factor, max_ttl))
        .chain(local_end(local, drift_factor, now))
        .max()
        .filter(|until| *until > now);
    Verdict::Settled { until }
}

/// `at + by`, saturating far in the future.
fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .unwrap_or_else(|| at + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// The latest instant at which a lock this daemon wrote can still be
/// believed in (fact L of the module doc): every fence commit and
/// extension records `now + ttl` as it is sent, so a master that restarts
/// while this daemon's own grants live sits out until they have expired,
/// whatever the other masters remember. Shared by every master of the
/// daemon; recording is one atomic maximum.
#[derive(Debug)]
pub(crate) struct LocalHorizon {
    /// Origin of the recorded offsets.
    base: Instant,
    /// Added to every recorded ttl: the fences' clock allowance, as the
    /// masters add it to their horizons (`crate::redlock::clock_allowance`).
    allowance: Duration,
    /// Milliseconds after `base` (rounded up); 0: nothing recorded.
    latest_ms: AtomicU64,
}

impl LocalHorizon {
    /// Nothing recorded yet; each record lasts `allowance` past its ttl.
    pub(crate) fn new(allowance: Duration) -> LocalHorizon {
        LocalHorizon {
            base: Instant::now(),
            allowance,
            latest_ms: AtomicU64::new(0),
        }
    }

    /// A lock with `ttl` is being written now.
    pub(crate) fn record(&self, ttl: Duration) {
        let end = self
            .base
            .elapsed()
            .saturating_add(ttl)
            .saturating_add(self.allowance);
        let ms = u64::try_from(end.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        self.latest_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// The latest end recorded, if any.
    pub(crate) fn latest(&self) -> Option<Instant> {
        match self.latest_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(later(self.base, Duration::from_millis(ms))),
        }
    }
}

/// Without allowance (tests of the horizon arithmetic).
impl Default for LocalHorizon {
    fn default() -> Self {
        LocalHorizon::new(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests;
