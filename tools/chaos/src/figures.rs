//! The figures of a run, computed from its history and the checkers'
//! findings (printed by `report.rs`).

use crate::findings::{Check, Findings};
use crate::history::{Attempt, Failure, Fault, FaultKind, History, Kind, Time, Via, Workload};
use crate::leftovers::LeftoverFigures;
use std::collections::BTreeMap;
use std::time::Duration;

/// After the three-masters phase, how long failures still count toward the
/// recovery time.
const RECOVERY_HORIZON: Duration = Duration::from_secs(5);
/// How long after a restarted master's return a miss is put down to it.
const RETURN_WINDOW: Duration = Duration::from_secs(2);
/// Availability misses described in detail.
const MISSES_SHOWN: usize = 10;

/// Everything printed about a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Figures {
    /// `full` or `restarts`.
    pub schedule: String,
    /// The seed.
    pub seed: u64,
    /// Whether the daemons ran with restart quarantine.
    pub quarantine: bool,
    /// Planned length of the run.
    pub duration: Duration,
    /// All grants, and those of each workload.
    pub grants: usize,
    /// Contended grants.
    pub contended: usize,
    /// Uncontended grants.
    pub uncontended: usize,
    /// Grants to `Hold` sessions (part of the contended ones).
    pub session_grants: usize,
    /// Sessions told `draining` by a replica stopped with SIGTERM.
    pub sessions_drained: usize,
    /// Resource grants of the multi clients (`crate::multi`): one per
    /// resource of each lock on several resources.
    pub multi_resource_grants: usize,
    /// Grants received while at most two masters counted as faulted.
    pub healthy_grants: usize,
    /// Time with at most two masters counted as faulted.
    pub healthy_time: Duration,
    /// The least `healthy_grants` for a run to count.
    pub min_grants: usize,
    /// Faults injected, by kind (three-masters phase included).
    pub faults: BTreeMap<FaultKind, usize>,
    /// Violations, by check.
    pub violations: BTreeMap<Check, usize>,
    /// Uncontended acquisitions made with at most two masters faulted and
    /// their replica up: how many, and how many were granted.
    pub availability: (usize, usize),
    /// Why the others failed.
    pub unavailable_by: BTreeMap<String, usize>,
    /// The first of those failures, with the faults around them.
    pub misses: Vec<String>,
    /// Failures during which a master fault began (a master that voted in
    /// the acquire round lost before the fence commit).
    pub misses_fault_began: usize,
    /// Failures within 2 s after a restarted master came back (it
    /// reconnects, and is quarantined, meanwhile).
    pub misses_after_restart: usize,
    /// Latencies of UNAVAILABLE answers with three masters faulted.
    pub three_unavailable: Vec<Duration>,
    /// Other answers in that phase (grants, other codes).
    pub three_other: usize,
    /// From the end of that phase to the last failed acquisition after it.
    pub recovery: Option<Duration>,
    /// The last failures after that phase.
    pub slow_recovery: Vec<String>,
    /// Failed contended Acquires, by outcome.
    pub contended_failures: BTreeMap<String, usize>,
    /// The checkers' findings (for the pause figures).
    pub findings: Findings,
    /// Clients frozen mid-session (`crate::frozen`).
    pub frozen: crate::frozen::FrozenFigures,
    /// Bursts of Acquire calls (`crate::burst`).
    pub bursts: BurstFigures,
    /// Whether the run mixed every kind on the hot resources (`--mix`).
    pub mixed: bool,
    /// What the mixed workload did (`crate::mix`, `crate::hold_retry`,
    /// `crate::leftovers`).
    pub mix: MixFigures,
    /// Grants by kind (`plain`, `shared`, `permit2`, `permit3`, `multi`).
    pub by_kind: BTreeMap<String, usize>,
    /// Exclusive grants of the `--rw` and `--mix` unary clients.
    pub mode_exclusive: usize,
    /// Acquires not granted, by code (every workload that records them).
    pub failed_by_code: BTreeMap<String, usize>,
    /// UNKNOWN statuses: (transport errors, others), and their messages.
    pub unknown: (usize, usize),
    pub unknown_messages: BTreeMap<String, usize>,
    /// UNKNOWN statuses during a replica's kill or drain.
    pub unknown_replica_fault: usize,
    /// Readers refused while free, Releases UNAVAILABLE with every master
    /// answering (`crate::refusals`).
    pub refusals: crate::refusals::RefusalFigures,
}

