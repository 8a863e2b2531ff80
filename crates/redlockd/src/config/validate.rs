//! The rules a loaded [`Config`] must pass before the daemon serves, and the
//! hard limits they enforce. Kept apart from loading so the rules can be read
//! (and audited) in one place; each error names the offending key.

use std::time::Duration;

use super::nodes::parse_node;
use super::redact::redact_url;
use super::{Config, ConfigError, RedlockConfig, ServerConfig};

/// Largest accepted `redlock.node_timeout`. A master slower than this is as
/// good as down; waiting longer only delays every call.
pub(crate) const NODE_TIMEOUT_LIMIT: Duration = Duration::from_secs(10);

/// Upper bound (exclusive) of `redlock.drift_factor`. At 0.5 the drift
/// allowance alone would eat half of every lease.
pub(crate) const DRIFT_FACTOR_LIMIT: f64 = 0.5;

/// Largest accepted `redlock.max_ttl`. A crashed client can block a resource
/// for up to one lease; a day is already a very long outage.
pub(crate) const MAX_TTL_LIMIT: Duration = Duration::from_secs(24 * 60 * 60);

/// Largest accepted `redlock.max_semaphore_limit`: a master checks up to
/// this many permit keys in one command (`crate::valkey::scripts`).
const MAX_SEMAPHORE_LIMIT: u32 = 1024;

/// Largest accepted `redlock.max_resources_per_lock`: every key of a
/// lock goes to each master in one script call, and its token names them
/// all (`crate::redlock::kinds::multi`).
const MAX_RESOURCES_PER_LOCK_LIMIT: usize = 64;

/// Largest accepted `redlock.max_resource_len`, in bytes.
pub(crate) const MAX_RESOURCE_LEN_LIMIT: usize = 65_536;

/// Largest accepted `server.shutdown_grace`: a stop must not hang for long
/// behind a stuck client.
pub(crate) const SHUTDOWN_GRACE_LIMIT: Duration = Duration::from_secs(10 * 60);

pub(super) fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

fn human(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

/// A configuration that passed every rule of [`Config::validate`]: what
/// [`crate::run`] takes, so that an unchecked configuration cannot reach
/// the server. Read it through `Deref`; to change it, take the `Config` back
/// out ([`ValidConfig::into_inner`]) and validate again.
#[derive(Debug, Clone)]
pub struct ValidConfig(Config);

impl std::ops::Deref for ValidConfig {
    type Target = Config;

    fn deref(&self) -> &Config {
        &self.0
    }
}

impl ValidConfig {
    /// The configuration, to change and validate again.
    pub fn into_inner(self) -> Config {
        self.0
    }
}

impl Config {
    /// Checks every rule and, when all hold, seals the configuration as a
    /// [`ValidConfig`]; otherwise the first broken rule, naming the key.
    pub fn validated(self) -> Result<ValidConfig, ConfigError> {
        self.validate()?;
        Ok(ValidConfig(self))
    }

    /// Checks every rule and returns the first broken one; the error names
    /// the key. Called by [`load`](Self::load); call it again after changing
    /// a `Config` by hand.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.redlock.validate()?;
        self.limits.validate()?;
        self.auth.validate(&self.server.tls)?;
        self.masters.validate()?;
        if self.server.max_request_bytes < self.redlock.max_resource_len + 1024 {
            return Err(invalid(
                "server.max_request_bytes",
                format!(
                    "{} leaves no room for a resource name of redlock.max_resource_len ({}) \
                     plus 1024 bytes for the other fields",
                    self.server.max_request_bytes, self.redlock.max_resource_len
                ),
            ));
        }
        self.session.validate()?;
        super::elections::validate(
            &self.elections,
            self.redlock.max_resource_len,
            (self.session.min_ttl, self.redlock.max_ttl),
        )
    }
}

/// Largest accepted `server.max_request_bytes`.
pub(crate) const MAX_REQUEST_BYTES_LIMIT: usize = 4 * 1024 * 1024;

/// Longest `server.deadline_reserve`: more would refuse every call with a
/// short deadline without trying.
pub(super) const DEADLINE_RESERVE_MAX: Duration = Duration::from_secs(1);

/// Most `server.worker_threads`.
const WORKER_THREADS_MAX: usize = 1024;

/// Shortest `server.keepalive_interval` / `keepalive_timeout`.
pub(crate) const KEEPALIVE_MIN: Duration = Duration::from_millis(100);
/// Longest `server.keepalive_interval` / `keepalive_timeout`.
pub(crate) const KEEPALIVE_MAX: Duration = Duration::from_secs(600);

