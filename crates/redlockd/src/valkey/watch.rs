//! The background watchers of one master: connection loss and return,
//! `INFO` after every (re)connection (features, unsafe setups, restarts), a
//! PING a few times a second (a hung master keeps its connection open: only
//! its silence shows it), and a slow comparison of the master's clock with
//! ours (clock jumps).

use super::boot;
use super::clock_jump::{ClockReading, JumpWatch};
use super::offset::Offset;
use super::server_info::ServerInfo;
use super::state::{CertificateDue, NodeState};
use super::{NodeSettings, ValkeyMaster};
use crate::metrics;
use fred::clients::WithOptions;
use fred::prelude::{Client, ClientLike, EventInterface, Value};
use fred::types::{ClusterHash, CustomCommand, InfoKind};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

/// Pause between attempts to read `INFO` on a new connection.
const INFO_RETRY: Duration = Duration::from_millis(100);

/// How often each master's clock is compared with ours.
const CLOCK_CHECK_EVERY: Duration = Duration::from_secs(5);

/// How long a clock reading may take before it counts as failed: far
/// longer than `node_timeout`, so that readings go on under sustained load
/// (a slow one is still compared, with its uncertainty: `clock_jump`).
fn clock_read_timeout(node_timeout: Duration) -> Duration {
    (node_timeout * 20).max(Duration::from_secs(1))
}

/// How often each master is PINGed, so that it answers something even
/// while no lock traffic goes to it (see [`answer_window`]).
const PING_EVERY: Duration = Duration::from_millis(250);

/// How recently a master must have answered to count as up (health and
/// `redlock_node_up`): two PING periods plus `node_timeout`, so that one
/// late or lost PING on a busy machine does not mark a live master down,
/// and a hung one is down at most this long after its last answer.
pub(crate) fn answer_window(node_timeout: Duration) -> Duration {
    PING_EVERY * 2 + node_timeout
}

