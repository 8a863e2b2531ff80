//! What the daemon knows about one master between commands: whether its
//! connection is up, whether it is quarantined after a restart (or a clock
//! jump), and whether it is refused outright (a replica, too old, or the same
//! server as another configured master). Only a *trusted* master's answers
//! count toward a quorum; commands (releases especially) still go to all.
//!
//! A quarantine starts at the blanket bound (`max_ttl` plus drift). Under
//! the horizon quarantine (`super::horizon`) it is *unsettled* until the
//! other masters' horizons were read (`super::quarantine`), which then
//! settles its real end, often much sooner, or none at all.

mod trust;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The state of one master, shared by its command path and its watchers.
pub struct NodeState {
    name: String,
    /// Blanket restart quarantine length (`max_ttl` plus drift); `None`:
    /// turned off.
    quarantine: Option<Duration>,
    /// Whether quarantines are settled from the horizons (else the blanket
    /// length is final).
    horizon: bool,
    /// Wakes the task that reads the horizons (`super::quarantine`).
    settle_wanted: Notify,
    /// Set when fred reports the connection lost, cleared when it is back.
    down: AtomicBool,
    /// Whether the master has `DELIFEQ`.
    delifeq: AtomicBool,
    /// Counts the connections made to the master: raised by fred's
    /// connection set-up itself (`super::connection`), before the new
    /// connection carries any command, so it cannot lag behind a
    /// reconnection the way a flag cleared by a watcher task can.
    connection: AtomicU64,
    /// The connection (its number plus one; 0: none) on which `INFO` was
    /// read and taken in. Until `INFO` is read on the current connection
    /// the master could be a fresh, empty restart whose quarantine is not
    /// known yet: its answers do not count. Trust is thereby tied to the
    /// connection that carried the reply.
    verified_on: AtomicU64,
    /// Whether the batch script was sent in full (EVAL) on the current
    /// connection, so that EVALSHA finds it (see `batch.rs`).
    script_sent: AtomicBool,
    /// When the master last answered anything (a batch, a PING, INFO), in
    /// milliseconds after `born`, plus one (0: never). A hung master (a
    /// SIGSTOPped process, a stalled VM) keeps its TCP connection open, so
    /// the connection's state alone cannot tell it is gone; its silence
    /// can (see [`NodeState::responsive`]).
    last_answer: AtomicU64,
    /// Set when a batch written to the master timed out because the master
    /// itself was silent (the batcher's verdict, `super::pace::more_time`:
    /// the daemon's timers on time, nothing answered since the write),
    /// cleared by the master's next answer: commands still queued for it
    /// wait for a silent master, not for a busy daemon.
    silent: AtomicBool,
    /// The origin of `last_answer`.
    born: Instant,
    trust: Mutex<Trust>,
}

#[derive(Default)]
struct Trust {
    run_id: String,
    quarantine: Option<Quarantine>,
    /// Counts quarantines, so that a late reading settles only its own.
    generation: u64,
    refused: Option<String>,
    duplicate_of: Option<String>,
    /// The `run_id` whose boot certificate (`super::boot`) is known to be
    /// on the master: written by this daemon, or found there. Empty: none.
    certified: String,
    /// A certificate to take back (compare-and-delete) after a clock jump
    /// of the process it names.
    revoke: Option<String>,
    /// Why the master's wall clock is not accepted (`super::offset`), if
    /// it is not.
    clock: Option<String>,
}

/// What the watcher should do about the master's boot certificate
/// (`super::boot`), see [`NodeState::certificate_due`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CertificateDue {
    /// Write it for this `run_id`: the master is fully trusted.
    Write(String),
    /// Delete it if it names this `run_id`: the process's clock jumped.
    Revoke(String),
}

/// One quarantine of the master.
#[derive(Debug, Clone, Copy)]
struct Quarantine {
    /// Its votes count again from then.
    until: Instant,
    /// The end is known (horizons read, or the blanket is the rule).
    settled: bool,
    /// Which quarantine (see [`Trust::generation`]).
    generation: u64,
    /// When it started, for the logs.
    since: Instant,
    /// Whether a boot certificate may end it (`super::boot`): only a
    /// quarantine for the process's identity (first seen young, or a new
    /// `run_id`), never one for a clock jump.
    certifiable: bool,
}