/// What the mixed workload did.
#[derive(Debug, Clone, Default)]
pub(crate) struct MixFigures {
    /// Unary Acquires retried with their request id, and acquisitions
    /// granted on a retry.
    pub retries: usize,
    pub retried_grants: usize,
    /// Hold sessions retried with their request id on a new connection,
    /// and those retries granted.
    pub hold_retries: usize,
    pub hold_retries_granted: usize,
    /// The masters read after short-deadline Acquires.
    pub leftovers: LeftoverFigures,
    /// Elections (`crate::elections`): campaigns opened, and withdrawn
    /// unelected; Resigns sent again after their leadership ended, and
    /// those that still found it; changes observers were told; Proclaims
    /// sent by leaders, and those accepted.
    pub campaigns: usize,
    pub campaigns_withdrawn: usize,
    pub stale_resigns: (usize, usize),
    pub observed_changes: usize,
    pub proclaims: (usize, usize),
}

/// Whether an UNKNOWN status's message is the transport's (the
/// connection broke or was refused), not an answer of the daemon.
pub(crate) fn transport_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "transport error",
        "connection",
        "broken pipe",
        "h2 protocol error",
        "error reading a body",
        "error trying to connect",
        "stream closed",
        "operation was canceled",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// A grant's kind as a figure's key.
fn kind_key(kind: Kind) -> String {
    match kind {
        Kind::Permit(limit) => format!("permit{limit}"),
        kind => kind.name().to_owned(),
    }
}

fn failure_name(failure: &Failure) -> String {
    match failure {
        Failure::Status(code) => format!("{code:?}"),
        Failure::TimedOut => "ClientTimeout".to_owned(),
    }
}

/// Masters counted as faulted at some point of `[from, to]`.
pub(crate) fn masters_faulted(faults: &[Fault], from: Time, to: Time) -> usize {
    let mut targets: Vec<usize> = faults
        .iter()
        .filter(|f| f.kind.on_master() && f.start <= to && f.counts_until >= from)
        .map(|f| f.target)
        .collect();
    targets.sort_unstable();
    targets.dedup();
    targets.len()
}

/// How long at most two masters counted as faulted (10 ms resolution).
fn healthy_time(faults: &[Fault], end: Time) -> Duration {
    let step = Duration::from_millis(10);
    let (mut t, mut healthy) = (Duration::ZERO, Duration::ZERO);
    while t < end {
        if masters_faulted(faults, t, t + step) <= 2 {
            healthy += step;
        }
        t += step;
    }
    healthy
}

fn replica_faulted(faults: &[Fault], a: &Attempt) -> bool {
    faults.iter().any(|f| {
        !f.kind.on_master()
            && f.target == a.replica
            && f.start <= a.received
            && f.counts_until >= a.sent
    })
}

/// An availability miss and the faults within a few seconds of it.
fn describe_miss(a: &Attempt, faults: &[Fault]) -> String {
    let near = Duration::from_secs(3);
    let around: Vec<String> = faults
        .iter()
        .filter(|f| f.start <= a.received + near && f.counts_until + near >= a.sent)
        .map(|f| {
            format!(
                "{} #{} {:.3}s..{:.3}s (counts until {:.3}s)",
                f.kind.name(),
                f.target,
                f.start.as_secs_f64(),
                f.end.as_secs_f64(),
                f.counts_until.as_secs_f64()
            )
        })
        .collect();
    format!(
        "acquisition on replica {} sent {:.3}s answered {:.3}s: {:?} {:?}; faults near: [{}]",
        a.replica,
        a.sent.as_secs_f64(),
        a.received.as_secs_f64(),
        a.outcome,
        a.message.as_deref().unwrap_or(""),
        around.join(", ")
    )
}

