//! The fault schedule: planned up front from the seed (so a seed names one
//! schedule, whatever the quarantine setting), then injected on time, each
//! fault recorded as it really happened.
//!
//! `full`: after a warm-up, faults of every kind at random, never more than
//! two masters counted as faulted at once, where a master counts as faulted
//! from the injection until it is fully usable again: its return plus a
//! grace for reconnection, plus the restart quarantine after a restart
//! without data (budgeted whether or not quarantine is on, so both settings
//! run the same schedule). At most one replica is down at a time. Then a
//! short phase with three masters faulted (two SIGSTOPped, one
//! unreachable), and a healthy tail.
//!
//! `restarts`: the counterfactual. Every cycle restarts three masters
//! without data within a few tens of milliseconds, while holders keep long
//! leases, then waits out the quarantine.
//!
//! `fresh`: the whole cluster starts fresh mid-run, again and again (issue
//! 13): all five masters are killed within a few tens of milliseconds,
//! stay down for longer than any lease can last (`max_ttl` plus drift plus
//! a second), and start again empty together, a new cluster behind the
//! same addresses. The daemons keep running through it with their
//! history (grants made, boot certificates of the old processes). No lock
//! granted before can still be valid when the new masters answer, so the
//! default quarantine must let them vote at once, and no check may fail.

use crate::cluster::{BoxError, Cluster};
use crate::history::{Clock, Fault, FaultKind, Phases};
use crate::replicas::Replicas;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_testkit::proxy::Mode;
use std::time::Duration;

/// Which schedule to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Schedule {
    /// Every fault kind at random, at most two masters faulted at once.
    Full,
    /// Three masters restarted without data at once, again and again.
    Restarts,
    /// All masters down for longer than any lease, then started fresh
    /// together, again and again.
    Fresh,
}

/// How long a target counts as faulted after it is back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Reconnection: "full service again within 1 s after a master returns".
    pub grace: Duration,
    /// A restarted master's quarantine (max_ttl + drift, and detection).
    pub quarantine: Duration,
}

impl Budget {
    /// How long `kind` counts after its end.
    pub(crate) fn after(&self, kind: FaultKind) -> Duration {
        match kind {
            FaultKind::MasterRestart => self.grace + self.quarantine,
            _ => self.grace,
        }
    }
}

/// One fault to inject.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Planned {
    /// What.
    pub kind: FaultKind,
    /// Master or replica index.
    pub target: usize,
    /// When, from the start of the run.
    pub at: Duration,
    /// How long it lasts.
    pub len: Duration,
    /// Proxy delay of a slow master.
    pub delay: Duration,
    /// Part of the three-masters phase.
    pub three_phase: bool,
}

/// The schedule of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Every fault, by start time.
    pub faults: Vec<Planned>,
    /// Where the phases are.
    pub phases: Phases,
}

/// Daemon replicas the schedule may kill (one at a time).
pub(crate) const REPLICAS: usize = 2;
/// Warm-up before the first fault.
const WARM_UP: Duration = Duration::from_secs(2);
/// Healthy tail after the last fault.
const TAIL: Duration = Duration::from_secs(3);
/// Length of the three-masters phase.
const THREE_LEN: Duration = Duration::from_millis(2500);
/// Shortest run that gets a three-masters phase.
const THREE_MIN_RUN: Duration = Duration::from_secs(20);
/// Masters restarted one after another by a rolling restart (`--mix`).
const ROLLING: usize = 3;
/// Where the rolling restart starts: after the warm-up, once long holders
/// hold.
const ROLLING_AT: Duration = Duration::from_secs(3);
/// How long each master of a rolling restart is down.
const ROLLING_DOWN: Duration = Duration::from_millis(300);

fn between(rng: &mut StdRng, lo_ms: u64, hi_ms: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo_ms..=hi_ms))
}

/// Plans the faults of `schedule` for a run of `duration`.
pub(crate) fn plan(
    schedule: Schedule,
    seed: u64,
    duration: Duration,
    masters: usize,
    budget: Budget,
    rolling: bool,
) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    match schedule {
        Schedule::Full => full(&mut rng, duration, masters, budget, rolling),
        Schedule::Restarts => restarts(&mut rng, duration, masters, budget),
        Schedule::Fresh => fresh(&mut rng, duration, masters, budget),
    }
}

