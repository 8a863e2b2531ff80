//! The daemon's configuration: what it is, where it comes from, and which
//! values are refused before the daemon serves a single request.
//!
//! # Load order
//!
//! [`Config::load`] builds one [`Config`] from three layers; a later layer
//! overrides an earlier one key by key:
//!
//! 1. **Built-in defaults** ([`Config::default`]). Every struct is
//!    `#[serde(default)]`, so any key that no later layer sets keeps its
//!    default and a partial file is enough.
//! 2. **The TOML file** given on the command line (optional; when a path is
//!    given the file must exist). Durations are humantime strings such as
//!    `"50ms"`, `"30s"` or `"1h"`.
//! 3. **Environment variables** `REDLOCKD__<SECTION>__<KEY>`, for example
//!    `REDLOCKD__SERVER__LISTEN=0.0.0.0:50051` or
//!    `REDLOCKD__REDLOCK__NODE_TIMEOUT=80ms`. Names are case-insensitive.
//!    `REDLOCKD__REDLOCK__NODES` takes one URL or a comma-separated list.
//!    Variables that do not start with `REDLOCKD__` are ignored.
//!
//! Then [`Config::validate`] checks every rule. A misspelt key, in the file
//! or in the environment, is an error rather than being silently ignored:
//! a typo in a safety setting must not fall back to a default unnoticed.
//!
//! Node URLs may carry passwords. Nothing in this module prints one: errors,
//! warnings and the `Debug` output pass URLs through [`redact_url`].

mod elections;
mod http;
mod limits;
mod load;
mod nodes;
mod quarantine;
mod redact;
mod security;
mod telemetry;
mod testing;
#[cfg(test)]
mod tests;
mod validate;
mod warnings;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;

pub use elections::ElectionConfig;
pub use http::HttpConfig;
pub use limits::{LimitsConfig, SessionConfig};
use nodes::deserialize_nodes;
pub use quarantine::RestartQuarantine;
pub(crate) use redact::redact_url;
pub use security::{AuthConfig, ClientConfig, MastersConfig, TlsConfig};
pub use telemetry::{LogConfig, LogFormat, MetricsConfig};
pub use testing::{Counterfactuals, TestingConfig};
pub use validate::ValidConfig;

/// Prefix of the environment variables read by [`Config::load`]; together
/// with [`ENV_SEPARATOR`] it keeps unrelated variables (`REDLOCKD_LOG`,
/// `PATH`, ...) out of the configuration.
pub(crate) const ENV_PREFIX: &str = "REDLOCKD";

/// Separator after [`ENV_PREFIX`] and between section and key, e.g.
/// `REDLOCKD__REDLOCK__NODE_TIMEOUT`. Two underscores, because single
/// underscores occur inside key names.
pub(crate) const ENV_SEPARATOR: &str = "__";

/// The daemon's whole configuration, loaded and validated once at start-up.
///
/// `Debug` output redacts passwords in node URLs, so the whole value can be
/// logged.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How the gRPC server listens and stops.
    pub server: ServerConfig,
    /// Which masters hold the locks and the limits on what clients may ask.
    pub redlock: RedlockConfig,
    /// Caps on waiters and sessions.
    pub limits: LimitsConfig,
    /// How `Hold` sessions keep their locks.
    pub session: SessionConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// Log output.
    pub log: LogConfig,
    /// Client identities and their namespaces (off by default).
    pub auth: AuthConfig,
    /// Credentials and TLS trust for the connections to the masters.
    pub masters: MastersConfig,
    /// The HTTP/JSON gateway (off by default).
    pub http: HttpConfig,
    /// Switches for the safety checkers only (see [`TestingConfig`]).
    pub testing: TestingConfig,
    /// `[[election]]`: elections the daemon campaigns in on behalf of its
    /// pod (none by default; see [`ElectionConfig`]).
    #[serde(rename = "election")]
    pub elections: Vec<ElectionConfig>,
}