/// Shortest `server.tls_handshake_timeout` / `idle_timeout`.
const CONNECTION_TIMEOUT_MIN: Duration = Duration::from_millis(100);
/// Longest `server.tls_handshake_timeout` / `idle_timeout`.
const CONNECTION_TIMEOUT_MAX: Duration = Duration::from_secs(3600);

impl ServerConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.tls.validate()?;
        if self.max_request_bytes > MAX_REQUEST_BYTES_LIMIT {
            return Err(invalid(
                "server.max_request_bytes",
                format!(
                    "{} is over the limit of {MAX_REQUEST_BYTES_LIMIT}: no valid request is \
                     that large",
                    self.max_request_bytes
                ),
            ));
        }
        for (key, value) in [
            ("server.keepalive_interval", self.keepalive_interval),
            ("server.keepalive_timeout", self.keepalive_timeout),
        ] {
            if value < KEEPALIVE_MIN || value > KEEPALIVE_MAX {
                return Err(invalid(
                    key,
                    format!(
                        "{} is outside [{}, {}]: shorter floods clients with pings, longer \
                         lets a frozen client keep its locks",
                        human(value),
                        human(KEEPALIVE_MIN),
                        human(KEEPALIVE_MAX)
                    ),
                ));
            }
        }
        for (key, value) in [
            ("server.tls_handshake_timeout", self.tls_handshake_timeout),
            ("server.idle_timeout", self.idle_timeout),
        ] {
            if !(CONNECTION_TIMEOUT_MIN..=CONNECTION_TIMEOUT_MAX).contains(&value) {
                return Err(invalid(
                    key,
                    format!(
                        "{} is outside [{}, {}]: shorter cuts off slow clients, longer lets \
                         idle connections pile up",
                        human(value),
                        human(CONNECTION_TIMEOUT_MIN),
                        human(CONNECTION_TIMEOUT_MAX)
                    ),
                ));
            }
        }
        if self.worker_threads > WORKER_THREADS_MAX {
            return Err(invalid(
                "server.worker_threads",
                format!("{} is over {WORKER_THREADS_MAX}", self.worker_threads),
            ));
        }
        if self.deadline_reserve > DEADLINE_RESERVE_MAX {
            return Err(invalid(
                "server.deadline_reserve",
                format!(
                    "{} is over {}: calls with a short deadline would be refused untried",
                    human(self.deadline_reserve),
                    human(DEADLINE_RESERVE_MAX)
                ),
            ));
        }
        if self.shutdown_grace > SHUTDOWN_GRACE_LIMIT {
            return Err(invalid(
                "server.shutdown_grace",
                format!(
                    "{} is longer than the limit of {}: a stop must not hang behind stuck calls",
                    human(self.shutdown_grace),
                    human(SHUTDOWN_GRACE_LIMIT)
                ),
            ));
        }
        Ok(())
    }
}

