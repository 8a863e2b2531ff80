//! Every metric the daemon exports, in one place: names, label values and
//! the helpers the rest of the code calls. Labels are bounded sets (RPC
//! names, gRPC code names, master names, fixed kinds): never a resource name,
//! an owner or a token, whose cardinality is unbounded.
//!
//! The names, their HELP text and the histograms' buckets are `names.rs`;
//! here the recorder's installation and the recording helpers.

mod names;

use metrics::{counter, gauge, histogram, Counter, Histogram};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use names::*;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

static HANDLE: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// The metrics recorder could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetricsError {
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
pub(crate) fn install() -> Result<PrometheusHandle, MetricsError> {
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
        .set_buckets_for_metric(Matcher::Full(HANDOFF_GAP.into()), &GAP_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(GRANT_VALIDITY_RATIO.into()), &RATIO_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(ACQUIRE_ATTEMPTS.into()), &ATTEMPT_BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|_| MetricsError::RecorderTaken)?;
    describe();
    // Exported from the start at 0, so that an alert on its increase sees
    // the first loss (a counter that appears at 1 shows no increase).
    counter!(LOCKS_LOST_TOTAL).increment(0);
    counter!(FORCE_RELEASES_TOTAL).increment(0);
    counter!(LOCK_DELAY_REFUSALS_TOTAL).increment(0);
    counter!(ABANDONED_GRANTS_TOTAL).increment(0);
    counter!(ELECTION_LEADERSHIPS_TOTAL).increment(0);
    gauge!(ELECTIONS_LED).set(0.0);
    gauge!(ELECTION_TERM).set(0.0);
    gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    process_collector().describe();
    *slot = Some(handle.clone());
    Ok(handle)
}

/// Gives every metric its HELP text.
fn describe() {
    for (name, kind, help) in DESCRIPTIONS {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, help),
            Kind::Gauge => metrics::describe_gauge!(name, help),
            Kind::Histogram => metrics::describe_histogram!(name, help),
        }
    }
}

/// The process metrics (CPU seconds, resident and virtual memory, open
/// and maximum file descriptors, threads, start time), in the names
/// Prometheus client libraries use.
fn process_collector() -> &'static metrics_process::Collector {
    static COLLECTOR: std::sync::OnceLock<metrics_process::Collector> = std::sync::OnceLock::new();
    COLLECTOR.get_or_init(metrics_process::Collector::default)
}

/// Reads the process metrics now: called on every scrape, before rendering.
pub(crate) fn collect_process() {
    process_collector().collect();
}

