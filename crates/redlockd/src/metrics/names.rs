//! The name of every metric the daemon exports, its HELP text, and the
//! buckets of the histograms. A dashboard or alert rule names only these.

/// Calls per RPC and outcome (the gRPC status code name).
pub(crate) const REQUESTS_TOTAL: &str = "redlock_requests_total";
/// Time to answer a call, per RPC.
pub(crate) const REQUEST_DURATION: &str = "redlock_request_duration_seconds";
/// Attempts one acquisition took (successful or not).
pub(crate) const ACQUIRE_ATTEMPTS: &str = "redlock_acquire_attempts";
/// Time an acquisition with `wait` spent waiting, granted or not.
pub(crate) const WAIT_DURATION: &str = "redlock_wait_duration_seconds";
/// 1 while a master is connected and answering (see `crate::valkey::ValkeyMaster::is_up`).
pub(crate) const NODE_UP: &str = "redlock_node_up";
/// Time one operation took on one master, from the moment it was queued
/// for the master's next batch to its reply (so it includes the batch wait).
pub(crate) const NODE_COMMAND_DURATION: &str = "redlock_node_command_duration_seconds";
/// Commands a master did not answer, by kind (timeout, unavailable, server, protocol).
pub(crate) const NODE_ERRORS_TOTAL: &str = "redlock_node_errors_total";
/// Batches given more time because the daemon itself ran late when their
/// `node_timeout` passed (`crate::valkey::pace::more_time`): its own backlog, not
/// the master's silence.
pub(crate) const NODE_OVERDUE_TOTAL: &str = "redlock_node_overdue_total";
/// 1 while a master's answers do not count toward a quorum (restart quarantine).
pub(crate) const NODE_QUARANTINED: &str = "redlock_node_quarantined";
/// Seconds left of a master's restart quarantine (0: none): the real
/// length, from the horizons, once they were read; the blanket bound
/// (`max_ttl` plus drift) until then, or under `restart_quarantine = "max_ttl"`.
pub(crate) const NODE_QUARANTINE_SECONDS: &str = "redlock_node_quarantine_seconds";
/// Masters' replies to acquire commands: granted, refused, error, timeout.
pub(crate) const ACQUIRE_VOTES: &str = "redlock_acquire_votes_total";
/// Grants by how their fence was fixed: `one_round` (the acquire took the
/// proposed fence on the whole granting quorum) or `commit` (the fallback
/// fence commit round), see `redlock::fence`.
pub(crate) const FENCE_GRANTS_TOTAL: &str = "redlock_fence_grants_total";
/// Validity at grant divided by ttl: how much of the lease the algorithm ate.
pub(crate) const GRANT_VALIDITY_RATIO: &str = "redlock_grant_validity_ratio";
/// Acquisitions that found the resource held.
pub(crate) const CONTENDED_TOTAL: &str = "redlock_contended_total";
/// 1 while a quorum of masters is reachable.
pub(crate) const QUORUM_AVAILABLE: &str = "redlock_quorum_available";
/// Open `Hold` sessions.
pub(crate) const SESSIONS_ACTIVE: &str = "redlock_sessions_active";
/// Locks handed out through this replica and not yet ended (see `redlock::held`).
pub(crate) const LOCKS_HELD: &str = "redlock_locks_held";
/// Callers waiting for a resource.
pub(crate) const WAITERS: &str = "redlock_waiters";
/// Acquisitions queued for admission: the daemon's own backlog in front of
/// the masters (see `redlock::admission`).
pub(crate) const ACQUISITIONS_QUEUED: &str = "redlock_acquisitions_queued";
/// The adaptive bound on acquisition attempts out at the masters at once.
pub(crate) const ADMISSION_LIMIT: &str = "redlock_admission_limit";
/// How fast a master's clock runs relative to ours ((master - ours) / ours).
pub(crate) const NODE_CLOCK_SKEW: &str = "redlock_node_clock_skew_ratio";
/// A master's wall clock minus ours, in seconds (see `crate::valkey::offset`).
pub(crate) const NODE_CLOCK_OFFSET: &str = "redlock_node_clock_offset_seconds";
/// Leaderships begun through this replica's `Campaign` sessions (never
/// labelled with the election).
pub(crate) const ELECTION_LEADERSHIPS_TOTAL: &str = "redlock_election_leaderships_total";
/// Leaderships held through this replica's `Campaign` sessions now.
pub(crate) const ELECTIONS_LED: &str = "redlock_elections_led";
/// The term of the leadership most recently begun through this replica
/// (never labelled with the election).
pub(crate) const ELECTION_TERM: &str = "redlock_election_term";
/// How long a resource stood free between its holder's end and the grant
/// to a waiter behind it, by `kind` (`election`: the time without a
/// leader; `lock`: every other kind).
pub(crate) const HANDOFF_GAP: &str = "redlock_handoff_gap_seconds";
/// Session locks lost (an extension could not keep them).
pub(crate) const LOCKS_LOST_TOTAL: &str = "redlock_locks_lost_total";
/// Locks released by an operator (`LockAdmin.ForceRelease`).
pub(crate) const FORCE_RELEASES_TOTAL: &str = "redlock_force_releases_total";
/// Grants released at once because their caller was gone before the
/// answer reached it.
pub(crate) const ABANDONED_GRANTS_TOTAL: &str = "redlock_abandoned_grants_total";
/// Acquire attempts refused while a vanished holder's lock-delay ran.
pub(crate) const LOCK_DELAY_REFUSALS_TOTAL: &str = "redlock_lock_delay_refusals_total";
/// Calls turned away by authentication, namespaces or the flood limits, by
/// reason (`unauthenticated`, `permission_denied`, `rate_limited`,
/// `too_many_calls`, `unauthenticated_calls`: health or reflection calls past
/// `limits.max_unauthenticated_calls`): a misconfigured client or an attack shows here before
/// anyone reads the logs. Never labelled with a client, token or resource.
pub(crate) const AUTH_DENIED_TOTAL: &str = "redlock_auth_denied_total";