impl NodeState {
    /// A master named `name` (for logs), quarantined after restarts for
    /// the blanket length `quarantine` when set, which the horizons may
    /// shorten when `horizon` (see the module doc).
    pub(crate) fn new(name: String, quarantine: Option<Duration>, horizon: bool) -> NodeState {
        NodeState {
            name,
            quarantine,
            horizon: horizon && quarantine.is_some(),
            settle_wanted: Notify::new(),
            down: AtomicBool::new(false),
            delifeq: AtomicBool::new(false),
            connection: AtomicU64::new(0),
            verified_on: AtomicU64::new(0),
            script_sent: AtomicBool::new(false),
            last_answer: AtomicU64::new(0),
            silent: AtomicBool::new(false),
            born: Instant::now(),
            trust: Mutex::new(Trust::default()),
        }
    }

    /// The master answered a command just now (any reply from the server,
    /// an error reply included: it is alive).
    pub(crate) fn answered(&self) {
        let since = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.last_answer.fetch_max(since + 1, Ordering::Relaxed);
        self.silent.store(false, Ordering::Relaxed);
    }

    /// A batch written to the master timed out on the master's own
    /// silence (`super::batch`).
    pub(crate) fn fell_silent(&self) {
        self.silent.store(true, Ordering::Relaxed);
    }

    /// Whether the master is silent with work outstanding (see
    /// [`NodeState::fell_silent`]), until it answers again.
    pub(crate) fn is_silent(&self) -> bool {
        self.silent.load(Ordering::Relaxed)
    }

    /// Whether the master answered something (to any command) at or after
    /// `at`, to the millisecond: a master working through a backlog of
    /// commands, not a hung one (`super::pace::more_time`).
    pub(crate) fn answered_since(&self, at: Instant) -> bool {
        match self.last_answer.load(Ordering::Relaxed) {
            0 => false,
            last => self.born + Duration::from_millis(last) > at,
        }
    }

    /// Whether the master answered something within the last `window`.
    /// The watcher PINGs every master a few times a second (`watch.rs`),
    /// so a live master answers well within it and a hung one falls out of
    /// it about `window` after its last answer.
    pub(crate) fn responsive(&self, window: Duration) -> bool {
        match self.last_answer.load(Ordering::Relaxed) {
            0 => false,
            at => {
                let last = self.born + Duration::from_millis(at - 1);
                Instant::now().saturating_duration_since(last) <= window
            }
        }
    }

    /// The connection was lost (true) or is back (false). Returns whether it
    /// was up before.
    pub(crate) fn set_down(&self, down: bool) -> bool {
        if down {
            // Whatever answers after a reconnection must be checked again.
            self.verified_on.store(0, Ordering::Relaxed);
            self.script_sent.store(false, Ordering::Relaxed);
        }
        !self.down.swap(down, Ordering::Relaxed)
    }

    /// A (re)connection happened. Its answers do not count until `INFO` is
    /// read on it: a new connection has a new number, unverified from its
    /// set-up on (`super::connection`), whenever this is called.
    pub(crate) fn reconnected(&self) {
        self.script_sent.store(false, Ordering::Relaxed);
        self.down.store(false, Ordering::Relaxed);
    }

    /// Whether the next batch must carry the script's text (EVAL) rather
    /// than its hash (EVALSHA); answering true also records it as sent,
    /// since later batches reach the master after this one.
    pub(crate) fn script_must_be_sent(&self) -> bool {
        !self.script_sent.swap(true, Ordering::Relaxed)
    }

    /// The master answered NOSCRIPT (it restarted, or its cache was
    /// flushed): send the text again.
    pub(crate) fn script_lost(&self) {
        self.script_sent.store(false, Ordering::Relaxed);
    }

    /// A new connection to the master is being set up (called by fred's
    /// connection set-up, before it carries commands). Returns its number.
    pub(crate) fn connection_opened(&self) -> u64 {
        self.connection.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The number of the current (or last) connection.
    pub(crate) fn connection(&self) -> u64 {
        self.connection.load(Ordering::SeqCst)
    }

    /// Whether `INFO` was read on the current connection.
    pub fn verified(&self) -> bool {
        self.verified_on_connection(self.connection())
    }

    /// Whether `INFO` was read on connection `number` and it is still the
    /// current one: a reply to a command sent when `number` was current,
    /// received while it still is, came on that verified connection.
    pub(crate) fn verified_on_connection(&self, number: u64) -> bool {
        self.verified_on.load(Ordering::SeqCst) == number + 1 && self.connection() == number
    }

    /// Whether the connection is known lost.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Whether releases can use `DELIFEQ`.
    pub(crate) fn has_delifeq(&self) -> bool {
        self.delifeq.load(Ordering::Relaxed)
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

#[cfg(test)]
mod tests;
