//! The daemon's own lag: whether its runtime kept time, so that a command's
//! timeout is blamed on the master only when the daemon could have seen the
//! master's answer in time.
//!
//! Why: fred times each batch out `node_timeout` after it is written
//! (`super::batch`). On a starved machine (a burst of thousands of calls,
//! other processes on the same cores) the timer and the task that reads the
//! master's answer are both late, and the timer may run first: the answer
//! sits unread in the socket while the master is counted as failed, and a
//! round lost that way answered UNAVAILABLE ("masters failed, retry at
//! once") although every master answered (issue 15). A ticker measures how
//! late the runtime wakes it; a timeout whose command was out while the
//! runtime ran more than [`Lag::limit`] late proves nothing about the master
//! and counts as the daemon's backlog (`NodeError::Behind`, a late vote).
//!
//! Choice where the issue is silent: the limit is a quarter of
//! `node_timeout` (12.5 ms at the default 50 ms), at least 2 ms: late wake-ups
//! of a few milliseconds are ordinary scheduling noise and leave most of a
//! master's `node_timeout` intact; beyond a quarter, an answer that came in
//! time may well have gone unread. A genuinely slow or hung master under an
//! overloaded daemon is then reported as the daemon's overload
//! (RESOURCE_EXHAUSTED), which is what it is: the daemon cannot tell.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// How often the ticker asks to be woken.
const TICK: Duration = Duration::from_millis(5);

/// The lag monitor of one engine's masters; see the module docs.
#[derive(Debug)]
pub struct Lag {
    /// Instants are kept as microseconds since this one.
    born: Instant,
    /// A wake-up later than this is lag.
    limit: Duration,
    /// When the ticker last woke (µs since `born`, plus one; 0: never).
    last_tick: AtomicU64,
    /// When the latest late wake-up ended (µs since `born`, plus one; 0:
    /// never): the runtime was behind until then.
    behind_until: AtomicU64,
}

impl Lag {
    /// Starts the ticker on the current runtime; it ends once the monitor is
    /// dropped. `node_timeout` sets the limit (see the module docs).
    pub fn start(node_timeout: Duration) -> Arc<Lag> {
        let lag = Arc::new(Lag::new(node_timeout));
        tokio::spawn(tick(Arc::downgrade(&lag)));
        lag
    }

    fn new(node_timeout: Duration) -> Lag {
        let born = Instant::now();
        Lag {
            born,
            limit: (node_timeout / 4).max(Duration::from_millis(2)),
            last_tick: AtomicU64::new(micros(born, born)),
            behind_until: AtomicU64::new(0),
        }
    }

    /// Records a wake-up at `now` that was due at `due`.
    fn woke(&self, due: Instant, now: Instant) {
        self.last_tick
            .fetch_max(micros(self.born, now), Ordering::Relaxed);
        if now.saturating_duration_since(due) > self.limit {
            self.behind_until
                .fetch_max(micros(self.born, now), Ordering::Relaxed);
        }
    }

    /// Whether the runtime ran behind at some moment from `since` to `now`:
    /// a late wake-up that ended at or after `since`, or a ticker late right
    /// now (itself starved).
    pub fn behind_since(&self, since: Instant, now: Instant) -> bool {
        let behind_until = self.behind_until.load(Ordering::Relaxed);
        if behind_until != 0 && behind_until >= micros(self.born, since) {
            return true;
        }
        let last = self.last_tick.load(Ordering::Relaxed);
        let silent_for = micros(self.born, now).saturating_sub(last);
        Duration::from_micros(silent_for) > TICK + self.limit
    }
}

/// Microseconds from `born` to `at`, plus one (0 stays "never").
fn micros(born: Instant, at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(born).as_micros())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

async fn tick(lag: Weak<Lag>) {
    let mut due = Instant::now() + TICK;
    loop {
        tokio::time::sleep_until(due).await;
        let now = Instant::now();
        let Some(lag) = lag.upgrade() else { return };
        lag.woke(due, now);
        due = now + TICK;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// On-time wake-ups leave the runtime "keeping time"; a wake-up later
    /// than the limit marks it behind for every command out at that moment,
    /// and a ticker that stopped waking marks it behind now.
    #[test]
    fn late_wake_ups_mark_the_window_behind() {
        let lag = Lag::new(ms(50));
        assert_eq!(lag.limit, Duration::from_micros(12_500));
        let t0 = lag.born;
        lag.woke(t0 + ms(5), t0 + ms(6));
        lag.woke(t0 + ms(11), t0 + ms(12));
        assert!(!lag.behind_since(t0, t0 + ms(13)), "on time");
        // Due at 17 ms, woken at 40 ms: behind until 40 ms.
        lag.woke(t0 + ms(17), t0 + ms(40));
        assert!(
            lag.behind_since(t0 + ms(20), t0 + ms(41)),
            "out during the lag"
        );
        assert!(
            lag.behind_since(t0 + ms(40), t0 + ms(41)),
            "out as it ended"
        );
        assert!(!lag.behind_since(t0 + ms(41), t0 + ms(42)), "sent after it");
        // No wake-up since 40 ms, asked at 70 ms: the ticker is starved now.
        assert!(lag.behind_since(t0 + ms(41), t0 + ms(70)));
        assert_eq!(Lag::new(ms(4)).limit, ms(2), "at least 2 ms");
    }

    /// The ticker runs on the runtime and records its wake-ups.
    #[tokio::test(start_paused = true)]
    async fn the_ticker_ticks_until_dropped() {
        let lag = Lag::start(ms(50));
        tokio::time::sleep(ms(100)).await;
        let now = Instant::now();
        assert!(
            !lag.behind_since(now - ms(50), now),
            "a paused clock is never late"
        );
        assert!(lag.last_tick.load(Ordering::Relaxed) > micros(lag.born, lag.born));
    }
}
