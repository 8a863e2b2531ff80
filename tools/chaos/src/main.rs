//! `chaos`: a safety checker for redlockd under injected faults, in the
//! manner of Jepsen's lock tests.
//!
//! It starts five local Valkey masters, a TCP proxy in front of each, and
//! two `redlockd` replicas as separate processes over the proxies (short
//! `max_ttl`, so restart quarantines end within the run). Many gRPC clients
//! then lock contended and uncontended resources through both replicas
//! (some of them through `Hold` sessions) while a seeded fault schedule
//! kills and restarts masters without data, SIGSTOPs them, makes them slow
//! or unreachable through their proxy, and kills replicas or stops them
//! with SIGTERM (a draining stop); two session clients run as processes of
//! their own and are frozen with SIGSTOP while they hold a lock
//! (`frozen.rs`), `--multi N` adds clients locking several hot resources
//! at once (`multi.rs`), and `--bursts` fires bursts of Acquire calls
//! (`burst.rs`). Every grant, Release and register operation is recorded
//! on one monotonic clock and checked afterwards (see `checks.rs`). It
//! prints one JSON line and a summary, and exits 1 on any violation or when
//! the healthy phases made too few grants (a run that did nothing proves
//! nothing), 2 when it could not run.
//!
//! ```sh
//! scripts/setup.sh && source .venv/redlockd-env
//! cargo build --release --bin redlockd --bin chaos
//! target/release/chaos --duration 300                        # must pass
//! target/release/chaos --schedule restarts --no-quarantine   # must fail
//! target/release/chaos --interleaving all --duration 10      # must pass
//! ```
//!
//! `--interleaving` replaces the random schedule with the review's scripted
//! interleavings (4 and 6; see `interleavings`).
//!
//! The `full` schedule also runs semaphore clients on a
//! semaphore of their own; `--mix` puts every kind on the same hot
//! resources. Every grant of every kind is checked together by the
//! conflict relation of `HISTORY.md` (see `exclusion`), and `--history`
//! writes the calls for an independent checker (see `history_file`).

mod burst;
mod checks;
#[cfg(test)]
mod checks_tests;
mod clients;
mod cluster;
mod election_values;
mod elections;
mod exclusion;
mod faults;
mod figures;
mod findings;
mod frozen;
mod frozen_child;
#[cfg(test)]
mod frozen_tests;
mod history;
mod history_file;
mod hold_at_least;
#[cfg(test)]
mod hold_at_least_tests;
mod hold_retry;
mod hold_stream;
mod interleavings;
mod leftovers;
mod lock_delay;
#[cfg(test)]
mod lock_delay_tests;
mod mix;
mod multi;
mod observers;
mod refusals;
mod register_checks;
mod registers;
mod replicas;
mod report;
mod resigns;
mod run;
mod sessions;

use clap::Parser;
use cluster::BoxError;
use faults::Schedule;
use redlockd_testkit::masters::{find_server, Flavor, LocalMasters};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Exit status when a violation was found or too few grants were made.
const EXIT_FAILED: u8 = 1;
/// Exit status when the run could not be carried out.
const EXIT_ERROR: u8 = 2;

/// Checks redlockd's safety under injected faults (see the module doc).
#[derive(Debug, Parser)]
#[command(about)]
pub struct Args {
    /// Length of the run: seconds ("300") or a humantime duration ("5m").
    #[arg(long, default_value = "60", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seed of the fault schedule and of the clients' choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// `full`: every fault kind, at most two masters faulted at once, then
    /// three briefly. `restarts`: a majority of masters restarted without
    /// data again and again while holders keep long leases. `fresh`: the
    /// whole cluster down for longer than any lease, then started fresh.
    #[arg(long, value_enum, default_value = "full")]
    pub schedule: Schedule,
    /// Run the daemons with `redlock.restart_quarantine = false`.
    #[arg(long)]
    pub no_quarantine: bool,
    /// The `redlockd` binary (default: next to this one).
    #[arg(long, env = "CHAOS_REDLOCKD", value_name = "PATH")]
    pub redlockd: Option<PathBuf>,
    /// `redlock.max_ttl` of the daemons: the quarantine lasts about this.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub max_ttl: Duration,
    /// Grants needed per second of healthy phases (at most two masters
    /// faulted) for the run to count.
    #[arg(long, default_value_t = 20.0)]
    pub min_grants_per_s: f64,
    /// `full` only: bursts of this many Acquire calls at once through one
    /// connection, fired from a process of their own where every master is
    /// planned healthy (the warm-up, the tail); an UNAVAILABLE answer then
    /// is a violation. 0: no bursts (the default; the short CI run uses a
    /// few hundred).
    #[arg(long, default_value_t = 0)]
    pub bursts: usize,
    /// Clients that lock 2 or 3 hot resources at once
    /// (`AcquireRequest.resources`), beside the plain ones (`multi.rs`).
    /// 0: none.
    #[arg(long, default_value_t = 0)]
    pub multi: usize,
    /// Read-write locks: this many clients take shared and
    /// exclusive grants of resources of their own, checked for exclusion
    /// and fence order among conflicting grants (`mix.rs`). 0: none.
    #[arg(long, default_value_t = 0)]
    pub rw: u32,
    /// Every kind on the same hot resources (`mix.rs`): unary exclusive,
    /// shared and permit (limits 2 and 3) clients and session clients of
    /// every kind beside the plain and multi ones, request-id retries of
    /// Acquires and of Hold sessions (`hold_retry.rs`), 1-20 ms deadlines
    /// (with the masters read afterwards, `leftovers.rs`), and in `full` a
    /// rolling restart of three masters while long holders hold.
    #[arg(long)]
    pub mix: bool,
    /// Write every call as JSON lines (`tools/chaos/HISTORY.md`) here.
    /// The file holds lock tokens: a test artefact, not a log.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Run the daemons with `REDLOCKD__TESTING__COUNTERFACTUALS` set to these defects
    /// (`recreate-without-limit`, `per-kind-fences`,
    /// `release-ignores-hold-at-least`; repeat the flag or
    /// separate by commas): the checker must then report them.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub counterfactual: Vec<String>,
    /// Counterfactual for `--bursts`: at each burst's start, three masters'
    /// links are blackholed for a second without the checker being told,
    /// so the daemons' honest UNAVAILABLE answers look like overload blamed
    /// on healthy masters, which the burst check must report.
    #[arg(long)]
    pub unrecorded_burst_outage: bool,
    /// Keep the daemons' logs even when the run passes.
    #[arg(long)]
    pub keep_logs: bool,
    /// Instead of a schedule, force one of the review's interleavings
    /// for `--duration` each (see `interleavings`).
    #[arg(long, value_enum)]
    pub interleaving: Option<interleavings::Which>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed = match text.parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?,
        Err(_) => humantime::parse_duration(text).map_err(|e| e.to_string())?,
    };
    match parsed.is_zero() {
        true => Err("must be longer than zero".to_owned()),
        false => Ok(parsed),
    }
}