/// Starts the watchers of `node`; they end when its client is closed.
pub(super) fn spawn(node: &ValkeyMaster, settings: NodeSettings) {
    let (state, name) = (node.state.clone(), node.name.clone());
    let mut errors = node.client.error_rx();
    tokio::spawn(async move {
        // Connection-level errors only (fred does not broadcast command errors).
        loop {
            match errors.recv().await {
                Ok((error, _)) => {
                    if state.set_down(true) {
                        tracing::warn!(node = %name, %error, "master connection lost");
                    }
                }
                // Errors were missed (a flapping master): keep watching. A
                // lost connection is followed by a reconnection, which the
                // other watcher verifies again, lagging or not.
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(node = %name, missed, "connection errors missed");
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    let (client, state, name) = (node.client.clone(), node.state.clone(), node.name.clone());
    let command = node.command.clone();
    let mut reconnects = node.client.reconnect_rx();
    tokio::spawn(async move {
        // fred announces the first connection as a reconnection too.
        loop {
            if client.wait_for_connect().await.is_ok() {
                state.reconnected();
                // Until INFO is read the master's answers do not count, so
                // a failed read (a slow master: INFO is bounded by
                // node_timeout too) is retried for as long as the
                // connection lasts, not left until the next reconnection.
                let mut failures = 0u32;
                loop {
                    let connection = state.connection();
                    match read_info(&client).await {
                        Ok(info) => {
                            state.answered();
                            state.observe_on(connection, &info);
                            if !state.verified() {
                                // Another connection was opened meanwhile:
                                // read INFO on it.
                                continue;
                            }
                            // The clock offset, at once on a new connection.
                            if let Ok((_, offset)) = read_offset(&command).await {
                                take_offset(&state, &name, offset, &settings);
                            }
                            break;
                        }
                        Err(error) if state.is_down() || !client.is_connected() => {
                            tracing::debug!(node = %name, %error, "INFO failed; connection lost");
                            break;
                        }
                        Err(error) => {
                            failures += 1;
                            if failures == 1 {
                                tracing::warn!(node = %name, %error, "INFO failed; retrying");
                            }
                            tokio::time::sleep(INFO_RETRY).await;
                        }
                    }
                }
            }
            match reconnects.recv().await {
                Ok(_) => {}
                // Reconnections were missed: treat it as one more, so the
                // current connection is verified again (never stop watching).
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(node = %name, missed, "reconnections missed; verifying again");
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    let (command, boot_key) = (node.command.clone(), node.peers.boot_key().to_owned());
    // Weak: the PINGs end once the node is dropped.
    let state = Arc::downgrade(&node.state);
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(PING_EVERY);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let Some(state) = state.upgrade() else {
                return;
            };
            // Bounded by node_timeout, fail-fast while disconnected.
            if command.ping::<Value>(None).await.is_ok() {
                state.answered();
            }
            tend_certificate(&state, &command, &boot_key).await;
        }
    });
    let command = node.client.with_options(&fred::prelude::Options {
        timeout: Some(clock_read_timeout(settings.node_timeout)),
        max_attempts: Some(1),
        fail_fast: true,
        ..fred::prelude::Options::default()
    });
    let name = node.name.clone();
    // Weak: the check ends once the node is dropped.
    let state = Arc::downgrade(&node.state);
    tokio::spawn(async move {
        let mut watch = JumpWatch::default();
        let mut interval = tokio::time::interval(CLOCK_CHECK_EVERY);
        loop {
            interval.tick().await;
            let Some(state) = state.upgrade() else {
                return;
            };
            let asked = Instant::now();
            let Ok((master, offset)) = read_offset(&command).await else {
                continue;
            };
            let reading = ClockReading {
                asked,
                rtt: asked.elapsed(),
                master,
            };
            take_offset(&state, &name, offset, &settings);
            let conclusive = offset.conclusive(settings.node_timeout);
            if !conclusive {
                tracing::debug!(node = %name, rtt = ?reading.rtt, "slow clock reading: compared, not a baseline");
            }
            if let Some((then, check)) = watch.observe(reading, conclusive, settings.drift_factor) {
                if conclusive {
                    metrics::node_clock_skew(&name, check.rate);
                }
                if check.jumped {
                    let (master, local) = (
                        reading.master.checked_sub(then.master).unwrap_or_default(),
                        reading.asked.duration_since(then.asked),
                    );
                    state.quarantine_now(&format!(
                        "the master's clock moved {master:?} while ours moved {local:?}"
                    ));
                }
            }
        }
    });
}

/// Writes or takes back the master's boot certificate when due
/// (`super::boot`); a failure is retried at the next PING.
async fn tend_certificate(state: &NodeState, command: &WithOptions<Client>, key: &str) {
    let Some(due) = state.certificate_due() else {
        return;
    };
    match due {
        CertificateDue::Write(run_id) => {
            if let Ok(written) = boot::write(state, command, key, &run_id).await {
                if written {
                    tracing::debug!(node = %state.name(), "boot certificate written");
                }
                // Not written: another process answers; the reconnection
                // watcher will see it and quarantine it.
                state.certificate_known(&run_id);
            }
        }
        CertificateDue::Revoke(run_id) => {
            if boot::revoke(state, command, key, &run_id).await.is_ok() {
                state.certificate_revoked(&run_id);
            }
        }
    }
}

/// `INFO server`, `INFO replication` and `INFO memory`, parsed together.
async fn read_info(client: &Client) -> Result<ServerInfo, String> {
    let mut text = String::new();
    for section in [InfoKind::Server, InfoKind::Replication, InfoKind::Memory] {
        let part: String = client
            .info(Some(section))
            .await
            .map_err(|e| e.to_string())?;
        text.push_str(&part);
        text.push('\n');
    }
    ServerInfo::parse(&text).ok_or_else(|| "unrecognised INFO reply".to_owned())
}

/// The master's wall clock (`TIME`), and its offset from ours (read
/// before and after it).
async fn read_offset(command: &WithOptions<Client>) -> Result<(Duration, Offset), ()> {
    let wall = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
    };
    let sent = wall();
    let master = master_time(command).await?;
    Ok((master, Offset::measure(master, sent, wall())))
}

/// Exports a clock-offset reading and applies the bound (`super::offset`),
/// unless the reading was too slow to tell anything ([`Offset::conclusive`]).
fn take_offset(state: &NodeState, name: &str, offset: Offset, settings: &NodeSettings) {
    if offset.conclusive(settings.node_timeout) {
        metrics::node_clock_offset(name, offset.seconds);
        state.clock_offset(offset, settings.max_clock_offset);
    }
}

/// The master's wall clock (`TIME`), as time since the Unix epoch.
async fn master_time(command: &WithOptions<Client>) -> Result<Duration, ()> {
    let cmd = CustomCommand::new_static("TIME", ClusterHash::FirstKey, false);
    let reply: Value = command
        .custom(cmd, Vec::<Value>::new())
        .await
        .map_err(|_| ())?;
    let Value::Array(parts) = reply else {
        return Err(());
    };
    let number = |v: &Value| {
        v.as_u64()
            .or_else(|| v.as_string().and_then(|s| s.parse().ok()))
    };
    match parts.as_slice() {
        [seconds, micros] => Ok(Duration::from_secs(number(seconds).ok_or(())?)
            + Duration::from_micros(number(micros).ok_or(())?)),
        _ => Err(()),
    }
}

/// Marks masters that are the same server (same `run_id`) as duplicates of
/// the first one listed.
pub fn mark_duplicates(nodes: &[Arc<ValkeyMaster>]) {
    for (i, node) in nodes.iter().enumerate() {
        let run_id = node.state.run_id();
        let first = (!run_id.is_empty())
            .then(|| {
                nodes[..i]
                    .iter()
                    .find(|earlier| earlier.state.run_id() == run_id)
            })
            .flatten();
        node.state
            .set_duplicate_of(first.map(|earlier| earlier.name.clone()));
    }
}
