//! Every metric the daemon exports, in one place: names, label values and
//! the helpers the rest of the code calls. Labels are bounded sets (RPC
//! names, gRPC code names, master names, fixed kinds): never a resource name,
//! an owner or a token, whose cardinality is unbounded.

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::Mutex;
use std::time::Duration;

/// Calls per RPC and outcome (the gRPC status code name).
pub const REQUESTS_TOTAL: &str = "redlock_requests_total";
/// Time to answer a call, per RPC.
pub const REQUEST_DURATION: &str = "redlock_request_duration_seconds";
/// Attempts one acquisition took (successful or not).
pub const ACQUIRE_ATTEMPTS: &str = "redlock_acquire_attempts";
/// Time an acquisition with `wait` spent waiting, granted or not.
pub const WAIT_DURATION: &str = "redlock_wait_duration_seconds";
/// 1 while the daemon's connection to a master is up.
pub const NODE_UP: &str = "redlock_node_up";
/// Time one operation took on one master, from the moment it was queued
/// for the master's next batch to its reply (so it includes the batch wait).
pub const NODE_COMMAND_DURATION: &str = "redlock_node_command_duration_seconds";
/// Commands a master did not answer, by kind (timeout, unavailable, server, protocol).
pub const NODE_ERRORS_TOTAL: &str = "redlock_node_errors_total";
/// 1 while a master's answers do not count toward a quorum (restart quarantine).
pub const NODE_QUARANTINED: &str = "redlock_node_quarantined";
/// Seconds left of a master's restart quarantine (0: none): the real
/// length, from the horizons, once they were read; the blanket bound
/// (`max_ttl` plus drift) until then, or under `restart_quarantine = "max_ttl"`.
pub const NODE_QUARANTINE_SECONDS: &str = "redlock_node_quarantine_seconds";
/// Masters' replies to acquire commands: granted, refused, error, timeout.
pub const ACQUIRE_VOTES: &str = "redlock_acquire_votes";
/// Validity at grant divided by ttl: how much of the lease the algorithm ate.
pub const GRANT_VALIDITY_RATIO: &str = "redlock_grant_validity_ratio";
/// Acquisitions that found the resource held.
pub const CONTENDED_TOTAL: &str = "redlock_contended_total";
/// 1 while a quorum of masters is reachable.
pub const QUORUM_AVAILABLE: &str = "redlock_quorum_available";
/// Open `Hold` sessions.
pub const SESSIONS_ACTIVE: &str = "redlock_sessions_active";
/// Callers waiting for a resource.
pub const WAITERS: &str = "redlock_waiters";
/// How fast a master's clock runs relative to ours ((master - ours) / ours).
pub const NODE_CLOCK_SKEW: &str = "redlock_node_clock_skew_ratio";
/// Session locks lost (an extension could not keep them).
pub const LOCKS_LOST_TOTAL: &str = "redlock_locks_lost_total";
/// Calls turned away by authentication, namespaces or the flood limits, by
/// reason (`unauthenticated`, `permission_denied`, `rate_limited`,
/// `too_many_calls`): a misconfigured client or an attack shows here before
/// anyone reads the logs. Never labelled with a client, token or resource.
pub const AUTH_DENIED_TOTAL: &str = "redlock_auth_denied_total";

/// Seconds buckets from 100 µs to 10 s.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];
const RATIO_BUCKETS: [f64; 10] = [0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999, 1.0];
const ATTEMPT_BUCKETS: [f64; 9] = [1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0];

