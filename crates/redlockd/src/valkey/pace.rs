//! How long a silent master is given before its batch fails: the overload
//! rules of the per-master batcher (`super::batch`).
//!
//! Overload is not failure: `node_timeout` is meant to tell a failed
//! master (hung, unreachable) from a live one, and a burst of callers on a
//! loaded machine must not make live masters look failed (UNAVAILABLE,
//! "retry at once"). Two things make a batch's `node_timeout` pass with
//! its master alive: the daemon's own timer runs late because the daemon
//! itself is behind (a burst on a debug build, cores shared with other
//! processes), and the master's answer is in the socket, unread; or the
//! master works through a backlog of batches, answering the earlier ones
//! after this one was sent. Either way the batch gets another
//! `node_timeout` ([`more_time`]): as long as the daemon's timer runs late,
//! and up to [`OVERDUE_FACTOR`] `node_timeout`s from its send for a busy
//! master.
//!
//! A third, found by logging every silent verdict in bursts of 1,000 on the
//! 2-core machine: the daemon's timer ran on time, yet *every* master was
//! silent at once, and every answer came 0.1 to 66 ms after the verdict.
//! The masters were starved of CPU (they share the cores with the daemon
//! and its burst), or the daemon read nothing meanwhile; one master's
//! silence then says nothing about that master. Later, at the start of a
//! 10,000-`Hold` burst (one cold run in about forty): four of five masters
//! silent for 50 ms, the fifth answering, the daemon on time, and the four
//! answering moments later. So a silent master's silence is its own only
//! if a quorum of the *other* masters answered since the batch was sent:
//! the group could then decide without it, and the daemon demonstrably
//! reads answers. Otherwise, or when a master of the group answered
//! slowly (over half of `node_timeout`) within the last [`SLOW_MEMORY`]
//! `node_timeout`s (the masters, or the machine or network they share,
//! are loaded, and a loaded master is slow, not hung: [`Pace`]), it gets
//! more time, up to [`SILENCE_FACTOR`] `node_timeout`s from the batch's
//! send. [`SILENCE_FACTOR`] stays below the round's deadline, so that a
//! real outage still ends as the masters' failure (UNAVAILABLE).
//!
//! What each outage costs, with the daemon on time: one or two hung
//! masters of five (a quorum of the others answers) are failed within
//! `node_timeout`, and the rounds are decided by the three live ones
//! without waiting for them at all; a majority hung (too few others
//! answer) within `SILENCE_FACTOR × node_timeout` (150 ms at the
//! defaults), where no grant was possible anyway; a master that is down
//! (connection refused or lost) at once. An answer read late is a real
//! answer: the engine counts validity from the round's start, so a late
//! vote only shortens the grant. A round that gives up meanwhile counts
//! the silence as its own backlog (`crate::redlock::Vote::Late`,
//! RESOURCE_EXHAUSTED).
//!

use std::time::Duration;
use tokio::time::Instant as TokioInstant;

/// Longest life of a written batch, in `node_timeout`s from its send, while
/// its master answers earlier batches but not yet this one
/// ([`more_time`]). As long as a round's backstop
/// (`crate::redlock::round::QUEUE_ALLOWANCE`), so that a batch that is
/// still given time ends about when the round stops listening anyway.
pub(crate) const OVERDUE_FACTOR: u32 = 1 + crate::redlock::QUEUE_ALLOWANCE;

/// Longest life of a written batch, in `node_timeout`s from its send,
/// while its master is silent but the silence cannot be pinned on it (no
/// master answered since the send, or one was recently slow: see the
/// module doc). Below the round's deadline (`1 + QUEUE_ALLOWANCE`
/// `node_timeout`s from the round's start), so that the batch's own verdict
/// comes first and a master that stays silent is counted failed, not late.
pub(crate) const SILENCE_FACTOR: u32 = crate::redlock::QUEUE_ALLOWANCE;

/// How long a slow answer (over half of `node_timeout`) marks its master
/// as loaded rather than hung, in `node_timeout`s (1 s at the default
/// 50 ms): a loaded master keeps answering, so the mark stays fresh while
/// the load lasts, and fades a second after it.
pub(crate) const SLOW_MEMORY: u32 = 20;

/// fred's own timeout on a batch's command, past [`OVERDUE_FACTOR`]
/// `node_timeout`s: a backstop only. Time the daemon itself stalls is not
/// the master's, so a batch whose timer runs late always gets another
/// `node_timeout`; this bounds how long a batch keeps its in-flight slot
/// if the daemon stays behind for that long.
pub(crate) const BACKSTOP: Duration = Duration::from_secs(5);

