//! The review's interleavings (and idempotent
//! retries) as scripted scenarios, each on its own fresh rig (five masters
//! behind fault proxies, one replica): `chaos --interleaving slow-link|
//! idempotent|flapping|clock-offset|all`. Items 2 and 3 are in the random schedules already
//! (restarts without data, the `fresh` cluster) and in tests/.
//!
//! Unlike the random schedules, each scenario forces one precise
//! interleaving again and again for `--duration` and checks what the
//! review said could go wrong there; each also fails when its
//! interleaving did not happen ("proves nothing"). One JSON line and a
//! summary, exit 1 on any violation, as for the schedules.

mod clock_offset;
mod deadline_leftovers;
mod flapping;
mod hold;
mod hold_at_least;
mod hold_retry;
mod idempotent;
mod kind_fences;
mod refusals;
mod rig;
mod rolling_permit;
mod skewed;
mod slow_link;

use crate::cluster::BoxError;
use rig::Rig;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// Which interleaving to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// Item 1: a late client over a slow link, deadlines just above waits.
    SlowLink,
    /// Item 1 with `request_id`: the late client retries at once with the
    /// same request id, after DEADLINE_EXCEEDED or a (simulated) lost answer.
    Idempotent,
    /// Item 4: a flapping master, then a restart without data.
    Flapping,
    /// Item 6: a master's clock far ahead, majorities restarted empty.
    ClockOffset,
    /// Cross-kind defect 1: a Hold retried with its request id on a new
    /// connection, the first stream then closed; a third client tries.
    HoldRetry,
    /// Cross-kind defect 3: plain, permit, shared, permit of another
    /// limit, plain, one after another: fences must grow.
    KindFences,
    /// Cross-kind defect 2: a permit held across a rolling restart of
    /// three masters; a plain lock and another limit must be refused.
    RollingPermit,
    /// Cross-kind defect 5: Acquires with 1-20 ms deadlines of fresh
    /// resources; nothing of them may be left on the masters.
    DeadlineLeftovers,
    /// Cross-kind defects 4 and 6: a reader after a writer's hand-off; a
    /// Release with two masters in restart quarantine.
    Refusals,
    /// A plain lock with a `hold_at_least` released at once: the next
    /// holder (plain or a permit) must wait for the hold to run.
    HoldAtLeast,
    /// The review's four (not the cross-kind ones), one after the other.
    All,
    /// The cross-kind ones and the `hold_at_least` one, one after the
    /// other.
    Kinds,
}

