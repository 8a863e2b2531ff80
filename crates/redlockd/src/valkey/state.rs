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

use super::offset::Offset;
use super::server_info::ServerInfo;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::futures::Notified;
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
pub enum CertificateDue {
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
    pub fn new(name: String, quarantine: Option<Duration>, horizon: bool) -> NodeState {
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
    pub fn answered(&self) {
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
    pub fn is_silent(&self) -> bool {
        self.silent.load(Ordering::Relaxed)
    }

    /// Whether the master answered something (to any command) at or after
    /// `at`, to the millisecond: a master working through a backlog of
    /// commands, not a hung one (`super::pace::more_time`).
    pub fn answered_since(&self, at: Instant) -> bool {
        match self.last_answer.load(Ordering::Relaxed) {
            0 => false,
            last => self.born + Duration::from_millis(last) > at,
        }
    }

    /// Whether the master answered something within the last `window`.
    /// The watcher PINGs every master a few times a second (`watch.rs`),
    /// so a live master answers well within it and a hung one falls out of
    /// it about `window` after its last answer.
    pub fn responsive(&self, window: Duration) -> bool {
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
    pub fn set_down(&self, down: bool) -> bool {
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
    pub fn reconnected(&self) {
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

    /// A new connection to the master is being set up (called by fred's
    /// connection set-up, before it carries commands). Returns its number.
    pub fn connection_opened(&self) -> u64 {
        self.connection.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The number of the current (or last) connection.
    pub fn connection(&self) -> u64 {
        self.connection.load(Ordering::SeqCst)
    }

    /// Whether `INFO` was read on the current connection.
    pub fn verified(&self) -> bool {
        self.verified_on_connection(self.connection())
    }

    /// Whether `INFO` was read on connection `number` and it is still the
    /// current one: a reply to a command sent when `number` was current,
    /// received while it still is, came on that verified connection.
    pub fn verified_on_connection(&self, number: u64) -> bool {
        self.verified_on.load(Ordering::SeqCst) == number + 1 && self.connection() == number
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
            && trust.clock.is_none()
            && trust.duplicate_of.is_none()
            && trust.quarantine.is_none_or(|q| Instant::now() >= q.until)
    }

    /// Whether the master is in restart quarantine now.
    pub fn quarantined(&self) -> bool {
        !self.quarantine_left().is_zero()
    }

    /// How much longer the restart quarantine lasts (zero: none). While
    /// unsettled, this is the blanket bound.
    pub fn quarantine_left(&self) -> Duration {
        self.lock().quarantine.map_or(Duration::ZERO, |q| {
            q.until.saturating_duration_since(Instant::now())
        })
    }

    /// Whether the master never counts: refused (a replica, too old) or
    /// the same server as another configured master.
    pub fn excluded(&self) -> bool {
        let trust = self.lock();
        trust.refused.is_some() || trust.duplicate_of.is_some()
    }

    /// The quarantine waiting for its horizons to be read, by generation:
    /// `None` when there is none, it is settled, or it has run out anyway.
    pub fn unsettled(&self) -> Option<u64> {
        self.lock()
            .quarantine
            .filter(|q| !q.settled && Instant::now() < q.until)
            .map(|q| q.generation)
    }

    /// The unsettled quarantine that a boot certificate may end, by
    /// generation, with the `run_id` the certificate must name.
    pub fn certifiable(&self) -> Option<(u64, String)> {
        let trust = self.lock();
        trust
            .quarantine
            .filter(|q| q.certifiable && !q.settled && Instant::now() < q.until)
            .filter(|_| !trust.run_id.is_empty())
            .map(|q| (q.generation, trust.run_id.clone()))
    }

    /// What to do about the boot certificate now, if anything: take back
    /// one a clock jump made untrue, or write one once the master is fully
    /// trusted (verified, no quarantine left, not refused) and none is
    /// known for its process. Never with the quarantine off: trust without
    /// it proves nothing.
    pub fn certificate_due(&self) -> Option<CertificateDue> {
        self.quarantine?;
        let trusted = self.trusted();
        let trust = self.lock();
        if let Some(run_id) = &trust.revoke {
            return Some(CertificateDue::Revoke(run_id.clone()));
        }
        (trusted && !trust.run_id.is_empty() && trust.certified != trust.run_id)
            .then(|| CertificateDue::Write(trust.run_id.clone()))
    }

    /// The certificate naming `run_id` is on the master (written, or found).
    pub fn certificate_known(&self, run_id: &str) {
        let mut trust = self.lock();
        if trust.revoke.as_deref() != Some(run_id) {
            trust.certified = run_id.to_owned();
        }
    }

    /// The certificate naming `run_id` was taken back (or was not there).
    pub fn certificate_revoked(&self, run_id: &str) {
        let mut trust = self.lock();
        if trust.revoke.as_deref() == Some(run_id) {
            trust.revoke = None;
        }
    }

    /// Resolves when a quarantine wants its horizons read (see
    /// [`NodeState::unsettled`]); a request made while nobody waits is kept.
    pub fn settle_wanted(&self) -> Notified<'_> {
        self.settle_wanted.notified()
    }

    /// The horizons were read for quarantine `generation`: it ends at
    /// `until` (`None`: at once). `how` says what was read, for the log.
    /// Ignored if a newer quarantine started meanwhile. Returns whether it
    /// applied.
    pub fn settle(&self, generation: u64, until: Option<Instant>, how: &str) -> bool {
        let mut trust = self.lock();
        let Some(current) = trust
            .quarantine
            .filter(|q| q.generation == generation && !q.settled)
        else {
            return false;
        };
        let now = Instant::now();
        match until.filter(|until| *until > now) {
            Some(until) => {
                let left = until - now;
                tracing::warn!(node = %self.name, quarantine = ?left,
                    total = ?(until - current.since), %how,
                    "master may have lost locks that are still held: its votes do not count \
                     until the longest of them has expired (horizon quarantine)");
                trust.quarantine = Some(Quarantine {
                    until,
                    settled: true,
                    ..current
                });
            }
            None => {
                tracing::info!(node = %self.name, after = ?(now - current.since), %how,
                    "no lock the master may have lost can still be held (no horizon left): \
                     it votes again");
                trust.quarantine = None;
            }
        }
        true
    }

    /// The master's name, for logs.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `run_id` last seen (empty before the first connection).
    pub fn run_id(&self) -> String {
        self.lock().run_id.clone()
    }

    /// [`NodeState::observe_on`] the current connection (tests).
    #[cfg(test)]
    pub fn observe(&self, info: &ServerInfo) {
        self.observe_on(self.connection(), info);
    }

    /// Takes in what `INFO` said after a (re)connection: the server's
    /// features, refusals and warnings, and quarantine after a restart;
    /// `connection` is the number of the connection that was current when
    /// `INFO` was sent. Answers count from then on, on that connection
    /// only: if another was opened meanwhile, nothing counts until `INFO`
    /// is read on it.
    pub fn observe_on(&self, connection: u64, info: &ServerInfo) {
        self.delifeq.store(info.has_delifeq(), Ordering::Relaxed);
        let mut trust = self.lock();
        let first = trust.run_id.is_empty();
        let changed = trust.run_id != info.run_id;
        let restarted = !first && changed;
        if changed {
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
        // A new server process behind this address (a restart, or another
        // server: a promoted replica) is quarantined; so is one first seen
        // young. The same process seen again after a reconnection keeps
        // whatever quarantine it has: it lost nothing meanwhile.
        let blanket = self.quarantine.filter(|_| changed).and_then(|period| {
            let since_start = quarantine_left(info.uptime_seconds, period);
            match restarted {
                // Another server may have lost keys at any moment up to
                // now, whatever its uptime: the period counts from now.
                true => Some(since_start.map_or(period, |left| left.max(period))),
                false => since_start,
            }
        });
        if let Some(left) = blanket {
            let why = match restarted {
                true => "the master's run_id changed (a restart, or another server)",
                false => "the master started recently",
            };
            self.impose(&mut trust, left, why, info.uptime_seconds, true);
        }
        // Still under the lock: whoever sees the connection verified (the
        // task a quarantine just woke, `trusted`) sees the quarantine too.
        self.verified_on.store(connection + 1, Ordering::SeqCst);
        drop(trust);
    }

    /// Quarantines the master from now (its clock jumped: keys may have
    /// expired early), for the blanket period until the horizons say.
    pub fn quarantine_now(&self, why: &str) {
        if let Some(period) = self.quarantine {
            tracing::error!(node = %self.name, "{why}: quarantining the master");
            let mut trust = self.lock();
            // Keys may have expired early on this very process: a boot
            // certificate naming it no longer tells the truth.
            if !trust.run_id.is_empty() {
                trust.revoke = Some(trust.run_id.clone());
                trust.certified.clear();
            }
            self.impose(&mut trust, period, why, 0, false);
        } else {
            tracing::error!(node = %self.name, "{why} (restart quarantine is off)");
        }
    }

    /// Starts a quarantine of `left` (the blanket bound), unsettled under the
    /// horizon quarantine (the reading task is woken), final otherwise.
    fn impose(
        &self,
        trust: &mut Trust,
        left: Duration,
        why: &str,
        uptime_s: u64,
        certifiable: bool,
    ) {
        let now = Instant::now();
        trust.generation += 1;
        let mut until = now + left;
        if let Some(current) = trust.quarantine.filter(|q| q.until > until) {
            // A longer quarantine is kept. A settled one outlasts this
            // event's blanket bound, so it covers this event too.
            if current.settled {
                trust.quarantine = Some(Quarantine {
                    generation: trust.generation,
                    ..current
                });
                return;
            }
            until = current.until;
        }
        // A running clock-jump quarantine is not for the process's
        // identity: no certificate may end what replaces it.
        let certifiable = certifiable
            && trust
                .quarantine
                .is_none_or(|q| q.certifiable || q.until <= now);
        trust.quarantine = Some(Quarantine {
            until,
            settled: !self.horizon,
            generation: trust.generation,
            since: now,
            certifiable,
        });
        if self.horizon {
            tracing::info!(node = %self.name, uptime_s, blanket = ?left,
                "{why} and may have lost its keys: its votes do not count until the other \
                 masters' horizons are read");
            self.settle_wanted.notify_one();
        } else {
            tracing::warn!(node = %self.name, uptime_s, quarantine = ?left,
                "{why} and may have lost its keys: its votes do not count until the \
                 quarantine (max_ttl plus drift) ends");
        }
    }

    /// Takes in a reading of the master's clock offset against `bound`: a
    /// master possibly beyond it is not trusted until a reading within it
    /// (`super::offset`). Logs each change once.
    pub(crate) fn clock_offset(&self, offset: Offset, bound: Duration) {
        let mut trust = self.lock();
        let beyond = offset.beyond(bound);
        match (beyond, trust.clock.is_some()) {
            (true, false) => {
                tracing::error!(node = %self.name, offset_s = offset.seconds,
                    uncertainty_s = offset.uncertainty, bound = ?bound,
                    "the master's clock is off by more than redlock.max_clock_offset: its \
                     answers do not count until it is back within bound");
                trust.clock = Some(format!("clock off by {:.3} s", offset.seconds));
            }
            (false, true) => {
                tracing::warn!(node = %self.name, offset_s = offset.seconds,
                    "the master's clock is back within redlock.max_clock_offset");
                trust.clock = None;
            }
            _ => {}
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

#[cfg(test)]
mod tests;