/// The `[server]` section: the gRPC endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address the gRPC server binds to. The default is loopback only, so a
    /// daemon started without a config is not reachable from the network.
    pub listen: SocketAddr,
    /// How long a stop (SIGTERM/SIGINT) drains: open `Hold` sessions keep
    /// their locks (extended) until their clients release them or this runs
    /// out, since an application stopped by the same SIGTERM may still be in
    /// its critical section. Then what is left is no longer extended (its
    /// sessions are told `lost`; the locks expire with their ttl) and the
    /// daemon exits. The default, 20 s, fits Kubernetes' 30 s termination grace
    /// with room for the release and the exit.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// Largest gRPC message accepted, in bytes (encoded). A bigger one is
    /// refused before it is decoded, so one request cannot make the daemon
    /// buffer megabytes. Must leave room for `redlock.max_resource_len`.
    pub max_request_bytes: usize,
    /// TLS on the gRPC port (`[server.tls]`); off by default.
    pub tls: TlsConfig,
    /// How often the daemon sends an HTTP/2 PING on an idle connection (and
    /// the TCP keepalive idle time). A client process that is frozen
    /// (SIGSTOP, a stop-the-world pause, a suspended VM) or whose host or
    /// network is gone stops answering; its `Hold` sessions' locks are then
    /// no longer extended, and pass on once the validity it was last told
    /// runs out, instead of being extended forever.
    #[serde(with = "humantime_serde")]
    pub keepalive_interval: Duration,
    /// How long a PING may go unanswered before the connection is closed
    /// (and with it every session on it). A session's lock is extended only
    /// while its client was heard from within this (or within
    /// `keepalive_interval` plus half of it, if longer), so a frozen
    /// client's locks pass on at most their ttl plus that after it stopped
    /// answering, once the validity it was last told has run out.
    #[serde(with = "humantime_serde")]
    pub keepalive_timeout: Duration,
    /// How long before a caller's gRPC deadline the daemon stops accepting a
    /// grant for it. The daemon sees the deadline later than the caller by
    /// the request's travel time; a grant answered after the caller gave up
    /// would stay locked, owned by nobody, for its whole ttl. A grant that
    /// completes inside the reserve is released and the caller told
    /// DEADLINE_EXCEEDED. Cover the round trip between clients and the
    /// daemon: the request's travel makes the daemon see the deadline late,
    /// and the answer's travel makes the grant arrive late (a one-way
    /// reserve left grants orphaned for their whole ttl in `chaos
    /// --interleaving slow-link`). A deadline shorter than four reserves
    /// keeps three quarters of itself instead of being refused untried.
    #[serde(with = "humantime_serde")]
    pub deadline_reserve: Duration,
    /// How long a client may take to complete the TLS handshake after its
    /// TCP connection was accepted; then the connection is closed. Without
    /// it, connections that never finish the handshake pile up.
    #[serde(with = "humantime_serde")]
    pub tls_handshake_timeout: Duration,
    /// A client connection with no call or stream open for this long is
    /// closed: a TCP connection that never sent anything, a half-sent
    /// HTTP/2 preface, or a channel nobody uses. gRPC clients reconnect on
    /// their next call.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Threads the daemon serves on: 0 (the default) is one per core the
    /// process may use (a container's CPU quota counts), 1 is a
    /// single-threaded runtime, which costs less CPU per call on a host
    /// whose cores the masters or the applications share (see
    /// `crate::runtime`).
    pub worker_threads: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 50051),
            shutdown_grace: Duration::from_secs(20),
            max_request_bytes: 64 * 1024,
            tls: TlsConfig::default(),
            keepalive_interval: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(2),
            deadline_reserve: Duration::from_millis(20),
            tls_handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(300),
            worker_threads: 0,
        }
    }
}