/// fred's timeout on a batch's command ([`BACKSTOP`] past
/// [`OVERDUE_FACTOR`] `node_timeout`s).
pub(crate) fn backstop(node_timeout: Duration) -> Duration {
    node_timeout * OVERDUE_FACTOR + BACKSTOP
}

/// How late a batch's timer may fire and still count as on time: a quarter
/// of `node_timeout`, and at least 2 ms (tokio's timers have a resolution
/// of 1 ms, so a timer is always up to about that late).
pub(crate) fn own_lateness(node_timeout: Duration) -> Duration {
    (node_timeout / 4).max(Duration::from_millis(2))
}

/// What the daemon knows, at a silent batch's timer, about its master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Silence {
    /// The master answered something since the batch was sent (it works
    /// through a backlog).
    pub progressing: bool,
    /// A quorum of the *other* masters answered something since the batch
    /// was sent: the daemon reads answers and the group could decide
    /// without this master, so its silence is its own. Fewer: most of the
    /// group fell silent at once (seen at the start of bursts on a shared
    /// machine: four of five masters silent for 50 ms, one answering, every
    /// one of them answering moments later), which points at what they
    /// share, not at this master.
    pub others_answered: bool,
    /// A master of the group answered a batch slowly (over half of
    /// `node_timeout`) within the last [`SLOW_MEMORY`] `node_timeout`s.
    pub recently_slow: bool,
}

/// Whether a batch sent at `sent`, whose timer was due at `due` and ran at
/// `now`, gets more time, and until when. If the timer ran later than
/// [`own_lateness`], the daemon was behind and the answer may be waiting
/// unread: another `node_timeout` from `now`, whatever the time already
/// spent (the daemon's stall is not the master's; fred's [`BACKSTOP`]
/// bounds it). If the master is progressing: another `node_timeout`, never
/// past [`OVERDUE_FACTOR`] `node_timeout`s from `sent`. If fewer than a
/// quorum of the other masters answered since `sent`, or one was recently
/// slow: never past [`SILENCE_FACTOR`] `node_timeout`s from `sent`.
/// `None`: the daemon kept up, a quorum of the others answered, every
/// master had been brisk, and this one said nothing: it did not answer in
/// time.
pub(crate) fn more_time(
    sent: TokioInstant,
    due: TokioInstant,
    now: TokioInstant,
    node_timeout: Duration,
    silence: Silence,
) -> Option<TokioInstant> {
    if now.saturating_duration_since(due) > own_lateness(node_timeout) {
        return Some(now + node_timeout);
    }
    let factor = if silence.progressing {
        OVERDUE_FACTOR
    } else if !silence.others_answered || silence.recently_slow {
        SILENCE_FACTOR
    } else {
        return None;
    };
    let limit = sent + node_timeout * factor;
    (now < limit).then(|| (now + node_timeout).min(limit))
}

/// How briskly the daemon's masters answered their recent batches: the
/// time and the answer time of the last slow batch (slower than half of
/// `node_timeout`) of any of them. One for the group of masters
/// (`super::quarantine::Peers`): masters that share a machine or a network
/// with each other or with the daemon slow down together, and the first
/// slow answer of one of them says the others may be starved too.
#[derive(Debug)]
pub(crate) struct Pace {
    origin: TokioInstant,
    /// Milliseconds from `origin` to the last slow answer, plus one (0: none).
    slow_at: std::sync::atomic::AtomicU64,
    /// That answer's time from its batch's send, in microseconds.
    slow_took: std::sync::atomic::AtomicU64,
}

impl Pace {
    /// No slow answer yet.
    pub(crate) fn new() -> Pace {
        Pace {
            origin: TokioInstant::now(),
            slow_at: Default::default(),
            slow_took: Default::default(),
        }
    }

    /// Records one batch answered `took` after its send.
    pub(super) fn answered(&self, took: Duration, node_timeout: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        if took > node_timeout / 2 {
            let at = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
            self.slow_at.store(at + 1, Relaxed);
            self.slow_took
                .store(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Relaxed);
        }
    }

    /// Whether the last slow answer came within `memory`.
    pub(super) fn slow_within(&self, memory: Duration) -> bool {
        self.last_slow().is_some_and(|(ago, _)| ago <= memory)
    }

