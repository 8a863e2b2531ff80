//! The Rust contender of the contention test (`clients/fourway/harness.py`):
//! one more runtime holding the lock the Python, Node, Go and Java
//! contenders fight over, so that the Rust client's Hold sessions are
//! checked for exclusion and fencing against theirs.
//!
//! Usage: `contender-rust ADDRESS LOG ROUNDS`
//!
//! It holds `fourway/shared` ROUNDS times through `Client::hold` (ttl 5 s,
//! wait 60 s). In each critical section it appends `rust <fence> start <ns>`
//! to LOG (`log.rs`), sleeps a few random milliseconds, checks the lease
//! and appends `rust <fence> end <ns>` (or `lost`); after the release it
//! appends `unheld` if the daemon said the lock was no longer held. A
//! retryable failure of `hold` (UNAVAILABLE: masters slower than
//! node_timeout on a starved machine) is retried, up to [`ATTEMPTS`] times
//! per section; a release that fails is reported on stderr and left to the
//! ttl (the section itself was done under the lock). Exits 1 if the lock
//! was ever lost, as the other contenders do.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod log;

use log::SharedLog;
use redlockd_client::{Client, Error, Lease};
use std::process::ExitCode;
use std::time::Duration;
use tokio::time::sleep;

/// The resource every contender holds.
const RESOURCE: &str = "fourway/shared";
/// The lock's time to live (the daemon extends it while the session lasts).
const TTL: Duration = Duration::from_secs(5);
/// How long a contender waits its turn.
const WAIT: Duration = Duration::from_secs(60);
/// Tries per section on retryable failures.
const ATTEMPTS: u32 = 20;
/// The pause before trying again after a retryable failure.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("rust contender: the lock was lost");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("rust contender: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The rounds; `Ok(false)` if the lock was lost in any of them.
async fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [address, path, rounds] = args.as_slice() else {
        return Err("usage: contender-rust ADDRESS LOG ROUNDS".into());
    };
    let rounds: u32 = rounds
        .parse()
        .map_err(|e| format!("ROUNDS {rounds:?}: {e}"))?;
    let log = SharedLog::open(path)?;
    log.line(0, "clock")?;
    let client = Client::connect(address.as_str()).await?;
    let mut held_throughout = true;
    for _ in 0..rounds {
        let lease = hold(&client).await?;
        let fence = lease.fence();
        log.line(fence, "start")?;
        sleep(Duration::from_millis(rand::random_range(5..25))).await;
        let what = match lease.check() {
            Ok(()) => "end",
            Err(_) => {
                held_throughout = false;
                "lost"
            }
        };
        log.line(fence, what)?;
        match lease.release().await {
            Ok(true) => {}
            Ok(false) => {
                held_throughout = false;
                log.line(fence, "unheld")?;
            }
            Err(error) => eprintln!("rust contender: release: {error}"),
        }
        // Outside the lock: a pause that lets the other runtimes in.
        sleep(Duration::from_millis(rand::random_range(10..30))).await;
    }
    client.close().await;
    Ok(held_throughout)
}

/// A Hold session on the shared resource, retried while the failure is
/// retryable.
async fn hold(client: &Client) -> Result<Lease, Error> {
    let mut attempt = 1;
    loop {
        match client.hold(RESOURCE, TTL).wait(WAIT).await {
            Err(error) if error.is_retryable() && attempt < ATTEMPTS => {
                eprintln!("rust contender: hold (attempt {attempt}): {error}");
                attempt += 1;
                sleep(RETRY_PAUSE).await;
            }
            result => return result,
        }
    }
}
