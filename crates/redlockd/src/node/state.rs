//! What the daemon knows about one master between commands: whether its
//! connection is up, whether it is quarantined after a restart (or a clock
//! jump), and whether it is refused outright (a replica, too old, or the same
//! server as another configured master). Only a *trusted* master's answers
//! count toward a quorum; commands (releases especially) still go to all.

use super::server_info::ServerInfo;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The state of one master, shared by its command path and its watchers.
pub struct NodeState {
    name: String,
    /// Restart quarantine length (`max_ttl` plus drift); `None`: turned off.
    quarantine: Option<Duration>,
    /// Set when fred reports the connection lost, cleared when it is back.
    down: AtomicBool,
    /// Whether the master has `DELIFEQ`.
    delifeq: AtomicBool,
    /// Set once `INFO` was read on the current connection. Until then the
    /// master could be a fresh, empty restart whose quarantine is not known
    /// yet: its answers do not count.
    verified: AtomicBool,
    /// Whether the batch script was sent in full (EVAL) on the current
    /// connection, so that EVALSHA finds it (see `batch.rs`).
    script_sent: AtomicBool,
    trust: Mutex<Trust>,
}

#[derive(Default)]
struct Trust {
    run_id: String,
    quarantined_until: Option<Instant>,
    refused: Option<String>,
    duplicate_of: Option<String>,
}

impl NodeState {
    /// A master named `name` (for logs), quarantined for `quarantine` after
    /// restarts when set.
    pub fn new(name: String, quarantine: Option<Duration>) -> NodeState {
        NodeState {
            name,
            quarantine,
            down: AtomicBool::new(false),
            delifeq: AtomicBool::new(false),
            verified: AtomicBool::new(false),
            script_sent: AtomicBool::new(false),
            trust: Mutex::new(Trust::default()),
        }
    }

    /// The connection was lost (true) or is back (false). Returns whether it
    /// was up before.
    pub fn set_down(&self, down: bool) -> bool {
        if down {
            // Whatever answers after a reconnection must be checked again.
            self.verified.store(false, Ordering::Relaxed);
            self.script_sent.store(false, Ordering::Relaxed);
        }
        !self.down.swap(down, Ordering::Relaxed)
    }

    /// A (re)connection happened: answers stop counting until `INFO` is
    /// read on it (see [`NodeState::observe`]).
    pub fn reconnected(&self) {
        self.verified.store(false, Ordering::Relaxed);
        self.script_sent.store(false, Ordering::Relaxed);
        self.down.store(false, Ordering::Relaxed);
    }

    /// Whether the next batch must carry the script's text (EVAL) rather
    /// than its hash (EVALSHA); answering true also records it as sent,
    /// since later batches reach the master after this one.
    pub fn script_must_be_sent(&self) -> bool {
        !self.script_sent.swap(true, Ordering::Relaxed)
    }

    /// The master answered NOSCRIPT (it restarted, or its cache was
    /// flushed): send the text again.
    pub fn script_lost(&self) {
        self.script_sent.store(false, Ordering::Relaxed);
    }

    /// Whether `INFO` was read since the last (re)connection.
    pub fn verified(&self) -> bool {
        self.verified.load(Ordering::Relaxed)
    }

    /// Whether the connection is known lost.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Whether releases can use `DELIFEQ`.
    pub fn has_delifeq(&self) -> bool {
        self.delifeq.load(Ordering::Relaxed)
    }

    /// Whether this master's answers count toward a quorum now.
    pub fn trusted(&self) -> bool {
        if !self.verified() {
            return false;
        }
        let trust = self.lock();
        trust.refused.is_none()
            && trust.duplicate_of.is_none()
            && trust
                .quarantined_until
                .is_none_or(|until| Instant::now() >= until)
    }

