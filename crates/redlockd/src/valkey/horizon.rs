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
pub struct LocalHorizon {
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
    pub fn new(allowance: Duration) -> LocalHorizon {
        LocalHorizon {
            base: Instant::now(),
            allowance,
            latest_ms: AtomicU64::new(0),
        }
    }

    /// A lock with `ttl` is being written now.
    pub fn record(&self, ttl: Duration) {
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
    pub fn latest(&self) -> Option<Instant> {
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;
    const DF: f64 = 0.01;
    const HOUR: Duration = Duration::from_secs(3600);

    fn census(candidates: usize) -> Census {
        Census {
            masters: 5,
            quorum: 3,
            candidates,
        }
    }

    fn reading(horizon: Horizon, received: Instant, trusted: bool) -> Reading {
        Reading {
            horizon,
            received,
            trusted,
        }
    }

    /// N - Q + 1 for the usual sizes.
    #[test]
    fn trusted_answers_needed() {
        assert_eq!(trusted_needed(5, 3), 3);
        assert_eq!(trusted_needed(3, 2), 2);
        assert_eq!(trusted_needed(4, 3), 2);
        assert_eq!(trusted_needed(1, 1), 1);
        assert_eq!(trusted_needed(7, 4), 4);
    }

    /// PTTL replies.
    #[test]
    fn pttl_replies() {
        assert_eq!(Horizon::from_pttl(-2), Horizon::Absent);
        assert_eq!(Horizon::from_pttl(-1), Horizon::Persistent);
        assert_eq!(Horizon::from_pttl(0), Horizon::Remaining(MS(0)));
        assert_eq!(Horizon::from_pttl(4_000), Horizon::Remaining(MS(4_000)));
    }

    /// A new cluster: every other master answers, none has a horizon, the
    /// daemon granted nothing: no quarantine, even with nobody trusted yet.
    #[test]
    fn new_cluster_is_not_quarantined() {
        let now = Instant::now();
        let readings = [reading(Horizon::Absent, now, false); 4];
        assert_eq!(
            settle(&readings, census(4), None, DF, HOUR, now),
            Verdict::Settled { until: None }
        );
    }

    /// A 4 s horizon: the quarantine is 4 s plus 45 ms of margin, not an hour.
    #[test]
    fn quarantine_is_the_horizon_plus_margin() {
        let now = Instant::now();
        let readings = [
            reading(Horizon::Remaining(MS(4_000)), now, true),
            reading(Horizon::Remaining(MS(1_000)), now, true),
            reading(Horizon::Absent, now, true),
        ];
        let until = match settle(&readings, census(4), None, DF, HOUR, now) {
            Verdict::Settled { until: Some(until) } => until,
            other => panic!("{other:?}"),
        };
        let length = until - now;
        assert!(length >= MS(4_045) && length <= MS(4_046), "{length:?}");
    }

    /// Too few answers, or too few trusted ones while some are missing:
    /// unsettled (the blanket bound stays).
    #[test]
    fn too_few_answers_keep_the_blanket() {
        let now = Instant::now();
        let two = [reading(Horizon::Absent, now, true); 2];
        assert_eq!(
            settle(&two, census(4), None, DF, HOUR, now),
            Verdict::Unsettled
        );
        let three_untrusted = [reading(Horizon::Absent, now, false); 3];
        assert_eq!(
            settle(&three_untrusted, census(4), None, DF, HOUR, now),
            Verdict::Unsettled
        );
        // The same three are every candidate when the fourth is refused.
        assert_eq!(
            settle(&three_untrusted, census(3), None, DF, HOUR, now),
            Verdict::Settled { until: None }
        );
    }

    /// The daemon's own grants count even when no master remembers them;
    /// a horizon without expiry counts as max_ttl.
    #[test]
    fn local_grants_and_persistent_horizons() {
        let now = Instant::now();
        let readings = [reading(Horizon::Absent, now, true); 4];
        let local = Some(now + MS(2_000));
        match settle(&readings, census(4), local, DF, HOUR, now) {
            Verdict::Settled { until: Some(until) } => assert!(until - now >= MS(2_000)),
            other => panic!("{other:?}"),
        }
        let past = Some(now - MS(1));
        assert_eq!(
            settle(&readings, census(4), past, DF, HOUR, now),
            Verdict::Settled { until: None }
        );
        let stuck = [reading(Horizon::Persistent, now, true); 3];
        match settle(&stuck, census(4), None, DF, HOUR, now) {
            Verdict::Settled { until: Some(until) } => assert!(until - now >= HOUR),
            other => panic!("{other:?}"),
        }
    }

    /// The local horizon keeps the latest end, rounded up.
    #[tokio::test(start_paused = true)]
    async fn local_horizon_keeps_the_latest() {
        let local = LocalHorizon::new(Duration::ZERO);
        assert_eq!(local.latest(), None);
        let start = Instant::now();
        local.record(MS(3_000));
        local.record(MS(1_000));
        let first = local.latest().expect("recorded");
        assert!(first >= start + MS(3_000) && first <= start + MS(3_001));
        tokio::time::advance(MS(2_500)).await;
        local.record(MS(1_000));
        let second = local.latest().expect("recorded");
        assert!(second >= start + MS(3_500), "{:?}", second - start);
    }

    /// One lock of the model: where its writes landed and until when its
    /// holder believes in it (ms from now).
    #[derive(Debug, Clone)]
    struct Lock {
        quorum: Vec<usize>,
        /// Masters outside the quorum that also got the horizon raise.
        also: Vec<usize>,
        believed_ms: u64,
        ours: bool,
    }

    /// A master other than the restarted one (index 0), as the model sees it.
    #[derive(Debug, Clone, Copy)]
    struct Other {
        answers: bool,
        /// Lost its data after the locks were written (then it is not
        /// trusted: its own quarantine would outlast the locks).
        lost: bool,
        trusted: bool,
        /// Its clock's rate relative to ours, within the drift factor.
        rate: f64,
        /// An unrelated longer horizon it holds (ms), if any.
        extra_ms: Option<u64>,
    }

    fn world() -> impl Strategy<Value = (usize, Vec<Other>, Vec<Lock>)> {
        (1usize..=7).prop_flat_map(|n| {
            let quorum = n / 2 + 1;
            let other = (
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
                (1.0 - DF)..=(1.0 + DF),
                proptest::option::of(0u64..20_000),
            )
                .prop_map(|(answers, lost, trusted, rate, extra_ms)| Other {
                    answers,
                    lost,
                    trusted: trusted && !lost,
                    rate,
                    extra_ms,
                });
            let lock = (
                proptest::sample::subsequence((1..n).collect::<Vec<_>>(), quorum - 1..=n - 1),
                proptest::sample::subsequence((1..n).collect::<Vec<_>>(), 0..=n - 1),
                1u64..30_000,
                proptest::bool::weighted(0.2),
            )
                .prop_map(|(mut quorum, also, believed_ms, ours)| {
                    // Every lock at risk was granted with the restarted master.
                    quorum.push(0);
                    Lock {
                        quorum,
                        also,
                        believed_ms,
                        ours,
                    }
                });
            (
                Just(n),
                proptest::collection::vec(other, n - 1),
                proptest::collection::vec(lock, 0..4),
            )
        })
    }

    proptest! {
        /// Soundness: whenever the readings settle a quarantine, it lasts
        /// until every lock the restarted master may have lost is no
        /// longer believed in, unless every master that recorded the lock
        /// lost it too and this daemon did not grant it (the documented
        /// residual case). Clocks run within the drift factor of ours.
        #[test]
        fn a_settled_quarantine_outlasts_every_lock_at_risk(
            (n, others, locks) in world(),
            answer_ms in 0u64..50,
        ) {
            let now = Instant::now();
            let quorum = n / 2 + 1;
            let received = now + MS(answer_ms);
            let mut readings = Vec::new();
            for (i, other) in others.iter().enumerate() {
                let master = i + 1;
                if !other.answers {
                    continue;
                }
                // Key expiry on this master, in our time: H says the key
                // outlives the belief; its clock counts `rate` times ours.
                let kept = locks
                    .iter()
                    .filter(|l| !other.lost && (l.quorum.contains(&master) || l.also.contains(&master)))
                    .map(|l| l.believed_ms)
                    .chain(other.extra_ms)
                    .max();
                let horizon = match kept {
                    None => Horizon::Absent,
                    Some(ms) => {
                        let left = ms.saturating_sub(answer_ms) as f64 * other.rate;
                        if left <= 0.0 { Horizon::Absent } else { Horizon::Remaining(MS(left as u64)) }
                    }
                };
                readings.push(reading(horizon, received, other.trusted));
            }
            let local = locks.iter().filter(|l| l.ours).map(|l| now + MS(l.believed_ms)).max();
            let census = Census { masters: n, quorum, candidates: n - 1 };
            if let Verdict::Settled { until } = settle(&readings, census, local, DF, HOUR, received) {
                for lock in &locks {
                    let remembered = lock.ours
                        || lock.quorum.iter().chain(&lock.also)
                            .any(|m| *m != 0 && !others[*m - 1].lost);
                    let believed_until = now + MS(lock.believed_ms);
                    if remembered && believed_until > received {
                        prop_assert!(
                            until.is_some_and(|u| u >= believed_until),
                            "lock {lock:?} believed until +{:?}, quarantine until {:?}",
                            believed_until - now, until.map(|u| u - now)
                        );
                    }
                }
            }
        }

        /// More answers never shorten a settled quarantine, and never turn
        /// a settled one unsettled.
        #[test]
        fn more_answers_never_shorten(
            horizons in proptest::collection::vec((proptest::option::of(0u64..10_000), any::<bool>()), 1..7),
            extra in proptest::option::of(0u64..10_000),
            extra_trusted in any::<bool>(),
        ) {
            let now = Instant::now();
            let to_reading = |(ms, trusted): (Option<u64>, bool)| reading(
                ms.map_or(Horizon::Absent, |ms| Horizon::Remaining(MS(ms))), now, trusted);
            let readings: Vec<Reading> = horizons.iter().copied().map(to_reading).collect();
            let census = Census { masters: 7, quorum: 4, candidates: 6 };
            let before = settle(&readings, census, None, DF, HOUR, now);
            let mut more = readings.clone();
            more.push(to_reading((extra, extra_trusted)));
            let after = settle(&more, census, None, DF, HOUR, now);
            match (before, after) {
                (Verdict::Settled { until: a }, Verdict::Settled { until: b }) => prop_assert!(b >= a),
                (Verdict::Settled { .. }, Verdict::Unsettled) => prop_assert!(false, "unsettled by more answers"),
                _ => {}
            }
        }

        /// The quarantine is never shorter than the longest horizon read,
        /// and never longer than it by more than the margin.
        #[test]
        fn length_is_horizon_plus_margin(
            horizons in proptest::collection::vec(0u64..3_600_000, 1..5),
            df in 0.0f64..0.5,
        ) {
            let now = Instant::now();
            let readings: Vec<Reading> = horizons.iter()
                .map(|ms| reading(Horizon::Remaining(MS(*ms)), now, true)).collect();
            let census = Census { masters: 5, quorum: 3, candidates: readings.len() };
            let longest = MS(*horizons.iter().max().expect("one"));
            match settle(&readings, census, None, df, HOUR, now) {
                Verdict::Settled { until: Some(until) } => {
                    let length = until - now;
                    prop_assert!(length >= longest + MARGIN_FLOOR);
                    // p / (1 - df) of our time, within a millisecond of rounding.
                    let bound = longest.as_secs_f64() / (1.0 - df) + 0.006;
                    prop_assert!(length.as_secs_f64() <= bound, "{length:?} > {bound}");
                }
                other => prop_assert!(false, "{other:?}"),
            }
        }
    }
}
