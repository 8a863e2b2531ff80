//! A master whose clock is ahead by [`OFFSET`], far beyond
//! `redlock.max_clock_offset` (1 s by default) and `max_ttl`: master 0 runs
//! under libfaketime ([`super::skewed`]). Checks:
//! - the replica measures the offset (`redlock_node_clock_offset_seconds`
//!   of master 0 at least half of [`OFFSET`]);
//! - the replica refuses it: with masters 3 and 4 unreachable, masters 0,
//!   1 and 2 would be a majority, and no Acquire may be granted;
//! - fences stay strictly increasing, grant after grant on one resource,
//!   while a majority of masters (rotating, master 0 among them every other
//!   time) restarts empty again and again: an offset master's clock floor
//!   never makes a fence that a later grant cannot exceed.

use super::rig::{acquire, release, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use redlockd_testkit::proxy::Mode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// How far ahead master 0's clock runs.
const OFFSET: Duration = Duration::from_secs(60);

/// [`OFFSET`], or `CHAOS_CLOCK_OFFSET` seconds: 0 shows that the checks
/// can fail (the master then counts, and the refusal check reports it).
pub(crate) fn offset() -> Duration {
    std::env::var("CHAOS_CLOCK_OFFSET")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(OFFSET, Duration::from_secs)
}
/// Acquire attempts with only masters 0, 1 and 2 reachable.
const REFUSAL_TRIES: u32 = 10;
/// The majorities restarted empty, in turn.
const MAJORITIES: [[usize; 3]; 4] = [[0, 1, 2], [1, 3, 4], [0, 2, 3], [1, 2, 4]];

/// Runs the checks for `duration` (at least one restart) on `rig`, whose
/// master 0 is offset.
pub(crate) async fn run(
    rig: &Rig,
    seed: u64,
    duration: Duration,
    ttl: Duration,
) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("clock_offset");
    let offset = offset();
    let (seen, measured) = rig
        .await_gauge(
            "redlock_node_clock_offset_seconds",
            0,
            Duration::from_secs(15),
            |v| v >= offset.as_secs_f64() / 2.0,
        )
        .await?;
    outcome.figure("offset_gauge_s", seen.unwrap_or(-1.0).round() as i64);
    if !measured {
        outcome.violation(
            "offset_not_measured",
            format!("master 0 is {offset:?} ahead; the gauge says {seen:?}"),
        );
    }
    // Refusal: 0, 1, 2 reachable only.
    rig.set_mode(3, Mode::Blackhole);
    rig.set_mode(4, Mode::Blackhole);
    let mut granted_with_offset = 0u32;
    for k in 0..REFUSAL_TRIES {
        let name = format!("interleavings/{seed}/offset/refuse/{k}");
        let answer = acquire(
            rig.channel.clone(),
            &name,
            Duration::from_secs(1),
            Duration::ZERO,
            None,
        )
        .await;
        if let Ok(lock) = answer {
            granted_with_offset += 1;
            let _ = release(rig.channel.clone(), &lock).await;
        }
    }
    rig.set_mode(3, Mode::Pass);
    rig.set_mode(4, Mode::Pass);
    if granted_with_offset > 0 {
        outcome.violation(
            "offset_master_counted",
            format!(
                "{granted_with_offset} of {REFUSAL_TRIES} Acquires granted with only masters 0 \
                 (offset {offset:?}), 1 and 2 reachable"
            ),
        );
    }
    for m in [3, 4] {
        rig.await_gauge("redlock_node_up", m, Duration::from_secs(10), |v| v == 1.0)
            .await?;
    }
    // Fences through restarts of majorities.
    let resource = format!("interleavings/{seed}/offset/fenced");
    let fences = Arc::new(Mutex::new(Vec::<(u64, Instant)>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let granter = tokio::spawn(grants(
        rig.channel.clone(),
        resource,
        Arc::clone(&fences),
        Arc::clone(&stop),
    ));
    let end = Instant::now() + duration;
    let mut restarts = 0usize;
    let mut last_restart = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    while restarts == 0 || Instant::now() < end {
        for m in MAJORITIES[restarts % MAJORITIES.len()] {
            rig.restart_empty(m).await?;
        }
        last_restart = Instant::now();
        restarts += 1;
        // The quarantine (max_ttl and drift), then grants again.
        tokio::time::sleep(ttl + Duration::from_millis(1500)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    granter.await?;
    let fences = std::mem::take(&mut *fences.lock().unwrap_or_else(PoisonError::into_inner));
    for pair in fences.windows(2) {
        if pair[1].0 <= pair[0].0 {
            outcome.violation(
                "fence_not_increasing",
                format!("fence {} granted after fence {}", pair[1].0, pair[0].0),
            );
        }
    }
    let after = fences.iter().filter(|(_, at)| *at > last_restart).count();
    if after == 0 {
        outcome.violation(
            "proves_nothing",
            "no grant after the last restart of a majority".to_owned(),
        );
    }
    outcome.figure("majority_restarts", restarts as u64);
    outcome.figure("fenced_grants", fences.len() as u64);
    outcome.figure("grants_after_last_restart", after as u64);
    Ok(outcome)
}

/// Acquire (waiting), Release, on one resource until `stop`, recording
/// each grant's fence in order.
async fn grants(
    channel: tonic::transport::Channel,
    resource: String,
    fences: Arc<Mutex<Vec<(u64, Instant)>>>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        let answer = acquire(
            channel.clone(),
            &resource,
            Duration::from_secs(1),
            Duration::from_millis(500),
            None,
        )
        .await;
        match answer {
            Ok(lock) => {
                fences
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((lock.fence, Instant::now()));
                let _ = release(channel.clone(), &lock).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
