//! The `[limits]` and `[session]` sections: how much waiting and how many
//! sessions one daemon accepts, and when a session's lock is extended.

use super::validate::invalid;
use super::ConfigError;
use serde::Deserialize;
use std::time::Duration;

/// The `[limits]` section: caps that protect the daemon (and the masters)
/// from one client's flood; past them a call gets RESOURCE_EXHAUSTED at once.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Callers waiting (Acquire with `wait`, or a Hold's acquisition) for
    /// one resource on this replica.
    pub max_waiters_per_resource: usize,
    /// Callers waiting on this replica, all resources together.
    pub max_waiters: usize,
    /// Open `Hold` sessions on this replica.
    pub max_sessions: usize,
    /// Open `Hold` sessions of one identity (an `[auth]` client, or a peer
    /// IP address without authentication). Below `max_sessions`, so that
    /// one identity's sessions, silent or not, cannot take every slot.
    pub max_sessions_per_identity: usize,
    /// Waiting acquisitions (Acquire with `wait`, a Hold's acquisition
    /// with `wait`) of one identity. Below `max_waiters` for the same
    /// reason.
    pub max_waiters_per_identity: usize,
    /// Calls per second each identity (a client of `[auth]`, or a peer
    /// address without authentication) may make, on average; 0: no limit.
    pub rate_per_second: u32,
    /// Calls an identity may make in a burst above `rate_per_second` (the
    /// token bucket's size). At least 1 when `rate_per_second` is set.
    pub burst: u32,
    /// Calls and streams in progress at once on one client connection, and
    /// the HTTP/2 concurrent-stream limit the daemon announces, so that a
    /// well-behaved client queues further calls on its side instead of
    /// being refused. Calls still winding down after their stream ended are
    /// tolerated up to twice it; past that, RESOURCE_EXHAUSTED. 0: no limit.
    pub max_calls_per_connection: usize,
    /// Acquisition attempts out at the masters at once (and, separately,
    /// extensions); more wait in the daemon's queue, in arrival order, before
    /// their round starts, so that a burst of callers is served at the
    /// masters' pace instead of timing out at `redlock.node_timeout`.
    pub max_acquisitions_in_flight: usize,
    /// Acquisitions waiting for admission at most; past it a call gets
    /// RESOURCE_EXHAUSTED ("the daemon is overloaded").
    pub max_queued_acquisitions: usize,
    /// Client connections open at once on the gRPC port, all peers
    /// together. Past it a new connection is closed as soon as it is
    /// accepted (counted in `redlock_connections_refused_total`), so idle
    /// or hostile connections cannot take every file descriptor.
    pub max_connections: usize,
    /// Client connections open at once from one peer IP address. Keeps one
    /// host from taking every connection of `max_connections`.
    pub max_connections_per_peer: usize,
    /// Calls open at once, all connections together, on the services that
    /// sit outside authentication: health (its `Watch` streams stay open)
    /// and reflection. Past it such a call gets RESOURCE_EXHAUSTED at once,
    /// so that a flood of health watches cannot take the daemon's memory.
    /// Lock calls never count here.
    pub max_unauthenticated_calls: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_waiters_per_resource: 1_000,
            max_waiters: 100_000,
            max_sessions: 100_000,
            max_sessions_per_identity: 50_000,
            max_waiters_per_identity: 50_000,
            rate_per_second: 0,
            burst: 0,
            max_calls_per_connection: 16_384,
            max_acquisitions_in_flight: 128,
            max_queued_acquisitions: 20_000,
            max_connections: 10_000,
            max_connections_per_peer: 1_000,
            max_unauthenticated_calls: 1_024,
        }
    }
}

