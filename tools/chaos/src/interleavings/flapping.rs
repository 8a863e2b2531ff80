//! A flapping master. Master 0's proxy closes every open
//! connection every [`FLAP_EVERY`] for [`FLAP_FOR`] (the daemon's errors
//! and reconnections come faster than its watchers may read them), while a
//! client keeps the replica busy. Then the trap the restart quarantine exists for: a
//! holder H takes a lock while masters 3 and 4 are unreachable, so it holds
//! it on 0, 1 and 2 only; 3 and 4 come back, and master 0 restarts empty.
//! Checks, for as long as H's lock is valid:
//! - nobody else is granted the resource (masters 0, 3 and 4 are a
//!   majority without H's key: only master 0's quarantine refuses them);
//! - the replica reports master 0 quarantined (`redlock_node_quarantined`).
//!
//! A watcher that died on a broadcast `Lagged` would never re-verify master
//! 0's reconnection, and both checks would fail.

use super::rig::{acquire, release, validity, Rig};
use super::Outcome;
use crate::cluster::BoxError;
use redlockd_testkit::proxy::Mode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How often master 0's connections are closed while it flaps.
const FLAP_EVERY: Duration = Duration::from_millis(10);
/// How long it flaps.
const FLAP_FOR: Duration = Duration::from_millis(2000);
/// Longest wait for a master to count as up again.
const UP_LIMIT: Duration = Duration::from_secs(10);

/// Runs cycles for `duration` (at least one) on `rig`.
pub(crate) async fn run(
    rig: &Rig,
    seed: u64,
    duration: Duration,
    ttl: Duration,
) -> Result<Outcome, BoxError> {
    let mut outcome = Outcome::new("flapping");
    let end = Instant::now() + duration;
    let (mut cycles, mut refused, mut closes) = (0u64, 0u64, 0u64);
    let busy = Arc::new(AtomicU64::new(0));
    while cycles == 0 || Instant::now() < end {
        cycles += 1;
        // Flap master 0 under load.
        let stop = Arc::new(AtomicBool::new(false));
        let load = tokio::spawn(traffic(
            rig.channel.clone(),
            format!("interleavings/{seed}/flap/{cycles}"),
            Arc::clone(&stop),
            Arc::clone(&busy),
        ));
        let flap_end = Instant::now() + FLAP_FOR;
        while Instant::now() < flap_end {
            if let Some(proxy) = rig.proxy(0) {
                proxy.close_existing();
                closes += 1;
            }
            tokio::time::sleep(FLAP_EVERY).await;
        }
        stop.store(true, Ordering::SeqCst);
        let _ = load.await;
        await_up(rig, &[0, 1, 2, 3, 4], &mut outcome, cycles).await?;
        // H on masters 0, 1, 2 only.
        let resource = format!("interleavings/{seed}/flap/held/{cycles}");
        rig.set_mode(3, Mode::Blackhole);
        rig.set_mode(4, Mode::Blackhole);
        let holder = acquire(
            rig.channel.clone(),
            &resource,
            ttl,
            Duration::from_secs(1),
            None,
        )
        .await;
        let granted = Instant::now();
        rig.set_mode(3, Mode::Pass);
        rig.set_mode(4, Mode::Pass);
        let holder = match holder {
            Ok(lock) => lock,
            Err(status) => {
                outcome.violation(
                    "proves_nothing",
                    format!("cycle {cycles}: H was not granted with three masters: {status}"),
                );
                continue;
            }
        };
        let valid_until = granted + validity(&holder);
        rig.restart_empty(0).await?;
        await_up(rig, &[3, 4], &mut outcome, cycles).await?;
        let mut quarantined = false;
        let mut attempts_after_up = 0u64;
        while Instant::now() + Duration::from_millis(100) < valid_until {
            let answer = acquire(
                rig.channel.clone(),
                &resource,
                Duration::from_secs(1),
                Duration::ZERO,
                None,
            )
            .await;
            let at = Instant::now();
            match answer {
                Ok(lock) if at < valid_until => {
                    outcome.violation(
                        "two_holders",
                        format!(
                            "cycle {cycles}: granted {resource} {:?} before H's validity \
                             ended, after master 0 flapped and restarted empty",
                            valid_until - at
                        ),
                    );
                    let _ = release(rig.channel.clone(), &lock).await;
                }
                Ok(lock) => {
                    let _ = release(rig.channel.clone(), &lock).await;
                }
                Err(_) => refused += 1,
            }
            attempts_after_up += 1;
            let q = rig.gauge("redlock_node_quarantined", 0).await?;
            quarantined |= q == Some(1.0);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !quarantined {
            outcome.violation(
                "not_quarantined",
                format!(
                    "cycle {cycles}: master 0 restarted empty after flapping and the replica \
                     never reported it quarantined ({attempts_after_up} attempts)"
                ),
            );
        }
        let _ = release(rig.channel.clone(), &holder).await;
        // The next cycle starts from a trusted master 0.
        let (_, over) = rig
            .await_gauge("redlock_node_quarantined", 0, ttl * 3, |v| v == 0.0)
            .await?;
        if !over {
            outcome.violation(
                "quarantine_never_ends",
                format!(
                    "cycle {cycles}: master 0 still quarantined after {:?}",
                    ttl * 3
                ),
            );
        }
    }
    outcome.figure("cycles", cycles);
    outcome.figure("connection_closes", closes);
    outcome.figure("calls_while_flapping", busy.load(Ordering::SeqCst));
    outcome.figure("refused_while_h_valid", refused);
    Ok(outcome)
}

/// Acquire and Release of fresh names until `stop`.
async fn traffic(
    channel: tonic::transport::Channel,
    prefix: String,
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let name = format!("{prefix}/{n}");
        if let Ok(lock) = acquire(
            channel.clone(),
            &name,
            Duration::from_secs(1),
            Duration::ZERO,
            None,
        )
        .await
        {
            let _ = release(channel.clone(), &lock).await;
        }
        calls.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits until the replica reports `masters` up (`redlock_node_up`).
async fn await_up(
    rig: &Rig,
    masters: &[usize],
    outcome: &mut Outcome,
    cycle: u64,
) -> Result<(), BoxError> {
    for &m in masters {
        let (_, up) = rig
            .await_gauge("redlock_node_up", m, UP_LIMIT, |v| v == 1.0)
            .await?;
        if !up {
            outcome.violation(
                "master_never_up",
                format!("cycle {cycle}: master {m} not up within {UP_LIMIT:?}"),
            );
        }
    }
    Ok(())
}