/// The `[redlock]` section: the masters and the limits of the algorithm.
///
/// `Debug` is written by hand so that passwords in [`nodes`](Self::nodes)
/// are redacted.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedlockConfig {
    /// URLs (`redis://` or `rediss://`) of the independent masters. A lock is
    /// held only when a majority (`N/2 + 1`) of them granted it, so these
    /// must be separate servers: not replicas of one another, and without
    /// failover, since a promoted replica may not have the lock key yet.
    /// Five is the recommended count. In the environment: one URL or a
    /// comma-separated list (percent-encode a comma in a password as `%2C`).
    #[serde(deserialize_with = "deserialize_nodes")]
    pub nodes: Vec<String>,
    /// Prepended to every key the daemon writes, so lock keys cannot clash
    /// with other data on the same masters. Every daemon sharing the masters
    /// must use the same prefix, or they will not see each other's locks.
    pub key_prefix: String,
    /// Longest wait for one master to answer one command. One slow or
    /// unreachable master must never slow a call beyond this: the call goes
    /// on with the other masters' answers.
    #[serde(with = "humantime_serde")]
    pub node_timeout: Duration,
    /// Allowance for clock *rate* differences between the masters and this
    /// host, as a fraction of the TTL. It is one part of the lock's validity
    /// time: `validity = ttl - elapsed - (ttl * drift_factor + 2ms)`. With a
    /// larger value clients stop trusting a lock sooner; 0 trusts clocks
    /// completely.
    pub drift_factor: f64,
    /// Shortest lease a client may ask for. Below it the round-trips to the
    /// masters plus the drift allowance would use up the whole lease and the
    /// lock would be born expired.
    #[serde(with = "humantime_serde")]
    pub min_ttl: Duration,
    /// Longest lease a client may ask for. It bounds how long a crashed
    /// client that never releases can block a resource.
    #[serde(with = "humantime_serde")]
    pub max_ttl: Duration,
    /// Longest a client may ask one acquire to keep retrying while the
    /// resource is held, so one call cannot tie up the server indefinitely.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Longest `AcquireRequest.lock_delay` accepted: how long at most a
    /// holder that vanished keeps its resource from everyone after its
    /// lock expired.
    #[serde(with = "humantime_serde")]
    pub max_lock_delay: Duration,
    /// Longest `AcquireRequest.hold_at_least` accepted: how long at most an
    /// early Release leaves the lock standing.
    #[serde(with = "humantime_serde")]
    pub max_hold_at_least: Duration,
    /// Longest resource name accepted, in bytes. It bounds the size of keys
    /// written to the masters and the memory one request can use.
    pub max_resource_len: usize,
    /// Largest `AcquireRequest.limit` accepted (a semaphore's permits, issue
    /// 19): a failed attempt tries every permit, one round each, so the
    /// limit bounds the work of one attempt.
    pub max_semaphore_limit: u32,
    /// Most resources one lock may take at once
    /// (`AcquireRequest.resources`): bounds the keys one acquisition
    /// writes per master (all in one script call) and the size of the
    /// lock's token, which names them (`redlock::kinds::multi`).
    pub max_resources_per_lock: usize,
    /// Shortest pause between two acquire attempts. Pauses are drawn at
    /// random in `[retry_delay_min, retry_delay_max]`, so that clients which
    /// split the votes between them do not collide again in lock-step.
    #[serde(with = "humantime_serde")]
    pub retry_delay_min: Duration,
    /// Longest pause between two acquire attempts (see `retry_delay_min`).
    #[serde(with = "humantime_serde")]
    pub retry_delay_max: Duration,
    /// Expiry of the per-resource fence hash on each master, renewed by
    /// every grant and every extension. Fencing tokens must only ever grow.
    /// Once the hash has expired, the next grant's fence has only its floor
    /// left, the granting masters' wall clock in microseconds (see
    /// `redlock::fence`). If it expired while a lock was held, or while a
    /// lock's last holder could still be writing, that floor can be lower
    /// than the fence in use (one the counter had raised above the clock, or
    /// taken from a master whose clock runs ahead), so a stale writer's
    /// token would no longer be rejected by the storage. Hence it must be
    /// greater than `max_ttl`, and in practice much greater.
    #[serde(with = "humantime_serde")]
    pub fence_ttl: Duration,
    /// Wake waiters when the holder releases (release notices over the
    /// masters' pub/sub) and at the holder's expiry, serving them first come
    /// first served. Off: plain Redlock polling with jittered retries (kept
    /// for comparison in benchmarks).
    pub wake_on_release: bool,
    /// Longest a waiter at the front of the queue sleeps without a notice
    /// before trying again anyway: covers notices lost with a master
    /// connection.
    #[serde(with = "humantime_serde")]
    pub wait_fallback: Duration,
    /// Restart quarantine: a master that restarted (low `uptime_in_seconds`,
    /// a new `run_id`, or a clock jump) may have lost its keys, so its votes
    /// do not count toward a quorum until no lock it may have lost can still
    /// be valid. `"horizon"` (default): as long as the longest lock the other
    /// masters (and this daemon) know of still runs, plus drift; nothing
    /// when nothing was ever locked. `"max_ttl"`: `max_ttl` plus drift from
    /// the restart, always. `"off"`: only for masters that persist every
    /// write (`appendfsync always`). The old `true` / `false` still parse
    /// (`true` is `"horizon"`). See [`RestartQuarantine`].
    #[serde(rename = "restart_quarantine")]
    pub quarantine: RestartQuarantine,
    /// Largest accepted offset between a master's wall clock (`TIME`) and
    /// this host's, checked at each connection and every few seconds. A
    /// master possibly beyond it (offset plus half the round trip) is not
    /// trusted until it is back within: its clock feeds the fences' floor,
    /// and a master far ahead would hand out fences that grants after a
    /// loss of the fence hashes could not exceed. See
    /// `crate::valkey::offset` for the choice of the default (1 s).
    #[serde(with = "humantime_serde")]
    pub max_clock_offset: Duration,
}