impl RedlockConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.validate_nodes()?;
        if let Some(c) = self
            .key_prefix
            .chars()
            .find(|c| c.is_whitespace() || c.is_control())
        {
            return Err(invalid(
                "redlock.key_prefix",
                format!(
                    "contains {c:?}: whitespace and control characters are not allowed in key names"
                ),
            ));
        }
        if self.node_timeout.is_zero() || self.node_timeout > NODE_TIMEOUT_LIMIT {
            return Err(invalid(
                "redlock.node_timeout",
                format!(
                    "{} is not in (0, {}]: it must be positive, and a master slower than {} \
                     is as good as down",
                    human(self.node_timeout),
                    human(NODE_TIMEOUT_LIMIT),
                    human(NODE_TIMEOUT_LIMIT)
                ),
            ));
        }
        check_drift_factor(self.drift_factor)?;
        if self.min_ttl.is_zero() {
            return Err(invalid(
                "redlock.min_ttl",
                "must be greater than 0: a zero lease expires as it is granted",
            ));
        }
        if self.min_ttl > self.max_ttl {
            return Err(invalid(
                "redlock.min_ttl",
                format!(
                    "{} is greater than redlock.max_ttl ({}): no ttl would be accepted",
                    human(self.min_ttl),
                    human(self.max_ttl)
                ),
            ));
        }
        if self.max_ttl > MAX_TTL_LIMIT {
            return Err(invalid(
                "redlock.max_ttl",
                format!(
                    "{} is longer than the limit of {}: a crashed client would block a \
                     resource that long",
                    human(self.max_ttl),
                    human(MAX_TTL_LIMIT)
                ),
            ));
        }
        if !(1..=MAX_SEMAPHORE_LIMIT).contains(&self.max_semaphore_limit) {
            return Err(invalid(
                "redlock.max_semaphore_limit",
                format!(
                    "{} is not in 1..={MAX_SEMAPHORE_LIMIT}",
                    self.max_semaphore_limit
                ),
            ));
        }
        if !(1..=MAX_RESOURCE_LEN_LIMIT).contains(&self.max_resource_len) {
            return Err(invalid(
                "redlock.max_resource_len",
                format!(
                    "{} is not in 1..={MAX_RESOURCE_LEN_LIMIT} bytes",
                    self.max_resource_len
                ),
            ));
        }
        if !(1..=MAX_RESOURCES_PER_LOCK_LIMIT).contains(&self.max_resources_per_lock) {
            return Err(invalid(
                "redlock.max_resources_per_lock",
                format!(
                    "{} is not in 1..={MAX_RESOURCES_PER_LOCK_LIMIT}",
                    self.max_resources_per_lock
                ),
            ));
        }
        if self.retry_delay_max.is_zero() {
            return Err(invalid(
                "redlock.retry_delay_max",
                "must be greater than 0: retries without a pause hammer the masters and keep \
                 competing clients in lock-step",
            ));
        }
        if self.retry_delay_min > self.retry_delay_max {
            return Err(invalid(
                "redlock.retry_delay_min",
                format!(
                    "{} is greater than redlock.retry_delay_max ({})",
                    human(self.retry_delay_min),
                    human(self.retry_delay_max)
                ),
            ));
        }
        if self.wait_fallback < self.retry_delay_max || self.wait_fallback > MAX_TTL_LIMIT {
            return Err(invalid(
                "redlock.wait_fallback",
                format!(
                    "{} is outside [redlock.retry_delay_max ({}), 24h]",
                    human(self.wait_fallback),
                    human(self.retry_delay_max)
                ),
            ));
        }
        if self.max_clock_offset.is_zero() || self.max_clock_offset >= self.max_ttl {
            return Err(invalid(
                "redlock.max_clock_offset",
                format!(
                    "{} is outside (0, redlock.max_ttl ({})): a master whose clock is off by \
                     max_ttl can hand out fences that later grants cannot exceed",
                    human(self.max_clock_offset),
                    human(self.max_ttl)
                ),
            ));
        }
        if self.fence_ttl <= self.max_ttl {
            return Err(invalid(
                "redlock.fence_ttl",
                format!(
                    "{} is not greater than redlock.max_ttl ({}): the fencing counter must \
                     outlive any lock, or it restarts and hands out a token lower than one \
                     still in use",
                    human(self.fence_ttl),
                    human(self.max_ttl)
                ),
            ));
        }
        let outlived = self.fence_outlives();
        if self.fence_ttl <= outlived {
            return Err(invalid(
                "redlock.fence_ttl",
                format!(
                    "{} is not greater than max(redlock.max_ttl, redlock.max_hold_at_least) + \
                     redlock.max_lock_delay ({}): the fence hash keeps the time a lock-delay \
                     or a hold-at-least ends, and must outlive it",
                    human(self.fence_ttl),
                    human(outlived)
                ),
            ));
        }
        Ok(())
    }

    fn validate_nodes(&self) -> Result<(), ConfigError> {
        const KEY: &str = "redlock.nodes";
        if self.nodes.is_empty() {
            return Err(invalid(KEY, "at least one master is required"));
        }
        let mut seen: Vec<(String, u16, &str)> = Vec::with_capacity(self.nodes.len());
        for url in &self.nodes {
            let node = parse_node(url).map_err(|why| {
                invalid(
                    KEY,
                    format!("{:?} is not a valid master URL: {why}", redact_url(url)),
                )
            })?;
            if let Some((_, _, first)) = seen
                .iter()
                .find(|(host, port, _)| *host == node.host && *port == node.port)
            {
                return Err(invalid(
                    KEY,
                    format!(
                        "{:?} and {:?} are the same master ({}:{}): it would be counted twice \
                         toward the quorum, so a lock could be granted without a real majority",
                        redact_url(first),
                        redact_url(url),
                        node.host,
                        node.port
                    ),
                ));
            }
            seen.push((node.host, node.port, url));
        }
        Ok(())
    }
}

/// The drift rule on its own, so it can be tested exhaustively.
pub(super) fn check_drift_factor(drift: f64) -> Result<(), ConfigError> {
    if drift.is_finite() && (0.0..DRIFT_FACTOR_LIMIT).contains(&drift) {
        Ok(())
    } else {
        Err(invalid(
            "redlock.drift_factor",
            format!("{drift} is not a finite number in [0, {DRIFT_FACTOR_LIMIT})"),
        ))
    }
}
