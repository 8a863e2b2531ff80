//! One run, top to bottom: proxies and replicas up, the clock starts, the
//! clients and the fault schedule run until the deadline, everything
//! stops, the history is checked and turned into figures.

use crate::burst;
use crate::checks;
use crate::clients::{self, ClientLog, Profile, Shared};
use crate::cluster::{BoxError, Cluster};
use crate::faults::{self, Budget, Schedule};
use crate::figures::Figures;
use crate::findings::{Check, Findings};
use crate::frozen;
use crate::history::{Clock, History};
use crate::mix::{self, Menu};
use crate::registers::Registers;
use crate::replicas::{ReplicaConfig, Replicas};
use crate::sessions;
use crate::Args;
use redlockd_testkit::masters::LocalMasters;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// How long clients may take to finish their last operation after the
/// deadline before they are abandoned.
const DRAIN: Duration = Duration::from_secs(10);
/// Session clients in processes of their own that the `full` schedule
/// freezes with SIGSTOP (`crate::frozen`).
const FROZEN_CLIENTS: u32 = 2;
/// Violations of each check printed with their evidence.
const SHOWN_PER_CHECK: usize = 5;
/// Semaphore clients of the `full` schedule (on a semaphore of their own).
const SEMAPHORE_CLIENTS: u32 = 4;
/// `--mix`: unary clients of every kind on the hot resources, long
/// holders among the session clients, multi clients when `--multi` is 0.
const MIX_CLIENTS: u32 = 6;
const MIX_LONG_HOLDERS: u32 = 3;
const MIX_MULTI: usize = 3;

/// The workload of each schedule.
fn profile(schedule: Schedule, max_ttl: Duration) -> Profile {
    match schedule {
        // The fresh cluster runs the ordinary workload across its outages.
        Schedule::Full | Schedule::Fresh => Profile {
            contended_clients: 12,
            hot: 4,
            uncontended_clients: 6,
            contended_ttl: Duration::from_millis(500).min(max_ttl),
            contended_wait: Duration::from_secs(2),
            work_ms: (0, 3),
            long_hold: (0.0, 0, 0),
            pause_share: 0.03,
            extend_share: 0.1,
            uncontended_ttl: Duration::from_secs(1).min(max_ttl),
            uncontended_gap_ms: (5, 15),
            session_clients: 4,
        },
        // Long leases held for most of their validity, and impatient
        // waiters, so a majority restarted without data finds holders.
        Schedule::Restarts => Profile {
            contended_clients: 12,
            hot: 4,
            uncontended_clients: 4,
            contended_ttl: max_ttl,
            contended_wait: Duration::from_millis(300),
            work_ms: (0, 3),
            long_hold: (
                0.7,
                max_ttl.as_millis() as u64 / 2,
                max_ttl.as_millis() as u64 * 5 / 6,
            ),
            pause_share: 0.0,
            extend_share: 0.0,
            uncontended_ttl: Duration::from_secs(1).min(max_ttl),
            uncontended_gap_ms: (10, 20),
            session_clients: 0,
        },
    }
}