/// The `[session]` section: how `Hold` keeps a lock alive.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// Fraction of the ttl after which the daemon extends a session's lock.
    /// A third leaves two thirds of the lease for retries when a master is
    /// slow before the lock could lapse.
    pub extend_at: f64,
    /// How long a `Hold` stream may stay silent before its first message
    /// (`acquire`); then it ends with INVALID_ARGUMENT. A stream holds no
    /// session slot until that message, but it does hold a call slot of
    /// its connection: without a bound, silent streams could pile up.
    #[serde(with = "humantime_serde")]
    pub first_message_timeout: Duration,
    /// Shortest ttl a `Hold` session may ask for (Acquire still accepts
    /// down to `redlock.min_ttl`). A session is extended every
    /// `ttl * extend_at` for as long as it lives, from one admitted call:
    /// this floor bounds the master operations one session can cause, at
    /// most `masters / (min_ttl * extend_at)` per second (5 masters,
    /// 250 ms, 1/3: 60 per second), where a 10 ms ttl made it 1,500.
    #[serde(with = "humantime_serde")]
    pub min_ttl: Duration,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            extend_at: 1.0 / 3.0,
            first_message_timeout: Duration::from_secs(10),
            min_ttl: Duration::from_millis(250),
        }
    }
}

/// Shortest accepted `session.min_ttl`.
const SESSION_MIN_TTL_MIN: Duration = Duration::from_millis(10);
/// Longest accepted `session.min_ttl`.
const SESSION_MIN_TTL_MAX: Duration = Duration::from_secs(60);

/// Shortest accepted `session.first_message_timeout`.
const FIRST_MESSAGE_MIN: Duration = Duration::from_millis(10);
/// Longest accepted `session.first_message_timeout`.
const FIRST_MESSAGE_MAX: Duration = Duration::from_secs(600);

impl LimitsConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            (
                "limits.max_waiters_per_resource",
                self.max_waiters_per_resource,
            ),
            ("limits.max_waiters", self.max_waiters),
            ("limits.max_sessions", self.max_sessions),
            (
                "limits.max_sessions_per_identity",
                self.max_sessions_per_identity,
            ),
            (
                "limits.max_waiters_per_identity",
                self.max_waiters_per_identity,
            ),
            (
                "limits.max_acquisitions_in_flight",
                self.max_acquisitions_in_flight,
            ),
            (
                "limits.max_queued_acquisitions",
                self.max_queued_acquisitions,
            ),
            ("limits.max_connections", self.max_connections),
            (
                "limits.max_connections_per_peer",
                self.max_connections_per_peer,
            ),
            (
                "limits.max_unauthenticated_calls",
                self.max_unauthenticated_calls,
            ),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        if self.rate_per_second > 0 && self.burst == 0 {
            return Err(invalid(
                "limits.burst",
                "must be at least 1 when limits.rate_per_second is set: no call could pass",
            ));
        }
        Ok(())
    }
}

impl SessionConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !(0.05..=0.8).contains(&self.extend_at) {
            return Err(invalid(
                "session.extend_at",
                format!(
                    "{} is outside [0.05, 0.8]: extending too early wastes master round trips, \
                     too late leaves no time to retry before the lock lapses",
                    self.extend_at
                ),
            ));
        }
        if !(SESSION_MIN_TTL_MIN..=SESSION_MIN_TTL_MAX).contains(&self.min_ttl) {
            return Err(invalid(
                "session.min_ttl",
                format!(
                    "{} is outside [{}, {}]",
                    humantime::format_duration(self.min_ttl),
                    humantime::format_duration(SESSION_MIN_TTL_MIN),
                    humantime::format_duration(SESSION_MIN_TTL_MAX)
                ),
            ));
        }
        let bound = self.first_message_timeout;
        if !(FIRST_MESSAGE_MIN..=FIRST_MESSAGE_MAX).contains(&bound) {
            return Err(invalid(
                "session.first_message_timeout",
                format!(
                    "{} is outside [{}, {}]: shorter cuts off slow clients, longer lets silent \
                     streams pile up",
                    humantime::format_duration(bound),
                    humantime::format_duration(FIRST_MESSAGE_MIN),
                    humantime::format_duration(FIRST_MESSAGE_MAX)
                ),
            ));
        }
        Ok(())
    }
}