impl Figures {
    /// Computes the figures of `history`.
    pub(crate) fn new(history: &History, findings: Findings, min_per_healthy_s: f64) -> Figures {
        let faults = &history.faults;
        let mut f = Figures {
            grants: history.grants.len(),
            contended: history
                .grants
                .iter()
                .filter(|g| g.workload == Workload::Contended)
                .count(),
            healthy_time: healthy_time(faults, history.phases.end),
            ..Figures::default()
        };
        f.uncontended = f.grants - f.contended;
        f.session_grants = history.grants.iter().filter(|g| g.via == Via::Hold).count();
        for g in &history.grants {
            *f.by_kind.entry(kind_key(g.kind)).or_default() += 1;
        }
        f.mode_exclusive = history
            .grants
            .iter()
            .filter(|g| g.kind == Kind::Plain && g.client >= crate::mix::RW_FIRST_ID)
            .count();
        for call in &history.failed {
            *f.failed_by_code
                .entry(failure_name(&call.failure))
                .or_default() += 1;
            if call.failure != Failure::Status(tonic::Code::Unknown) {
                continue;
            }
            match transport_message(&call.message) {
                true => f.unknown.0 += 1,
                false => f.unknown.1 += 1,
            }
            let mut message: String = call.message.chars().take(100).collect();
            message.retain(|c| c != '"' && c != '\\');
            *f.unknown_messages.entry(message).or_default() += 1;
            let replica_fault = faults.iter().any(|x| {
                !x.kind.on_master()
                    && x.target == call.replica
                    && x.start <= call.received
                    && x.counts_until >= call.sent
            });
            f.unknown_replica_fault += usize::from(replica_fault);
        }
        f.sessions_drained = history.sessions_drained;
        f.multi_resource_grants = history
            .grants
            .iter()
            .filter(|g| g.kind == Kind::Multi)
            .count();
        f.healthy_grants = history
            .grants
            .iter()
            .filter(|g| masters_faulted(faults, g.received, g.received) <= 2)
            .count();
        f.min_grants = (f.healthy_time.as_secs_f64() * min_per_healthy_s).ceil() as usize;
        for kind in FaultKind::ALL {
            f.faults.insert(kind, 0);
        }
        for fault in faults {
            *f.faults.entry(fault.kind).or_default() += 1;
        }
        for check in Check::ALL {
            f.violations.insert(check, findings.count(check));
        }
        for a in &history.attempts {
            if masters_faulted(faults, a.sent, a.received) <= 2 && !replica_faulted(faults, a) {
                f.availability.0 += 1;
                match &a.outcome {
                    Ok(()) => f.availability.1 += 1,
                    Err(failure) => {
                        *f.unavailable_by.entry(failure_name(failure)).or_default() += 1;
                        f.classify_miss(a, faults);
                        if f.misses.len() < MISSES_SHOWN {
                            f.misses.push(describe_miss(a, faults));
                        }
                    }
                }
            }
        }
        if let Some((start, end)) = history.phases.three {
            for a in history
                .attempts
                .iter()
                .filter(|a| a.sent >= start && a.received <= end)
            {
                match a.outcome {
                    Err(Failure::Status(tonic::Code::Unavailable)) => {
                        f.three_unavailable.push(a.received - a.sent);
                    }
                    _ => f.three_other += 1,
                }
            }
            f.three_unavailable.sort_unstable();
            let back = faults.iter().filter(|x| x.three_phase).map(|x| x.end).max();
            if let Some(back) = back {
                let failures: Vec<&Attempt> = history
                    .attempts
                    .iter()
                    .filter(|a| a.sent >= back && a.sent <= back + RECOVERY_HORIZON)
                    .filter(|a| a.outcome.is_err())
                    .collect();
                let last_failure = failures.iter().map(|a| a.received).max();
                f.recovery = Some(last_failure.map_or(Duration::ZERO, |t| t - back));
                let shown = failures.iter().rev().take(MISSES_SHOWN);
                f.slow_recovery = shown.map(|a| describe_miss(a, faults)).collect();
            }
        }
        for failure in &history.contended_failures {
            *f.contended_failures
                .entry(failure_name(failure))
                .or_default() += 1;
        }
        f.refusals = crate::refusals::figures(history);
        f.findings = findings;
        f
    }

    /// Puts an availability miss down to a fault that began during the
    /// call, or to a restarted master's return shortly before.
    fn classify_miss(&mut self, a: &Attempt, faults: &[Fault]) {
        let mut on_master = faults.iter().filter(|x| x.kind.on_master());
        if on_master
            .clone()
            .any(|x| x.start >= a.sent && x.start <= a.received)
        {
            self.misses_fault_began += 1;
        } else if on_master.any(|x| {
            x.kind == FaultKind::MasterRestart
                && x.end <= a.received
                && x.end + RETURN_WINDOW >= a.sent
        }) {
            self.misses_after_restart += 1;
        }
    }

    /// Total violations.
    pub(crate) fn violation_count(&self) -> usize {
        self.violations.values().sum()
    }

    /// Share of uncontended acquisitions granted with at most two masters
    /// faulted, in percent.
    pub(crate) fn availability_pct(&self) -> Option<f64> {
        let (tried, granted) = self.availability;
        (tried > 0).then(|| 100.0 * granted as f64 / tried as f64)
    }
}

/// The figures of the bursts.
#[derive(Debug, Clone, Default)]
pub(crate) struct BurstFigures {
    /// Bursts fired.
    pub bursts: usize,
    /// Calls made.
    pub calls: usize,
    /// Granted.
    pub granted: usize,
    /// The others by code.
    pub codes: BTreeMap<String, usize>,
    /// UNAVAILABLE with every master healthy and the replica up.
    pub unavailable_healthy: usize,
    /// UNAVAILABLE with one or two masters faulted (a figure).
    pub unavailable_faulted: usize,
    /// Per burst: its first call sent, calls, granted, UNAVAILABLE.
    pub per_burst: Vec<(Time, usize, usize, usize)>,
    /// Bursts that could not run (their process failed): which, when,
    /// and why.
    pub failed: Vec<(usize, Time, String)>,
}