impl RedlockConfig {
    /// What a fence hash must outlive after a grant: the longest lock or
    /// hold-at-least, then its lock-delay (the hash keeps when both end).
    pub(crate) fn fence_outlives(&self) -> Duration {
        self.max_ttl.max(self.max_hold_at_least) + self.max_lock_delay
    }
}

impl Default for RedlockConfig {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            key_prefix: "redlock:".to_owned(),
            node_timeout: Duration::from_millis(50),
            drift_factor: 0.01,
            min_ttl: Duration::from_millis(10),
            max_ttl: Duration::from_secs(60 * 60),
            max_wait: Duration::from_secs(5 * 60),
            max_lock_delay: Duration::from_secs(60),
            max_hold_at_least: Duration::from_secs(60 * 60),
            max_resource_len: 512,
            max_semaphore_limit: 64,
            max_resources_per_lock: 16,
            retry_delay_min: Duration::from_millis(5),
            retry_delay_max: Duration::from_millis(50),
            fence_ttl: Duration::from_secs(168 * 60 * 60),
            wake_on_release: true,
            wait_fallback: Duration::from_secs(1),
            quarantine: RestartQuarantine::default(),
            max_clock_offset: Duration::from_secs(1),
        }
    }
}

impl fmt::Debug for RedlockConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self.nodes.iter().map(|n| redact_url(n)).collect();
        f.debug_struct("RedlockConfig")
            .field("nodes", &nodes)
            .field("key_prefix", &self.key_prefix)
            .field("node_timeout", &self.node_timeout)
            .field("drift_factor", &self.drift_factor)
            .field("min_ttl", &self.min_ttl)
            .field("max_ttl", &self.max_ttl)
            .field("max_wait", &self.max_wait)
            .field("max_lock_delay", &self.max_lock_delay)
            .field("max_hold_at_least", &self.max_hold_at_least)
            .field("max_resource_len", &self.max_resource_len)
            .field("max_semaphore_limit", &self.max_semaphore_limit)
            .field("max_resources_per_lock", &self.max_resources_per_lock)
            .field("retry_delay_min", &self.retry_delay_min)
            .field("retry_delay_max", &self.retry_delay_max)
            .field("fence_ttl", &self.fence_ttl)
            .field("max_clock_offset", &self.max_clock_offset)
            .field("wake_on_release", &self.wake_on_release)
            .field("wait_fallback", &self.wait_fallback)
            .field("restart_quarantine", &self.quarantine)
            .finish()
    }
}

/// Why the configuration was refused. The daemon does not start on either.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file or the environment could not be read or did not parse: a
    /// missing file, bad TOML, an unknown key, a value of the wrong type. The
    /// message comes from the `config` crate and names the key when it knows
    /// it; any password in a URL in it is redacted.
    #[error("could not load configuration: {0}")]
    Load(String),
    /// A value parsed but breaks a rule.
    #[error("invalid configuration: {key}: {reason}")]
    Invalid {
        /// Dotted path of the offending key, e.g. `"redlock.node_timeout"`.
        key: &'static str,
        /// What is wrong and why it matters.
        reason: String,
    },
}