/// What one scenario found.
#[derive(Debug)]
pub(crate) struct Outcome {
    name: &'static str,
    /// (check, detail) of every violation.
    violations: Vec<(&'static str, String)>,
    /// Figures, in order.
    figures: Vec<(&'static str, i64)>,
}

impl Outcome {
    fn new(name: &'static str) -> Outcome {
        Outcome {
            name,
            violations: Vec::new(),
            figures: Vec::new(),
        }
    }

    fn violation(&mut self, check: &'static str, detail: String) {
        eprintln!("VIOLATION {}/{check}: {detail}", self.name);
        self.violations.push((check, detail));
    }

    fn figure(&mut self, name: &'static str, value: impl TryInto<i64>) {
        self.figures
            .push((name, value.try_into().unwrap_or(i64::MAX)));
    }
}

/// The daemon and masters a rig runs.
#[derive(Debug, Clone)]
pub(crate) struct Daemon {
    /// The `redlockd` binary.
    pub binary: PathBuf,
    /// The Valkey server binary.
    pub server: PathBuf,
    /// `redlock.max_ttl`.
    pub max_ttl: Duration,
    /// `redlock.restart_quarantine` (off only for a counterfactual).
    pub quarantine: bool,
    /// `REDLOCKD__TESTING__COUNTERFACTUALS` (`--counterfactual`), empty for none.
    pub counterfactual: Vec<String>,
}

/// Runs `which` for `duration` each on `daemon`; the outcomes.
pub(crate) async fn run(
    which: Which,
    seed: u64,
    duration: Duration,
    daemon: &Daemon,
) -> Result<Vec<Outcome>, BoxError> {
    let (max_ttl, server) = (daemon.max_ttl, &daemon.server);
    let scenarios = match which {
        Which::All => vec![
            Which::SlowLink,
            Which::Idempotent,
            Which::Flapping,
            Which::ClockOffset,
        ],
        Which::Kinds => vec![
            Which::HoldRetry,
            Which::KindFences,
            Which::DeadlineLeftovers,
            Which::Refusals,
            Which::RollingPermit,
            Which::HoldAtLeast,
        ],
        one => vec![one],
    };
    let mut outcomes = Vec::new();
    for scenario in scenarios {
        let dir = log_dir(scenario)?;
        let skewed = match scenario {
            Which::ClockOffset => Some(skewed::Skewed::start(
                server,
                clock_offset::offset(),
                dir.clone(),
            )?),
            _ => None,
        };
        let extra = match scenario {
            Which::SlowLink | Which::Idempotent => vec![(
                "server.deadline_reserve".to_owned(),
                std::env::var("CHAOS_DEADLINE_RESERVE")
                    .unwrap_or_else(|_| slow_link::RESERVE.to_owned()),
            )],
            _ => Vec::new(),
        };
        let rig = Rig::start(daemon, skewed, dir.clone(), extra).await?;
        let done = match scenario {
            Which::SlowLink => slow_link::run(&rig, seed, duration, max_ttl).await,
            Which::Idempotent => idempotent::run(&rig, seed, duration, max_ttl).await,
            Which::Flapping => flapping::run(&rig, seed, duration, max_ttl).await,
            Which::HoldRetry => hold_retry::run(&rig, seed, duration).await,
            Which::KindFences => kind_fences::run(&rig, seed, duration).await,
            Which::HoldAtLeast => hold_at_least::run(&rig, seed, duration).await,
            Which::DeadlineLeftovers => deadline_leftovers::run(&rig, seed, duration).await,
            Which::Refusals => refusals::run(&rig, seed, duration, max_ttl).await,
            Which::RollingPermit => rolling_permit::run(&rig, seed, duration, max_ttl).await,
            _ => clock_offset::run(&rig, seed, duration, max_ttl).await,
        };
        let crashed = rig.replicas.crashed().await;
        rig.stop().await;
        let mut outcome = done?;
        for crash in crashed {
            outcome.violation("replica_crashed", crash);
        }
        if outcome.violations.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            eprintln!("chaos: logs of {} kept in {}", outcome.name, dir.display());
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// A fresh directory for one scenario's logs.
fn log_dir(which: Which) -> Result<PathBuf, BoxError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "redlockd-interleaving-{which:?}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Violations of every scenario.
pub(crate) fn violations(outcomes: &[Outcome]) -> usize {
    outcomes.iter().map(|o| o.violations.len()).sum()
}

/// One JSON line: the total of violations, and per scenario its
/// violations by check and its figures.
pub(crate) fn json(outcomes: &[Outcome], seed: u64) -> String {
    let total = violations(outcomes);
    let mut out = format!("{{\"seed\":{seed},\"violations\":{total},\"scenarios\":{{");
    for (i, o) in outcomes.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            out,
            "{sep}\"{}\":{{\"violations\":{}",
            o.name,
            o.violations.len()
        );
        for (name, value) in &o.figures {
            let _ = write!(out, ",\"{name}\":{value}");
        }
        out.push('}');
    }
    out.push_str("}}");
    out
}

/// A line per scenario.
pub(crate) fn summary(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    for o in outcomes {
        let figures: Vec<String> = o.figures.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let _ = writeln!(
            out,
            "{}: {} violations; {}",
            o.name,
            o.violations.len(),
            figures.join(" ")
        );
    }
    out
}