/// A rolling restart from `at`: [`ROLLING`] distinct masters restarted
/// empty one after another, each only once the one before has waited out
/// its quarantine (so one master at a time counts as faulted); with its
/// end, or `None` if it does not end by `until`.
fn rolling_restart(
    rng: &mut StdRng,
    at: Duration,
    until: Duration,
    masters: usize,
    budget: Budget,
) -> Option<(Vec<Planned>, Duration)> {
    let mut targets: Vec<usize> = (0..masters).collect();
    let mut faults = Vec::new();
    let mut t = at;
    for _ in 0..ROLLING.min(masters) {
        let target = targets.remove(rng.random_range(0..targets.len()));
        faults.push(Planned {
            kind: FaultKind::MasterRestart,
            target,
            at: t,
            len: ROLLING_DOWN,
            delay: Duration::ZERO,
            three_phase: false,
        });
        t += ROLLING_DOWN + budget.after(FaultKind::MasterRestart) + ms(200);
    }
    (t <= until).then_some((faults, t))
}

fn full(
    rng: &mut StdRng,
    duration: Duration,
    masters: usize,
    budget: Budget,
    rolling: bool,
) -> Plan {
    let three = (duration >= THREE_MIN_RUN && masters >= 3).then(|| {
        let start = duration.saturating_sub(TAIL + THREE_LEN);
        (start, start + THREE_LEN)
    });
    let main_end = three.map_or(duration.saturating_sub(TAIL), |(start, _)| start);
    let mut faults = Vec::new();
    // The rolling restart keeps every other master fault out of its span.
    let rolled = rolling
        .then(|| rolling_restart(rng, ROLLING_AT, main_end, masters, budget))
        .flatten();
    let rolling_span = rolled.as_ref().map(|(_, end)| (ROLLING_AT, *end));
    if let Some((rolled, _)) = rolled {
        faults.extend(rolled);
    }
    let mut busy_until = vec![Duration::ZERO; masters];
    let mut replica_busy_until = Duration::ZERO;
    let mut t = WARM_UP;
    while t < main_end {
        let kind = match rng.random_range(0..12) {
            0..=2 => FaultKind::MasterRestart,
            3..=5 => FaultKind::MasterPause,
            6..=7 => FaultKind::MasterSlow,
            8..=9 => FaultKind::MasterUnreachable,
            10 => FaultKind::ReplicaKill,
            _ => FaultKind::ReplicaDrain,
        };
        let (len, delay) = match kind {
            FaultKind::MasterRestart => (between(rng, 200, 1000), Duration::ZERO),
            FaultKind::MasterPause => (between(rng, 300, 2000), Duration::ZERO),
            FaultKind::MasterSlow => (between(rng, 500, 3000), between(rng, 80, 250)),
            FaultKind::MasterUnreachable => (between(rng, 500, 3000), Duration::ZERO),
            FaultKind::ReplicaKill => (between(rng, 300, 1500), Duration::ZERO),
            // The drain itself takes up to the replicas' shutdown grace.
            FaultKind::ReplicaDrain => (between(rng, 1500, 3000), Duration::ZERO),
        };
        let until = t + len + budget.after(kind);
        let in_rolling = |(from, to): &(Duration, Duration)| t < *to && until > *from;
        if rolling_span.is_some_and(|span| kind.on_master() && in_rolling(&span)) {
            // No other master fault during the rolling restart; a
            // replica's fault may still come.
            t += between(rng, 100, 800);
            continue;
        }
        let target = if kind.on_master() {
            let busy = busy_until.iter().filter(|b| **b > t).count();
            let free: Vec<usize> = (0..masters).filter(|m| busy_until[*m] <= t).collect();
            if busy >= 2 || free.is_empty() {
                // Wait for the first faulted master to count as back.
                t = busy_until
                    .iter()
                    .copied()
                    .filter(|b| *b > t)
                    .min()
                    .unwrap_or(t)
                    + ms(1);
                continue;
            }
            free[rng.random_range(0..free.len())]
        } else if replica_busy_until <= t {
            rng.random_range(0..REPLICAS)
        } else {
            t = replica_busy_until;
            continue;
        };
        if until <= main_end {
            faults.push(Planned {
                kind,
                target,
                at: t,
                len,
                delay,
                three_phase: false,
            });
            match kind.on_master() {
                true => busy_until[target] = until,
                false => replica_busy_until = until,
            }
        }
        t += between(rng, 100, 800);
    }
    if let Some((start, end)) = three {
        let mut targets: Vec<usize> = (0..masters).collect();
        let kinds = [
            FaultKind::MasterPause,
            FaultKind::MasterPause,
            FaultKind::MasterUnreachable,
        ];
        for kind in kinds {
            let target = targets.remove(rng.random_range(0..targets.len()));
            faults.push(Planned {
                kind,
                target,
                at: start,
                len: end - start,
                delay: Duration::ZERO,
                three_phase: true,
            });
        }
    }
    faults.sort_by_key(|f| f.at);
    Plan {
        faults,
        phases: Phases {
            faults_from: WARM_UP,
            three,
            end: duration,
            rolling: rolling_span,
        },
    }
}