    /// Whether the master is in restart quarantine now.
    pub fn quarantined(&self) -> bool {
        self.lock()
            .quarantined_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// The `run_id` last seen (empty before the first connection).
    pub fn run_id(&self) -> String {
        self.lock().run_id.clone()
    }

    /// Takes in what `INFO` said after a (re)connection: the server's
    /// features, refusals and warnings, and quarantine after a restart.
    pub fn observe(&self, info: &ServerInfo) {
        self.delifeq.store(info.has_delifeq(), Ordering::Relaxed);
        let mut trust = self.lock();
        let restarted = !trust.run_id.is_empty() && trust.run_id != info.run_id;
        if trust.run_id != info.run_id {
            tracing::info!(node = %self.name, software = %info.software, version = ?info.version,
                uptime_s = info.uptime_seconds, "master connected");
        }
        trust.run_id = info.run_id.clone();
        let refusal = info.refusal();
        if refusal != trust.refused {
            if let Some(reason) = &refusal {
                tracing::error!(node = %self.name, "master refused: it {reason}; its answers do not count");
            }
            trust.refused = refusal;
        }
        for warning in info.warnings() {
            tracing::warn!(node = %self.name, "master {warning}");
        }
        if let Some(period) = self.quarantine {
            if let Some(left) = quarantine_left(info.uptime_seconds, period) {
                let until = Instant::now() + left;
                if trust
                    .quarantined_until
                    .is_none_or(|current| current < until)
                {
                    tracing::warn!(node = %self.name, uptime_s = info.uptime_seconds, restarted,
                        quarantine = ?left, "master restarted recently and may have lost its keys: \
                         its votes do not count until the quarantine ends");
                    trust.quarantined_until = Some(until);
                }
            }
        }
        drop(trust);
        self.verified.store(true, Ordering::Relaxed);
    }

    /// Quarantines the master for the whole period from now (its clock
    /// jumped: keys may have expired early).
    pub fn quarantine_now(&self, why: &str) {
        if let Some(period) = self.quarantine {
            tracing::error!(node = %self.name, quarantine = ?period, "{why}: quarantining the master");
            self.lock().quarantined_until = Some(Instant::now() + period);
        } else {
            tracing::error!(node = %self.name, "{why} (restart quarantine is off)");
        }
    }

    /// Marks the master as the same server as `other` (same run_id), or
    /// clears that: one server must not count twice toward a quorum.
    pub fn set_duplicate_of(&self, other: Option<String>) {
        let mut trust = self.lock();
        if trust.duplicate_of != other {
            if let Some(other) = &other {
                tracing::error!(node = %self.name, same_as = %other,
                    "two configured masters are the same server (same run_id): it would count \
                     twice toward the quorum; list each master once");
            }
            trust.duplicate_of = other;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Trust> {
        self.trust
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// How much longer a master that has been up `uptime_seconds` stays in a
/// quarantine of `period`. The uptime is whole seconds, rounded down, so one
/// second is added to stay on the safe side.
pub(crate) fn quarantine_left(uptime_seconds: u64, period: Duration) -> Option<Duration> {
    period
        .checked_sub(Duration::from_secs(uptime_seconds))
        .map(|left| left + Duration::from_secs(1))
        .filter(|left| !left.is_zero())
}

/// Compares how far a master's clock moved (`master`) with how far ours did
/// (`local`, monotonic) between two readings taken `rtt` apart at most:
/// returns the skew rate, and whether the difference is a jump beyond the
/// drift allowance (`drift_factor` of the interval, plus 2 ms, plus the
/// measurement's own uncertainty).
pub(crate) fn clock_check(
    master: Duration,
    local: Duration,
    rtt: Duration,
    drift_factor: f64,
) -> (f64, bool) {
    let (m, l) = (master.as_secs_f64(), local.as_secs_f64());
    let rate = if l > 0.0 { (m - l) / l } else { 0.0 };
    let allowance = l * drift_factor + 0.002 + rtt.as_secs_f64();
    (rate, (m - l).abs() > allowance)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    /// A fresh master waits out the whole period (plus rounding); an old one none.
    #[test]
    fn quarantine_arithmetic() {
        assert_eq!(quarantine_left(0, S(3600)), Some(S(3601)));
        assert_eq!(quarantine_left(3000, S(3600)), Some(S(601)));
        assert_eq!(quarantine_left(3600, S(3600)), Some(S(1)));
        assert_eq!(quarantine_left(3601, S(3600)), None);
    }

    /// Quarantine after a restart, and trust again once it has passed.
    #[tokio::test(start_paused = true)]
    async fn restarted_master_is_distrusted_for_the_period() {
        let state = NodeState::new("m".into(), Some(S(10)));
        assert!(!state.trusted(), "not before INFO was read");
        let info = |uptime: u64, run_id: &str| ServerInfo {
            software: "valkey".into(),
            version: (9, 0, 0),
            run_id: run_id.into(),
            uptime_seconds: uptime,
            role: "master".into(),
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
        };
        state.observe(&info(100, "a"));
        assert!(state.trusted(), "up for longer than the period");
        state.set_down(true);
        state.set_down(false);
        assert!(
            !state.trusted(),
            "reconnected: not before INFO is read again"
        );
        state.observe(&info(101, "a"));
        assert!(state.trusted());
        state.observe(&info(2, "b"));
        assert!(!state.trusted() && state.quarantined());
        tokio::time::advance(S(8)).await;
        assert!(!state.trusted());
        tokio::time::advance(S(2)).await;
        assert!(state.trusted());
        let off = NodeState::new("m".into(), None);
        off.observe(&info(0, "c"));
        assert!(off.trusted(), "quarantine turned off");
        let mut replica = info(100, "d");
        replica.role = "slave".into();
        off.observe(&replica);
        assert!(!off.trusted(), "a replica never counts");
        off.observe(&info(100, "d"));
        off.set_duplicate_of(Some("other".into()));
        assert!(!off.trusted(), "a duplicate never counts");
    }

    /// Steady clocks pass; a one-second jump is caught; the rate is reported.
    #[test]
    fn clock_jumps() {
        let (rate, jumped) = clock_check(
            Duration::from_millis(5_001),
            S(5),
            Duration::from_millis(1),
            0.01,
        );
        assert!(!jumped);
        assert!((rate - 0.0002).abs() < 1e-9);
        let (_, jumped) = clock_check(S(6), S(5), Duration::from_millis(1), 0.01);
        assert!(jumped);
        let (_, jumped) = clock_check(S(4), S(5), Duration::from_millis(1), 0.01);
        assert!(jumped, "backwards too");
    }
}
