//! Whether a master's answers count: its quarantine (blanket, unsettled,
//! settled), its boot certificate, what INFO said of it, its clock offset
//! and whether it duplicates another configured master.

use super::{quarantine_left, CertificateDue, NodeState, Quarantine, Trust};
use crate::valkey::offset::Offset;
use crate::valkey::server_info::ServerInfo;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

impl NodeState {
    /// Whether this master's answers count toward a quorum now.
    pub(crate) fn trusted(&self) -> bool {
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
    pub(crate) fn excluded(&self) -> bool {
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
    pub(crate) fn certifiable(&self) -> Option<(u64, String)> {
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
    pub(crate) fn certificate_due(&self) -> Option<CertificateDue> {
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
    pub(crate) fn certificate_known(&self, run_id: &str) {
        let mut trust = self.lock();
        if trust.revoke.as_deref() != Some(run_id) {
            trust.certified = run_id.to_owned();
        }
    }

    /// The certificate naming `run_id` was taken back (or was not there).
    pub(crate) fn certificate_revoked(&self, run_id: &str) {
        let mut trust = self.lock();
        if trust.revoke.as_deref() == Some(run_id) {
            trust.revoke = None;
        }
    }

    /// Resolves when a quarantine wants its horizons read (see
    /// [`NodeState::unsettled`]); a request made while nobody waits is kept.
    pub(crate) fn settle_wanted(&self) -> Notified<'_> {
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
    pub(crate) fn observe(&self, info: &ServerInfo) {
        self.observe_on(self.connection(), info);
    }

    /// Takes in what `INFO` said after a (re)connection: the server's
    /// features, refusals and warnings, and quarantine after a restart;
    /// `connection` is the number of the connection that was current when
    /// `INFO` was sent. Answers count from then on, on that connection
    /// only: if another was opened meanwhile, nothing counts until `INFO`
    /// is read on it.
    pub(crate) fn observe_on(&self, connection: u64, info: &ServerInfo) {
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
    pub(crate) fn quarantine_now(&self, why: &str) {
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
    pub(crate) fn set_duplicate_of(&self, other: Option<String>) {
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
}