fn restarts(rng: &mut StdRng, duration: Duration, masters: usize, budget: Budget) -> Plan {
    const DOWN: Duration = Duration::from_millis(150);
    const STAGGER: Duration = Duration::from_millis(30);
    let warm_up = Duration::from_secs(3);
    let majority = masters / 2 + 1;
    let mut faults = Vec::new();
    let mut t = warm_up;
    while t + DOWN + budget.after(FaultKind::MasterRestart) + Duration::from_secs(1) <= duration {
        let mut targets: Vec<usize> = (0..masters).collect();
        for k in 0..majority {
            let target = targets.remove(rng.random_range(0..targets.len()));
            faults.push(Planned {
                kind: FaultKind::MasterRestart,
                target,
                at: t + STAGGER * k as u32,
                len: DOWN,
                delay: Duration::ZERO,
                three_phase: false,
            });
        }
        t += DOWN + budget.after(FaultKind::MasterRestart) + between(rng, 1000, 2000);
    }
    Plan {
        faults,
        phases: Phases {
            faults_from: warm_up,
            three: None,
            end: duration,
            rolling: None,
        },
    }
}

fn fresh(rng: &mut StdRng, duration: Duration, masters: usize, budget: Budget) -> Plan {
    const STAGGER: Duration = Duration::from_millis(10);
    let warm_up = Duration::from_secs(3);
    // Longer than any lease: max_ttl plus drift plus a second.
    let down = budget.quarantine;
    let mut faults = Vec::new();
    let mut t = warm_up;
    while t + down + budget.grace + Duration::from_secs(2) <= duration {
        for target in 0..masters {
            faults.push(Planned {
                kind: FaultKind::MasterRestart,
                target,
                at: t + STAGGER * target as u32,
                len: down,
                delay: Duration::ZERO,
                three_phase: false,
            });
        }
        t += down + budget.after(FaultKind::MasterRestart) + between(rng, 1000, 2000);
    }
    Plan {
        faults,
        phases: Phases {
            faults_from: warm_up,
            three: None,
            end: duration,
            rolling: None,
        },
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Injects every planned fault on time, concurrently; returns what
/// happened. A fault that could not be injected or undone is an error of
/// the run (the set-up is no longer what the figures assume).
pub(crate) async fn inject(
    plan: &Plan,
    clock: Clock,
    cluster: &Cluster,
    replicas: &Replicas,
    budget: Budget,
) -> Result<Vec<Fault>, BoxError> {
    let runs = plan
        .faults
        .iter()
        .map(|planned| one(*planned, clock, cluster, replicas, budget));
    futures::future::join_all(runs).await.into_iter().collect()
}

async fn one(
    planned: Planned,
    clock: Clock,
    cluster: &Cluster,
    replicas: &Replicas,
    budget: Budget,
) -> Result<Fault, BoxError> {
    tokio::time::sleep_until(clock.deadline(planned.at)).await;
    let start = clock.now();
    let target = planned.target;
    let back = clock.deadline(planned.at + planned.len);
    let fail = |what: &str, error: BoxError| -> BoxError {
        format!("{} of #{target}: {what}: {error}", planned.kind.name()).into()
    };
    match planned.kind {
        FaultKind::MasterRestart => {
            cluster.kill(target).await.map_err(|e| fail("kill", e))?;
            tokio::time::sleep_until(back).await;
            cluster
                .restart(target)
                .await
                .map_err(|e| fail("restart", e))?;
        }
        FaultKind::MasterPause => {
            let pid = cluster
                .pause(target)
                .await
                .map_err(|e| fail("SIGSTOP", e))?;
            tokio::time::sleep_until(back).await;
            cluster.resume(pid).map_err(|e| fail("SIGCONT", e))?;
        }
        FaultKind::MasterSlow | FaultKind::MasterUnreachable => {
            let mode = match planned.kind {
                FaultKind::MasterSlow => Mode::Slow(planned.delay),
                _ => Mode::Blackhole,
            };
            cluster.set_mode(target, mode);
            tokio::time::sleep_until(back).await;
            cluster.set_mode(target, Mode::Pass);
        }
        FaultKind::ReplicaDrain => {
            replicas
                .drain(target)
                .await
                .map_err(|e| fail("SIGTERM", e))?;
            tokio::time::sleep_until(back).await;
            replicas
                .start_one(target)
                .await
                .map_err(|e| fail("start", e))?;
        }
        FaultKind::ReplicaKill => {
            replicas.kill(target).await.map_err(|e| fail("kill", e))?;
            tokio::time::sleep_until(back).await;
            replicas
                .start_one(target)
                .await
                .map_err(|e| fail("start", e))?;
        }
    }
    let end = clock.now();
    Ok(Fault {
        kind: planned.kind,
        target,
        start,
        end,
        counts_until: end + budget.after(planned.kind),
        three_phase: planned.three_phase,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Budget = Budget {
        grace: Duration::from_secs(1),
        quarantine: Duration::from_millis(4032),
    };

    /// Until when a planned fault counts.
    fn until(f: &Planned) -> Duration {
        f.at + f.len + BUDGET.after(f.kind)
    }

    /// A seed names one schedule.
    #[test]
    fn deterministic() {
        let d = Duration::from_secs(120);
        assert_eq!(
            plan(Schedule::Full, 7, d, 5, BUDGET, false),
            plan(Schedule::Full, 7, d, 5, BUDGET, false)
        );
        assert_ne!(
            plan(Schedule::Full, 7, d, 5, BUDGET, false),
            plan(Schedule::Full, 8, d, 5, BUDGET, false)
        );
    }

    /// Outside the three-masters phase, never more than two masters count as
    /// The CI's short mixed run (40 s, seed 1, a rolling restart, the
    /// quarantine budget of `run::run` at the defaults: max_ttl 3 s, the
    /// fences' clock allowance) injects every kind of fault: its test
    /// checks each kind occurred, and a longer quarantine budget once left
    /// no room for the replicas' faults.
    #[test]
    fn the_short_mixed_run_has_every_kind() {
        let budget = Budget {
            grace: Duration::from_secs(1),
            quarantine: ms(3_000 + 32 + 4_100 + 1_000),
        };
        let plan = plan(Schedule::Full, 1, Duration::from_secs(40), 5, budget, true);
        // The kinds `tests/tests/short_runs.rs` asks of that run (a slow master
        // is not among them: the rolling restart leaves little room).
        let required = [
            FaultKind::MasterRestart,
            FaultKind::MasterPause,
            FaultKind::MasterUnreachable,
            FaultKind::ReplicaKill,
            FaultKind::ReplicaDrain,
        ];
        for kind in required {
            assert!(
                plan.faults.iter().any(|f| f.kind == kind),
                "no {kind:?} in {:?}",
                plan.faults
            );
        }
    }

    /// faulted at once and never more than one replica is down; every fault
    /// is over before the run ends; every kind occurs.
    #[test]
    fn full_schedule_bounds() {
        for seed in 0..20 {
            let d = Duration::from_secs(300);
            let plan = plan(Schedule::Full, seed, d, 5, BUDGET, seed % 2 == 0);
            let main: Vec<&Planned> = plan.faults.iter().filter(|f| !f.three_phase).collect();
            for f in &main {
                let at_once = |on_master: bool| {
                    main.iter()
                        .filter(|g| g.kind.on_master() == on_master)
                        .filter(|g| g.at <= f.at && until(g) > f.at)
                        .count()
                };
                assert!(at_once(true) <= 2, "seed {seed}: {f:?}");
                assert!(at_once(false) <= 1, "seed {seed}: {f:?}");
                assert!(until(f) <= d, "seed {seed}: {f:?}");
            }
            for kind in FaultKind::ALL {
                assert!(
                    main.iter().any(|f| f.kind == kind),
                    "seed {seed}: no {kind:?}"
                );
            }
            let three: Vec<usize> = plan
                .faults
                .iter()
                .filter(|f| f.three_phase)
                .map(|f| f.target)
                .collect();
            let mut distinct = three.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), 3, "seed {seed}: {three:?}");
            let (start, _) = plan.phases.three.expect("a 300 s run has the phase");
            assert!(main.iter().all(|f| until(f) <= start), "seed {seed}");
        }
    }

    /// The whole cluster goes down together for longer than any lease
    /// (max_ttl 3 s plus drift) and comes back fresh, at least once in a
    /// 20 s run, with every fault over before the end.
    #[test]
    fn fresh_schedule() {
        let d = Duration::from_secs(20);
        let plan = plan(Schedule::Fresh, 1, d, 5, BUDGET, false);
        assert!(plan.faults.len() >= 5, "{plan:?}");
        for cycle in plan.faults.chunks(5) {
            let mut targets: Vec<usize> = cycle.iter().map(|f| f.target).collect();
            targets.sort_unstable();
            targets.dedup();
            assert_eq!(targets.len(), 5);
            assert!(cycle.iter().all(|f| f.kind == FaultKind::MasterRestart));
            assert!(cycle[4].at - cycle[0].at < Duration::from_millis(100));
            // All down together for longer than a lease can last.
            let all_down = cycle[0].at + cycle[0].len - cycle[4].at;
            assert!(all_down > Duration::from_secs(3) + Duration::from_millis(32));
            assert!(cycle.iter().all(|f| f.at + f.len < d));
        }
    }

    /// The counterfactual restarts a majority at once, cycle after cycle.
    #[test]
    fn restarts_schedule() {
        let plan = plan(
            Schedule::Restarts,
            1,
            Duration::from_secs(20),
            5,
            BUDGET,
            false,
        );
        assert!(plan.faults.len() >= 6, "{plan:?}");
        for cycle in plan.faults.chunks(3) {
            let mut targets: Vec<usize> = cycle.iter().map(|f| f.target).collect();
            targets.sort_unstable();
            targets.dedup();
            assert_eq!(targets.len(), 3);
            assert!(cycle.iter().all(|f| f.kind == FaultKind::MasterRestart));
            assert!(cycle[2].at - cycle[0].at < Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod rolling_tests {
    use super::*;

    /// `--mix`: a rolling restart of three distinct masters, one at a
    /// time (each after the one before counts as back), with no other
    /// master fault during it.
    #[test]
    fn rolling_restart_alone_one_master_at_a_time() {
        let budget = Budget {
            grace: Duration::from_secs(1),
            quarantine: Duration::from_millis(4032),
        };
        for seed in 0..10 {
            let plan = plan(
                Schedule::Full,
                seed,
                Duration::from_secs(40),
                5,
                budget,
                true,
            );
            let (from, to) = plan.phases.rolling.expect("a 40 s run has one");
            let inside: Vec<&Planned> = plan
                .faults
                .iter()
                .filter(|f| f.kind.on_master())
                .filter(|f| f.at < to && f.at + f.len + budget.after(f.kind) > from)
                .collect();
            assert_eq!(inside.len(), 3, "seed {seed}: {inside:?}");
            let mut targets: Vec<usize> = inside.iter().map(|f| f.target).collect();
            targets.sort_unstable();
            targets.dedup();
            assert_eq!(targets.len(), 3, "seed {seed}");
            for pair in inside.windows(2) {
                let back = pair[0].at + pair[0].len + budget.after(pair[0].kind);
                assert!(pair[1].at >= back, "seed {seed}: {pair:?}");
            }
        }
    }
}
