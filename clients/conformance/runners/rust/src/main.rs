//! The Rust client's conformance runner: runs
//! `clients/conformance/scenarios.json` through `redlockd-client`'s public
//! API (`Client`, `Acquire`, `Lease`, the `Error` variants), so that the
//! Rust client is held to the same outcomes, deadlines, session ends and
//! TLS behaviour as the Go, Java, Python and Node clients.
//!
//! Usage: `conformance-rust SCENARIOS ENV`, started by
//! `clients/conformance/harness.py`, whose docstring (and the suite's
//! README) describes ENV and the line protocol spoken on stdout/stdin.
//!
//! - `spec.rs`: the scenario file and the environment file;
//! - `clients.rs`: the named clients, built on first use;
//! - `protocol.rs`: the PASS/FAIL/FAULT lines and the harness's answers;
//! - `outcome.rs`: error kinds and the checks of a step's expectation;
//! - `steps.rs`: every step kind;
//! - `state.rs`: what one scenario's steps share, and its end.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod clients;
mod outcome;
mod protocol;
mod spec;
mod state;
mod steps;

use clients::Clients;
use protocol::Harness;
use spec::{Environment, ScenarioFile};
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [scenarios, env] = args.as_slice() else {
        eprintln!("usage: conformance-rust SCENARIOS ENV");
        return ExitCode::from(64);
    };
    match run(scenarios, env).await {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(why) => {
            eprintln!("conformance-rust: {why}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every scenario in order, reporting each; returns how many failed.
async fn run(scenarios: &str, env: &str) -> Result<usize, String> {
    let file: ScenarioFile = spec::read(scenarios)?;
    let env: Environment = spec::read(env)?;
    let mut runner = steps::Runner {
        prefix: env.prefix,
        clients: Clients::new(env.clients),
        harness: Harness::new(),
    };
    let mut failed = 0;
    for scenario in &file.scenarios {
        let result = runner.run(scenario).await;
        failed += usize::from(result.is_err());
        protocol::report(&scenario.id, &result).map_err(|e| format!("stdout: {e}"))?;
    }
    runner.clients.close().await;
    Ok(failed)
}