static HANDLE: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// The metrics recorder could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The Prometheus recorder rejected its configuration.
    #[error("metrics: {0}")]
    Build(#[from] BuildError),
    /// Something else in the process installed a metrics recorder first.
    #[error("metrics: another metrics recorder is already installed")]
    RecorderTaken,
    /// The metrics endpoint could not listen.
    #[error("metrics.listen: {0}")]
    Listen(#[from] std::io::Error),
}

/// Installs the Prometheus recorder as the process's metrics recorder (once;
/// every daemon in the process shares it) and returns the handle that
/// renders the exposition text.
pub fn install() -> Result<PrometheusHandle, MetricsError> {
    let mut slot = HANDLE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(handle) = slot.as_ref() {
        return Ok(handle.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(REQUEST_DURATION.into()), &LATENCY_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full(NODE_COMMAND_DURATION.into()),
            &LATENCY_BUCKETS,
        )?
        .set_buckets_for_metric(Matcher::Full(WAIT_DURATION.into()), &LATENCY_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(GRANT_VALIDITY_RATIO.into()), &RATIO_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(ACQUIRE_ATTEMPTS.into()), &ATTEMPT_BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|_| MetricsError::RecorderTaken)?;
    *slot = Some(handle.clone());
    Ok(handle)
}

/// One answered call.
pub fn request(rpc: &'static str, outcome: &'static str, elapsed: Duration) {
    counter!(REQUESTS_TOTAL, "rpc" => rpc, "outcome" => outcome).increment(1);
    histogram!(REQUEST_DURATION, "rpc" => rpc).record(elapsed.as_secs_f64());
}

/// One finished acquisition: how many attempts, and whether it met a holder.
pub fn acquisition(attempts: u32, contended: bool) {
    histogram!(ACQUIRE_ATTEMPTS).record(f64::from(attempts));
    if contended {
        counter!(CONTENDED_TOTAL).increment(1);
    }
}

/// Time an acquisition with `wait` spent waiting.
pub fn waited(elapsed: Duration) {
    histogram!(WAIT_DURATION).record(elapsed.as_secs_f64());
}

/// One master's reply to an acquire command (`granted`, `refused`, `error`, `timeout`).
pub fn acquire_vote(result: &'static str) {
    counter!(ACQUIRE_VOTES, "result" => result).increment(1);
}

/// A grant: how much of the ttl was left as validity.
pub fn grant(validity: Duration, ttl: Duration) {
    if !ttl.is_zero() {
        histogram!(GRANT_VALIDITY_RATIO).record(validity.as_secs_f64() / ttl.as_secs_f64());
    }
}

/// One command on one master and how long it took.
pub fn node_command(node: &str, command: &'static str, elapsed: Duration) {
    histogram!(NODE_COMMAND_DURATION, "node" => node.to_owned(), "command" => command)
        .record(elapsed.as_secs_f64());
}

/// A master did not answer a command.
pub fn node_error(node: &str, kind: &'static str) {
    counter!(NODE_ERRORS_TOTAL, "node" => node.to_owned(), "kind" => kind).increment(1);
}

/// A master's connection state and quarantine (`quarantine_left`: zero
/// when none).
pub fn node_state(node: &str, up: bool, quarantine_left: Duration) {
    let quarantined = !quarantine_left.is_zero();
    gauge!(NODE_UP, "node" => node.to_owned()).set(f64::from(u8::from(up)));
    gauge!(NODE_QUARANTINED, "node" => node.to_owned()).set(f64::from(u8::from(quarantined)));
    gauge!(NODE_QUARANTINE_SECONDS, "node" => node.to_owned()).set(quarantine_left.as_secs_f64());
}

/// Whether a quorum of masters is reachable, and how many callers wait.
pub fn availability(quorum: bool, waiters: usize) {
    gauge!(QUORUM_AVAILABLE).set(f64::from(u8::from(quorum)));
    gauge!(WAITERS).set(waiters as f64);
}

/// A session opened (+1) or ended (-1).
pub fn session_delta(delta: f64) {
    gauge!(SESSIONS_ACTIVE).increment(delta);
}

/// A session's lock was lost.
pub fn lock_lost() {
    counter!(LOCKS_LOST_TOTAL).increment(1);
}

/// The rate at which a master's clock drifts from ours.
pub fn node_clock_skew(node: &str, rate: f64) {
    gauge!(NODE_CLOCK_SKEW, "node" => node.to_owned()).set(rate);
}

/// A call refused before it was served; `reason` is one of the fixed kinds
/// of [`AUTH_DENIED_TOTAL`].
pub fn auth_denied(reason: &'static str) {
    counter!(AUTH_DENIED_TOTAL, "reason" => reason).increment(1);
}
