//! Watching the masters: every few hundred milliseconds the daemon looks at
//! each master connection, marks masters that are the same server, exports
//! `redlock_node_up`, `redlock_node_quarantined`,
//! `redlock_node_quarantine_seconds`, `redlock_quorum_available`
//! and `redlock_waiters`, and sets the standard gRPC health status of
//! `redlock.v1.LockService`: SERVING only while a quorum of masters is up and
//! trusted (not quarantined, not refused), so an orchestrator stops sending
//! traffic to a daemon that cannot grant locks. "Up" means answering, not
//! merely connected: a master counts as up only if it answered within the
//! last two PING periods plus `node_timeout` (`crate::valkey::ValkeyMaster::is_up`),
//! so hung masters (SIGSTOP, a stalled VM, whose connections stay open)
//! turn health NOT_SERVING within about a second.

use crate::metrics;
use crate::redlock::{Master, Redlock};
use crate::valkey::ValkeyMaster;
use metrics_exporter_prometheus::PrometheusHandle;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

/// The gRPC service name whose health follows the quorum.
pub(crate) const LOCK_SERVICE: &str = "redlock.v1.LockService";

/// How often the masters' state is looked at.
const INTERVAL: Duration = Duration::from_millis(200);

/// The held-locks gauge is refreshed every this many ticks (a second):
/// counting prunes the table of locks handed out, which may be large.
const HELD_LOCKS_EVERY: u32 = 5;

/// Histogram buckets are drained this often when nobody scrapes.
const UPKEEP_EVERY: u32 = 25;

/// Runs for the daemon's life. Once `shutdown` completes (a drain began),
/// health stays NOT_SERVING, and the gauges keep following the masters for
/// the rest of the drain (up to `server.shutdown_grace`), so that a
/// dashboard still sees what the draining daemon's sessions depend on.
pub(crate) async fn watch(
    engine: Arc<Redlock>,
    nodes: Vec<Arc<ValkeyMaster>>,
    reporter: HealthReporter,
    metrics: Option<PrometheusHandle>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut serving = None;
    let mut draining = false;
    let mut ticks = 0u32;
    let mut interval = tokio::time::interval(INTERVAL);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            () = &mut shutdown, if !draining => {
                reporter.set_service_status(LOCK_SERVICE, ServingStatus::NotServing).await;
                draining = true;
                continue;
            }
        }
        crate::valkey::mark_duplicates(&nodes);
        let mut up = 0;
        for node in &nodes {
            let node_up = node.is_up();
            // Only a master whose votes count helps to reach a quorum.
            up += usize::from(node_up && node.trusted());
            metrics::node_state(node.name(), node_up, node.state().quarantine_left());
        }
        let quorum = up >= engine.quorum().needed();
        metrics::availability(
            quorum,
            engine.waiting(),
            engine.queued(),
            engine.admission_limit(),
        );
        if !draining && serving != Some(quorum) {
            if quorum {
                tracing::info!(
                    up,
                    masters = nodes.len(),
                    "a quorum of masters is up: SERVING"
                );
            } else {
                tracing::warn!(
                    up,
                    masters = nodes.len(),
                    "fewer than a quorum of masters up: NOT_SERVING"
                );
            }
            let status = if quorum {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            reporter.set_service_status(LOCK_SERVICE, status).await;
            serving = Some(quorum);
        }
        ticks = ticks.wrapping_add(1);
        if ticks.is_multiple_of(HELD_LOCKS_EVERY) {
            metrics::locks_held(engine.held_locks());
        }
        if let (Some(handle), 0) = (&metrics, ticks % UPKEEP_EVERY) {
            handle.run_upkeep();
        }
    }
}