/// The handles of the metrics every call or grant records, each looked up
/// once (see [`NodeCommands`] for why), at its first use: after the daemon
/// installed the recorder (`crate::server` does that before serving).
fn once<T>(cell: &'static OnceLock<T>, resolve: impl FnOnce() -> T) -> &'static T {
    cell.get_or_init(resolve)
}

/// A call's counter (by RPC and outcome) and duration histogram (by RPC).
type RequestHandles = (&'static str, &'static str, Counter, Histogram);

/// One answered call.
pub(crate) fn request(rpc: &'static str, outcome: &'static str, elapsed: Duration) {
    // A few dozen pairs at most (RPCs times the outcomes they meet).
    static HANDLES: Mutex<Vec<RequestHandles>> = Mutex::new(Vec::new());
    let (counter, histogram) = {
        let mut handles = HANDLES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match handles.iter().find(|h| h.0 == rpc && h.1 == outcome) {
            Some((_, _, counter, histogram)) => (counter.clone(), histogram.clone()),
            None => {
                let counter = counter!(REQUESTS_TOTAL, "rpc" => rpc, "outcome" => outcome);
                let histogram = histogram!(REQUEST_DURATION, "rpc" => rpc);
                handles.push((rpc, outcome, counter.clone(), histogram.clone()));
                (counter, histogram)
            }
        }
    };
    counter.increment(1);
    histogram.record(elapsed.as_secs_f64());
}

/// One finished acquisition: how many attempts, and whether it met a holder.
pub(crate) fn acquisition(attempts: u32, contended: bool) {
    static ATTEMPTS: OnceLock<Histogram> = OnceLock::new();
    static CONTENDED: OnceLock<Counter> = OnceLock::new();
    once(&ATTEMPTS, || histogram!(ACQUIRE_ATTEMPTS)).record(f64::from(attempts));
    if contended {
        once(&CONTENDED, || counter!(CONTENDED_TOTAL)).increment(1);
    }
}

/// Time an acquisition with `wait` spent waiting.
pub(crate) fn waited(elapsed: Duration) {
    static WAITED: OnceLock<Histogram> = OnceLock::new();
    once(&WAITED, || histogram!(WAIT_DURATION)).record(elapsed.as_secs_f64());
}

/// One master's reply to an acquire command (`granted`, `refused`, `error`, `timeout`).
/// The four counters are looked up once (see [`NodeCommands`] for why).
pub(crate) fn acquire_vote(result: &'static str) {
    const RESULTS: [&str; 4] = ["granted", "refused", "error", "timeout"];
    static VOTES: OnceLock<[Counter; 4]> = OnceLock::new();
    match RESULTS.iter().position(|r| *r == result) {
        Some(index) => VOTES
            .get_or_init(|| RESULTS.map(|r| counter!(ACQUIRE_VOTES, "result" => r)))[index]
            .increment(1),
        None => counter!(ACQUIRE_VOTES, "result" => result).increment(1),
    }
}

/// A grant's fence was fixed in one round, or by the commit round.
pub(crate) fn fence_round(commit: bool) {
    static PATHS: OnceLock<[Counter; 2]> = OnceLock::new();
    let paths = once(&PATHS, || {
        ["one_round", "commit"].map(|path| counter!(FENCE_GRANTS_TOTAL, "path" => path))
    });
    paths[usize::from(commit)].increment(1);
}

/// A grant: how much of the ttl was left as validity.
pub(crate) fn grant(validity: Duration, ttl: Duration) {
    static RATIO: OnceLock<Histogram> = OnceLock::new();
    if !ttl.is_zero() {
        once(&RATIO, || histogram!(GRANT_VALIDITY_RATIO))
            .record(validity.as_secs_f64() / ttl.as_secs_f64());
    }
}

/// One master's command-duration histograms, each looked up once, at its
/// first use, and kept.
///
/// Why: every operation of every batch records its duration, and a
/// labelled lookup (building the key with an owned copy of the master's
/// name, hashing it, finding it in the recorder's registry) cost several
/// times the recording itself, ten times per lock cycle.
/// Resolved lazily rather than at start so that a recorder installed after
/// the masters were set up still receives them; the daemon installs it
/// first (`crate::server`).
pub(crate) struct NodeCommands {
    node: Arc<str>,
    /// By command code (`crate::valkey::scripts::Op` as an index).
    durations: Box<[OnceLock<Histogram>]>,
}

impl NodeCommands {
    /// Handles for master `node`, for command codes below `codes`.
    pub(crate) fn new(node: Arc<str>, codes: usize) -> NodeCommands {
        NodeCommands {
            node,
            durations: (0..codes).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The master's name, as its metrics label it.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// One command (code `code`, named `command`) and how long it took.
    pub(crate) fn record(&self, code: usize, command: &'static str, elapsed: Duration) {
        match self.durations.get(code) {
            Some(slot) => slot
                .get_or_init(|| {
                    histogram!(NODE_COMMAND_DURATION, "node" => self.node.to_string(), "command" => command)
                })
                .record(elapsed.as_secs_f64()),
            None => node_command(&self.node, command, elapsed),
        }
    }
}

/// One command on one master and how long it took.
pub(crate) fn node_command(node: &str, command: &'static str, elapsed: Duration) {
    histogram!(NODE_COMMAND_DURATION, "node" => node.to_owned(), "command" => command)
        .record(elapsed.as_secs_f64());
}

/// A master did not answer a command.
pub(crate) fn node_error(node: &str, kind: &'static str) {
    counter!(NODE_ERRORS_TOTAL, "node" => node.to_owned(), "kind" => kind).increment(1);
}

/// A batch to `node` was given more time: the daemon ran late at its
/// `node_timeout` (`crate::valkey::pace::more_time`).
pub(crate) fn node_overdue(node: &str) {
    counter!(NODE_OVERDUE_TOTAL, "node" => node.to_owned()).increment(1);
}

/// A master's connection state and quarantine (`quarantine_left`: zero
/// when none).
pub(crate) fn node_state(node: &str, up: bool, quarantine_left: Duration) {
    let quarantined = !quarantine_left.is_zero();
    gauge!(NODE_UP, "node" => node.to_owned()).set(f64::from(u8::from(up)));
    gauge!(NODE_QUARANTINED, "node" => node.to_owned()).set(f64::from(u8::from(quarantined)));
    gauge!(NODE_QUARANTINE_SECONDS, "node" => node.to_owned()).set(quarantine_left.as_secs_f64());
}

/// Locks held through this replica now (see `redlock::held`).
pub(crate) fn locks_held(count: usize) {
    gauge!(LOCKS_HELD).set(count as f64);
}

/// Whether a quorum of masters is reachable, and how many callers wait.
pub(crate) fn availability(quorum: bool, waiters: usize, queued: usize, limit: usize) {
    gauge!(QUORUM_AVAILABLE).set(f64::from(u8::from(quorum)));
    gauge!(WAITERS).set(waiters as f64);
    gauge!(ACQUISITIONS_QUEUED).set(queued as f64);
    gauge!(ADMISSION_LIMIT).set(limit as f64);
}

/// A session opened (+1) or ended (-1).
pub(crate) fn session_delta(delta: f64) {
    gauge!(SESSIONS_ACTIVE).increment(delta);
}

/// A Campaign was elected with `term`.
pub(crate) fn leadership_began(term: u64) {
    counter!(ELECTION_LEADERSHIPS_TOTAL).increment(1);
    gauge!(ELECTIONS_LED).increment(1.0);
    // Precision: terms are fences (microseconds since the epoch, about
    // 2^51), below f64's 2^53 of exact integers.
    gauge!(ELECTION_TERM).set(term as f64);
}

/// A Campaign's leadership ended.
pub(crate) fn leadership_ended() {
    gauge!(ELECTIONS_LED).decrement(1.0);
}

/// A waiter was granted a resource that had stood free for `gap` since
/// its holder's end, as the waiter learned it; for an election, the time
/// without a leader (`kind` `election`, else `lock`).
pub(crate) fn stood_free(election: bool, gap: Duration) {
    static GAPS: OnceLock<[Histogram; 2]> = OnceLock::new();
    let gaps = GAPS
        .get_or_init(|| ["lock", "election"].map(|kind| histogram!(HANDOFF_GAP, "kind" => kind)));
    gaps[usize::from(election)].record(gap.as_secs_f64());
}

/// A session's lock was lost.
pub(crate) fn lock_lost() {
    counter!(LOCKS_LOST_TOTAL).increment(1);
}

/// An operator force-released a held lock.
pub(crate) fn force_release() {
    counter!(FORCE_RELEASES_TOTAL).increment(1);
}

/// A grant was released because its caller was gone before the answer
/// reached it.
pub(crate) fn abandoned_grant() {
    counter!(ABANDONED_GRANTS_TOTAL).increment(1);
}

/// An acquire attempt was refused while a lock-delay ran.
pub(crate) fn lock_delay_refusal() {
    counter!(LOCK_DELAY_REFUSALS_TOTAL).increment(1);
}

/// The rate at which a master's clock drifts from ours.
pub(crate) fn node_clock_skew(node: &str, rate: f64) {
    gauge!(NODE_CLOCK_SKEW, "node" => node.to_owned()).set(rate);
}

/// A master's wall-clock offset from ours, in seconds.
pub(crate) fn node_clock_offset(node: &str, seconds: f64) {
    gauge!(NODE_CLOCK_OFFSET, "node" => node.to_owned()).set(seconds);
}

/// A call refused before it was served; `reason` is one of the fixed kinds
/// of [`AUTH_DENIED_TOTAL`].
pub(crate) fn auth_denied(reason: &'static str) {
    counter!(AUTH_DENIED_TOTAL, "reason" => reason).increment(1);
}

/// A connection refused at accept; `reason` is one of the fixed kinds of
/// [`CONNECTIONS_REFUSED_TOTAL`].
pub(crate) fn connection_refused(reason: &'static str) {
    counter!(CONNECTIONS_REFUSED_TOTAL, "reason" => reason).increment(1);
}