/// The `redlockd` binary: the flag, else the sibling of this executable.
fn redlockd_binary(args: &Args) -> Result<PathBuf, BoxError> {
    if let Some(path) = &args.redlockd {
        return Ok(path.clone());
    }
    Ok(redlockd_testkit::bin::path("redlockd")?)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(frozen_child::CHILD_FLAG) {
        return match frozen_child::child_main(&argv[2..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("chaos {}: {error}", frozen_child::CHILD_FLAG);
                ExitCode::from(EXIT_ERROR)
            }
        };
    }
    if argv.get(1).map(String::as_str) == Some(burst::BURST_FLAG) {
        return match burst::burst_main(&argv[2..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("chaos {}: {error}", burst::BURST_FLAG);
                ExitCode::from(EXIT_ERROR)
            }
        };
    }
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,chaos=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    if let Some(which) = args.interleaving {
        return interleave(&args, which);
    }
    let setup = redlockd_binary(&args).and_then(|binary| {
        let server = find_server(Flavor::Valkey)?;
        Ok((binary, LocalMasters::start(&server, 5)?))
    });
    let (binary, masters) = match setup {
        Ok(setup) => setup,
        Err(error) => {
            eprintln!("chaos: cannot start: {error}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let outcome = tokio::runtime::Runtime::new()
        .map_err(BoxError::from)
        .and_then(|runtime| runtime.block_on(run::run(&args, binary, masters)));
    match outcome {
        Ok(figures) => {
            println!("{}", figures.json());
            println!("{}", figures.summary());
            let too_few = figures.healthy_grants < figures.min_grants;
            if too_few {
                println!(
                    "FAILED: {} grants in healthy phases, fewer than {}: a run that did nothing \
                     proves nothing",
                    figures.healthy_grants, figures.min_grants
                );
            }
            if figures.violation_count() > 0 {
                println!("FAILED: {} violations", figures.violation_count());
            }
            match too_few || figures.violation_count() > 0 {
                true => ExitCode::from(EXIT_FAILED),
                false => ExitCode::SUCCESS,
            }
        }
        Err(error) => {
            eprintln!("chaos: {error}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// `--interleaving`: runs the scenarios, prints their JSON line and summary.
fn interleave(args: &Args, which: interleavings::Which) -> ExitCode {
    let outcome = redlockd_binary(args).and_then(|binary| {
        let server = find_server(Flavor::Valkey)?;
        let runtime = tokio::runtime::Runtime::new()?;
        let daemon = interleavings::Daemon {
            binary,
            server,
            max_ttl: args.max_ttl,
            quarantine: !args.no_quarantine,
            counterfactual: args.counterfactual.clone(),
        };
        runtime.block_on(interleavings::run(which, args.seed, args.duration, &daemon))
    });
    match outcome {
        Ok(outcomes) => {
            let json = interleavings::json(&outcomes, args.seed);
            println!("{json}");
            print!("{}", interleavings::summary(&outcomes));
            match interleavings::violations(&outcomes) == 0 {
                true => ExitCode::SUCCESS,
                false => ExitCode::from(EXIT_FAILED),
            }
        }
        Err(error) => {
            eprintln!("chaos: {error}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