/// Client connections closed as soon as they were accepted, by reason
/// (`max_connections`, `max_connections_per_peer`), failed accepts
/// (`accept_error`: out of file descriptors) and failed or timed-out TLS
/// handshakes (`tls_handshake`). Never labelled with a peer.
pub(crate) const CONNECTIONS_REFUSED_TOTAL: &str = "redlock_connections_refused_total";

/// Always 1, labelled with the daemon's version: which build runs where.
pub(crate) const BUILD_INFO: &str = "redlock_build_info";

/// The kind of a metric, for its description.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric's HELP text (Prometheus shows it; `promtool check metrics`
/// requires it). One row per metric above, so none goes undescribed.
pub(super) const DESCRIPTIONS: [(&str, Kind, &str); 33] = [
    (
        ACQUISITIONS_QUEUED,
        Kind::Gauge,
        "Acquisitions waiting for admission: the daemon's own backlog in front of the masters.",
    ),
    (
        ADMISSION_LIMIT,
        Kind::Gauge,
        "Acquisition attempts allowed out at the masters at once now (adapts to how fast they answer).",
    ),
    (
        NODE_QUARANTINE_SECONDS,
        Kind::Gauge,
        "Seconds left of the master's restart quarantine (0: none).",
    ),
    (
        REQUESTS_TOTAL,
        Kind::Counter,
        "Calls answered, by RPC and outcome (gRPC status code name).",
    ),
    (
        REQUEST_DURATION,
        Kind::Histogram,
        "Time to answer a call, by RPC.",
    ),
    (
        ACQUIRE_ATTEMPTS,
        Kind::Histogram,
        "Attempts one acquisition took, granted or not.",
    ),
    (
        WAIT_DURATION,
        Kind::Histogram,
        "Time an acquisition with a wait spent waiting, granted or not.",
    ),
    (
        NODE_UP,
        Kind::Gauge,
        "1 while the master is connected and answered (a command or a PING) within two PING periods plus node_timeout; 0 for a hung master whose connection stays open.",
    ),
    (
        NODE_COMMAND_DURATION,
        Kind::Histogram,
        "Time one operation took on one master, from being queued for its batch to its reply.",
    ),
    (
        NODE_ERRORS_TOTAL,
        Kind::Counter,
        "Master commands that failed, by kind (timeout, unavailable, server, protocol).",
    ),
    (
        NODE_OVERDUE_TOTAL,
        Kind::Counter,
        "Batches given more time because the daemon itself ran late at their node_timeout.",
    ),
    (
        NODE_QUARANTINED,
        Kind::Gauge,
        "1 while the master's votes do not count (restart quarantine).",
    ),
    (
        ACQUIRE_VOTES,
        Kind::Counter,
        "Masters' replies to acquire commands, by result (granted, refused, error, timeout).",
    ),
    (
        GRANT_VALIDITY_RATIO,
        Kind::Histogram,
        "Validity at grant divided by ttl: the share of the lease the acquisition left.",
    ),
    (
        FENCE_GRANTS_TOTAL,
        Kind::Counter,
        "Grants by how their fence was fixed: one_round (the acquire took the proposed fence) or commit (the fallback commit round).",
    ),
    (
        CONTENDED_TOTAL,
        Kind::Counter,
        "Acquisitions that found the resource held.",
    ),
    (
        QUORUM_AVAILABLE,
        Kind::Gauge,
        "1 while a quorum of trusted masters is reachable.",
    ),
    (SESSIONS_ACTIVE, Kind::Gauge, "Open Hold sessions."),
    (
        ELECTION_LEADERSHIPS_TOTAL,
        Kind::Counter,
        "Leaderships begun through this replica's Campaign sessions (every election together).",
    ),
    (
        ELECTIONS_LED,
        Kind::Gauge,
        "Leaderships held through this replica's Campaign sessions now; sum over replicas for the fleet.",
    ),
    (
        ELECTION_TERM,
        Kind::Gauge,
        "The term of the leadership most recently begun through this replica's Campaign sessions (every election together: with one election, max over replicas is its current term).",
    ),
    (
        HANDOFF_GAP,
        Kind::Histogram,
        "Time a resource stood free between its holder's end (its keys' expiry, or its release heard) and the grant to a waiter behind it, by kind: election (time without a leader) or lock.",
    ),
    (
        LOCKS_HELD,
        Kind::Gauge,
        "Locks handed out through this replica, still within their validity and not released through it; sum over replicas for the fleet.",
    ),
    (WAITERS, Kind::Gauge, "Callers waiting for a resource."),
    (
        NODE_CLOCK_SKEW,
        Kind::Gauge,
        "Rate at which the master's clock drifts from the daemon's ((master - ours) / ours).",
    ),
    (
        NODE_CLOCK_OFFSET,
        Kind::Gauge,
        "The master's wall clock (TIME) minus the daemon's, in seconds; beyond redlock.max_clock_offset the master does not count.",
    ),
    (
        LOCKS_LOST_TOTAL,
        Kind::Counter,
        "Session locks lost because an extension could not keep them.",
    ),
    (
        FORCE_RELEASES_TOTAL,
        Kind::Counter,
        "Locks released by an operator through LockAdmin.ForceRelease (something was held).",
    ),
    (
        ABANDONED_GRANTS_TOTAL,
        Kind::Counter,
        "Grants released at once because their caller was gone before the answer reached it (it cancelled, disconnected, or its deadline's cut-off passed).",
    ),
    (
        LOCK_DELAY_REFUSALS_TOTAL,
        Kind::Counter,
        "Acquire attempts refused while the lock-delay of a holder whose lock expired still ran.",
    ),
    (
        AUTH_DENIED_TOTAL,
        Kind::Counter,
        "Calls refused by authentication, namespaces or flood limits, by reason.",
    ),
    (
        CONNECTIONS_REFUSED_TOTAL,
        Kind::Counter,
        "Client connections closed at accept (connection caps) and failed accepts, by reason.",
    ),
    (
        BUILD_INFO,
        Kind::Gauge,
        "Always 1; the version label names the daemon's build.",
    ),
];

/// Seconds buckets from 100 µs to 10 s.
pub(super) const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];
/// A hand-off's gap: milliseconds after a release, up to a crashed
/// holder's whole ttl after its last extension.
pub(super) const GAP_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
pub(super) const RATIO_BUCKETS: [f64; 10] =
    [0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999, 1.0];
pub(super) const ATTEMPT_BUCKETS: [f64; 9] = [1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0];