/// A fresh directory for the daemons' logs.
fn log_dir() -> Result<PathBuf, BoxError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("redlockd-chaos-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Runs the whole thing over `masters` with the daemon `binary`.
pub(crate) async fn run(
    args: &Args,
    binary: PathBuf,
    masters: LocalMasters,
) -> Result<Figures, BoxError> {
    let logs = log_dir()?;
    let cluster = Cluster::start(masters).await?;
    // Quarantine: max_ttl + drift and the fences' clock allowance (at the
    // daemons' default node_timeout and max_clock_offset), plus a second
    // for INFO's whole-second uptime; grace: reconnection after a return.
    let drift = args.max_ttl.mul_f64(0.01) + Duration::from_millis(2);
    let defaults = redlockd::config::Config::default().redlock;
    let allowance =
        redlockd::redlock::clock_allowance(defaults.node_timeout, defaults.max_clock_offset);
    let budget = Budget {
        grace: Duration::from_secs(1),
        quarantine: args.max_ttl + drift + allowance + Duration::from_secs(1),
    };
    let plan = faults::plan(
        args.schedule,
        args.seed,
        args.duration,
        cluster.len(),
        budget,
        args.mix,
    );
    let config = ReplicaConfig {
        binary,
        nodes: cluster.proxy_urls(),
        max_ttl: args.max_ttl,
        quarantine: !args.no_quarantine,
        log_dir: logs.clone(),
        extra: Vec::new(),
        counterfactual: args.counterfactual.clone(),
    };
    let replicas = Replicas::start(config, faults::REPLICAS).await?;
    let profile = profile(args.schedule, args.max_ttl);
    let clock = Clock::start();
    let tag = format!("chaos/{}", args.seed);
    let hot: Vec<String> = (0..profile.hot).map(|i| format!("{tag}/hot/{i}")).collect();
    let shared = Arc::new(Shared {
        clock,
        deadline: args.duration,
        routes: replicas.routes(),
        registers: hot
            .iter()
            .map(|h| Arc::new(Registers::new(h.clone())))
            .collect(),
        election_registers: hot
            .iter()
            .take(crate::elections::ELECTIONS)
            .map(|h| Arc::new(Registers::new(crate::election_values::resource(h))))
            .collect(),
        hot,
        next_grant: AtomicU64::new(0),
        tag,
        masters: cluster.ports(),
        addrs: replicas.grpc_addrs(),
        rolling: plan.phases.rolling,
    });
    tracing::info!(faults = plan.faults.len(), logs = %logs.display(), "run starts");
    let mut tasks = Vec::new();
    for id in 0..profile.contended_clients as u32 {
        let run = clients::contended(id, Arc::clone(&shared), profile.clone(), args.seed);
        tasks.push(tokio::spawn(run));
    }
    for id in 0..profile.uncontended_clients as u32 {
        let run = clients::uncontended(id, Arc::clone(&shared), profile.clone(), args.seed);
        tasks.push(tokio::spawn(run));
    }
    let multi = match (args.multi, args.mix) {
        (0, true) => MIX_MULTI,
        (n, _) => n,
    };
    for id in 0..multi as u32 {
        let run = crate::multi::client(id, Arc::clone(&shared), profile.clone(), args.seed);
        tasks.push(tokio::spawn(run));
    }
    let session_menu = match args.mix {
        true => sessions::Menu::mix(),
        false => sessions::Menu::plain(),
    };
    let long_holders = match args.mix && profile.session_clients > 0 {
        true => MIX_LONG_HOLDERS,
        false => 0,
    };
    for id in 0..profile.session_clients as u32 + long_holders {
        let menu = match id.checked_sub(profile.session_clients as u32) {
            Some(n) => sessions::Menu::long(n),
            None => session_menu.clone(),
        };
        let run = sessions::session(
            sessions::FIRST_ID + id,
            Arc::clone(&shared),
            profile.clone(),
            menu,
            args.seed,
        );
        tasks.push(tokio::spawn(run));
    }
    let semaphore_clients = match args.schedule {
        Schedule::Full => SEMAPHORE_CLIENTS,
        _ => 0,
    };
    // Session clients in processes of their own, frozen now and then.
    let frozen_clients = match args.schedule {
        Schedule::Full => FROZEN_CLIENTS,
        _ => 0,
    };
    let frozen_resource = (frozen_clients > 0).then(|| frozen::resource(&shared.tag));
    let menus = (0..semaphore_clients)
        .map(|id| (mix::SEMAPHORE_FIRST_ID + id, Menu::semaphore(&shared.tag)))
        .chain((0..args.rw).map(|id| (mix::RW_FIRST_ID + id, Menu::rw(&shared.tag))))
        .chain((0..MIX_CLIENTS * u32::from(args.mix)).map(|id| {
            (
                mix::MIX_FIRST_ID + id,
                Menu::mix(&shared.hot, frozen_resource.clone()),
            )
        }));
    for (id, menu) in menus.collect::<Vec<_>>() {
        let run = mix::client(id, Arc::clone(&shared), menu, args.seed);
        tasks.push(tokio::spawn(run));
    }
    // Candidates and observers of elections, under --mix.
    let elections = args
        .mix
        .then(|| tokio::spawn(crate::elections::run(Arc::clone(&shared), args.seed)));
    let frozen_registers = Arc::new(Registers::new(frozen::resource(&shared.tag)));
    let mut frozen_tasks = Vec::new();
    for id in 0..frozen_clients {
        let run = frozen::client(
            frozen::FIRST_ID + id,
            Arc::clone(&shared),
            replicas.grpc_addrs(),
            args.seed,
            Arc::clone(&frozen_registers),
        );
        frozen_tasks.push(tokio::spawn(run));
    }
    let burst_times = (args.schedule == Schedule::Full && args.bursts > 0)
        .then(|| burst::times(&plan, budget, args.duration));
    let bursts = burst_times.clone().map(|times| {
        let to = burst::replicas_for(&plan, budget, &times, faults::REPLICAS);
        let run = burst::bursts(
            Arc::clone(&shared),
            replicas.grpc_addrs(),
            times.into_iter().zip(to).collect(),
            args.bursts,
        );
        tokio::spawn(run)
    });
    let unrecorded = match (args.unrecorded_burst_outage, &burst_times) {
        (true, Some(times)) => times.clone(),
        _ => Vec::new(),
    };
    let (injected, ()) = tokio::join!(
        faults::inject(&plan, clock, &cluster, &replicas, budget),
        burst::unrecorded_outage(&cluster, clock, unrecorded),
    );
    tokio::time::sleep_until(clock.deadline(args.duration)).await;
    let mut logs_of_clients = Vec::new();
    let drained = clock.deadline(args.duration + DRAIN);
    for task in tasks {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(drained, task).await {
            Ok(Ok(log)) => logs_of_clients.push(log),
            Ok(Err(error)) => return Err(format!("a client task failed: {error}").into()),
            Err(_) => {
                abort.abort();
                tracing::warn!("a client did not finish within {DRAIN:?} of the deadline");
            }
        }
    }
    let mut frozen_log = frozen::FrozenLog::default();
    for task in frozen_tasks {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(drained, task).await {
            Ok(Ok(Ok((log, records)))) => {
                logs_of_clients.push(log);
                frozen_log.delays.extend(records.delays);
                frozen_log.writes.extend(records.writes);
                frozen_log.ended.extend(records.ended);
                frozen_log.freezes.extend(records.freezes);
            }
            Ok(Ok(Err(error))) => return Err(format!("a frozen client failed: {error}").into()),
            Ok(Err(error)) => return Err(format!("a frozen client task failed: {error}").into()),
            Err(_) => {
                abort.abort();
                tracing::warn!("a frozen client did not finish within {DRAIN:?} of the deadline");
            }
        }
    }
    let (election_logs, elected) = crate::elections::collect(elections, drained).await?;
    logs_of_clients.extend(election_logs);
    let fired = match bursts {
        Some(task) => {
            let abort = task.abort_handle();
            match tokio::time::timeout_at(drained, task).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(error)) => return Err(format!("the burst task failed: {error}").into()),
                Err(_) => {
                    abort.abort();
                    return Err("a burst did not finish within the drain".into());
                }
            }
        }
        None => burst::Fired::default(),
    };
    let crashed = replicas.crashed().await;
    replicas.stop_all().await;
    let masters = cluster.into_masters();
    tokio::task::spawn_blocking(move || drop(masters)).await?;
    let faults = injected?;
    if !crashed.is_empty() {
        return Err(crashed.join("; ").into());
    }
    let mut probes = Vec::new();
    let mut mixed = crate::figures::MixFigures::default();
    for log in &mut logs_of_clients {
        mixed.retries += log.retries;
        mixed.retried_grants += log.retried_grants;
        mixed.hold_retries += log.hold_retries;
        mixed.hold_retries_granted += log.hold_retries_granted;
        for probe in log.probes.drain(..) {
            // Each ends within its settle time and the masters' answers.
            match tokio::time::timeout(DRAIN, probe).await {
                Ok(Ok(probe)) => probes.push(probe),
                _ => tracing::warn!("a probe of the masters did not finish"),
            }
        }
    }
    let history = History {
        faults,
        registers: (shared.registers.iter())
            .chain(&shared.election_registers)
            .chain(std::iter::once(&frozen_registers))
            .map(|r| r.log())
            .collect(),
        phases: plan.phases,
        ..assemble(logs_of_clients)
    };
    if let Some(path) = &args.history {
        crate::history_file::write(path, &history)?;
        eprintln!("chaos: history written to {}", path.display());
    }
    let mut findings = checks::check(&history);
    let frozen_figures = frozen::check(&history, &frozen_log, &mut findings);
    let burst_figures = burst::check(&fired, &history.faults, &mut findings);
    mixed.observed_changes = crate::observers::check(&elected.observed, &mut findings);
    crate::observers::check_values(&elected.observed, &history.grants, &mut findings);
    mixed.proclaims = elected.proclaims;
    (mixed.campaigns, mixed.campaigns_withdrawn) = (elected.campaigns, elected.withdrawn);
    mixed.stale_resigns = elected.stale_resigns;
    mixed.leftovers = crate::leftovers::check(&probes, &history.faults, &mut findings);
    show_violations(&findings);
    let mut figures = Figures::new(&history, findings, args.min_grants_per_s);
    figures.frozen = frozen_figures;
    figures.bursts = burst_figures;
    figures.mix = mixed;
    figures.mixed = args.mix;
    figures.schedule = format!("{:?}", args.schedule).to_lowercase();
    (figures.seed, figures.quarantine, figures.duration) =
        (args.seed, !args.no_quarantine, args.duration);
    for leftover in &figures.mix.leftovers.examples {
        eprintln!("LEFTOVER {leftover}");
    }
    for miss in &figures.misses {
        eprintln!("MISS {miss}");
    }
    for miss in &figures.slow_recovery {
        eprintln!("AFTER THREE FAULTED {miss}");
    }
    let clean = figures.violation_count() == 0 && figures.healthy_grants >= figures.min_grants;
    if clean && !args.keep_logs {
        let _ = std::fs::remove_dir_all(&logs);
    } else {
        eprintln!("chaos: daemon logs kept in {}", logs.display());
    }
    Ok(figures)
}

/// Every client's records in one history.
fn assemble(logs: Vec<ClientLog>) -> History {
    let mut history = History::default();
    for log in logs {
        history.grants.extend(log.grants);
        history.attempts.extend(log.attempts);
        history.contended_failures.extend(log.contended_failures);
        history.failed.extend(log.failed);
        history.sessions_drained += log.drained;
    }
    history.grants.sort_by_key(|g| g.received);
    history
}

/// The first violations of each check, with their evidence, on stderr.
fn show_violations(findings: &Findings) {
    for check in Check::ALL {
        let of_check = findings.violations.iter().filter(|v| v.check == check);
        for violation in of_check.clone().take(SHOWN_PER_CHECK) {
            eprintln!("VIOLATION {}: {}", check.name(), violation.detail);
        }
        let more = of_check.count().saturating_sub(SHOWN_PER_CHECK);
        if more > 0 {
            eprintln!("VIOLATION {}: ... and {more} more", check.name());
        }
    }
}