    /// How long ago the last slow answer came, and how slow it was.
    pub(super) fn last_slow(&self) -> Option<(Duration, Duration)> {
        use std::sync::atomic::Ordering::Relaxed;
        match self.slow_at.load(Relaxed) {
            0 => None,
            at => Some((
                self.origin
                    .elapsed()
                    .saturating_sub(Duration::from_millis(at - 1)),
                Duration::from_micros(self.slow_took.load(Relaxed)),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// A quorum of the other masters answered, this one had been brisk and
    /// said nothing.
    const HUNG: Silence = Silence {
        progressing: false,
        others_answered: true,
        recently_slow: false,
    };

    /// The daemon kept up (its timer ran on time), a quorum of the other
    /// masters answered and this one, brisk until now, said nothing since
    /// the batch was sent: the master did not answer in time.
    #[test]
    fn silent_master_with_the_daemon_on_time_times_out() {
        let sent = TokioInstant::now();
        let due = sent + MS(50);
        assert_eq!(more_time(sent, due, due, MS(50), HUNG), None);
        assert_eq!(more_time(sent, due, due + MS(12), MS(50), HUNG), None);
    }

    /// The daemon's timer ran late (the daemon was behind: the answer may
    /// be waiting unread): another `node_timeout` from when it ran.
    #[test]
    fn late_daemon_gives_more_time() {
        let sent = TokioInstant::now();
        let due = sent + MS(50);
        let ran = due + MS(30);
        assert_eq!(more_time(sent, due, ran, MS(50), HUNG), Some(ran + MS(50)));
    }

    /// The master answered something since the batch was sent (it works
    /// through a backlog): more time, with the daemon on time too, never
    /// past OVERDUE_FACTOR node_timeouts from the send.
    #[test]
    fn progressing_master_gets_more_time_bounded() {
        let sent = TokioInstant::now();
        let busy = Silence {
            progressing: true,
            ..HUNG
        };
        let due = sent + MS(50);
        assert_eq!(more_time(sent, due, due, MS(50), busy), Some(due + MS(50)));
        let limit = sent + MS(50) * OVERDUE_FACTOR;
        let due = limit - MS(20);
        assert_eq!(more_time(sent, due, due, MS(50), busy), Some(limit));
        assert_eq!(more_time(sent, limit, limit + MS(5), MS(50), busy), None);
    }

    /// Fewer than a quorum of the other masters answered since the send
    /// (the machine or the daemon stalled: the masters starved of CPU, seen
    /// in bursts, four of five silent at once), or this master
    /// was recently slow (loaded, not hung): more time, up to
    /// SILENCE_FACTOR node_timeouts from the send, then a timeout, which
    /// comes before the round's deadline (a real outage stays UNAVAILABLE).
    #[test]
    fn unpinned_silence_gets_time_below_the_round_deadline() {
        let sent = TokioInstant::now();
        let limit = sent + MS(50) * SILENCE_FACTOR;
        for silence in [
            Silence {
                others_answered: false,
                ..HUNG
            },
            Silence {
                recently_slow: true,
                ..HUNG
            },
        ] {
            let due = sent + MS(50);
            assert_eq!(
                more_time(sent, due, due, MS(50), silence),
                Some(due + MS(50))
            );
            let due = limit - MS(10);
            assert_eq!(more_time(sent, due, due, MS(50), silence), Some(limit));
            assert_eq!(more_time(sent, limit, limit, MS(50), silence), None);
        }
        let round_deadline = sent + MS(50) * (1 + crate::redlock::QUEUE_ALLOWANCE);
        assert!(limit < round_deadline);
    }

    /// The daemon stalled past every limit (a second without running): the
    /// answer may be in the socket, unread, so the batch still gets another
    /// `node_timeout` of the daemon's own time.
    #[test]
    fn a_stalled_daemon_gets_more_time_past_the_limit() {
        let sent = TokioInstant::now();
        let due = sent + MS(50);
        let ran = sent + MS(1300);
        assert_eq!(more_time(sent, due, ran, MS(50), HUNG), Some(ran + MS(50)));
    }

    /// A slow answer marks the master loaded for a while; a brisk one does
    /// not.
    #[tokio::test(start_paused = true)]
    async fn a_slow_answer_is_remembered_for_a_while() {
        let pace = Pace::new();
        pace.answered(MS(10), MS(50));
        assert!(!pace.slow_within(MS(1000)));
        pace.answered(MS(30), MS(50));
        assert!(pace.slow_within(MS(1000)));
        tokio::time::advance(MS(1001)).await;
        assert!(!pace.slow_within(MS(1000)));
    }

    /// Timers run up to about a millisecond late: a small node_timeout
    /// still needs the daemon 2 ms late to count as behind.
    #[test]
    fn lateness_floor() {
        assert_eq!(own_lateness(MS(50)), Duration::from_micros(12_500));
        assert_eq!(own_lateness(MS(4)), MS(2));
    }
}
