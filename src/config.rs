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

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// Prefix of the environment variables read by [`Config::load`]; together
/// with [`ENV_SEPARATOR`] it keeps unrelated variables (`REDLOCKD_LOG`,
/// `PATH`, ...) out of the configuration.
pub const ENV_PREFIX: &str = "REDLOCKD";

/// Separator after [`ENV_PREFIX`] and between section and key, e.g.
/// `REDLOCKD__REDLOCK__NODE_TIMEOUT`. Two underscores, because single
/// underscores occur inside key names.
pub const ENV_SEPARATOR: &str = "__";

/// Largest accepted `redlock.node_timeout`. A master slower than this is as
/// good as down; waiting longer only delays every call.
pub const NODE_TIMEOUT_LIMIT: Duration = Duration::from_secs(10);

/// Upper bound (exclusive) of `redlock.drift_factor`. At 0.5 the drift
/// allowance alone would eat half of every lease.
pub const DRIFT_FACTOR_LIMIT: f64 = 0.5;

/// Largest accepted `redlock.max_ttl`. A crashed client can block a resource
/// for up to one lease; a day is already a very long outage.
pub const MAX_TTL_LIMIT: Duration = Duration::from_secs(24 * 60 * 60);

/// Largest accepted `redlock.max_resource_len`, in bytes.
pub const MAX_RESOURCE_LEN_LIMIT: usize = 65_536;

/// Largest accepted `server.shutdown_grace`: a stop must not hang for long
/// behind a stuck client.
pub const SHUTDOWN_GRACE_LIMIT: Duration = Duration::from_secs(10 * 60);

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
}

/// The `[server]` section: the gRPC endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address the gRPC server binds to. The default is loopback only, so a
    /// daemon started without a config is not reachable from the network.
    pub listen: SocketAddr,
    /// How long a stop (SIGTERM/SIGINT) waits for in-flight calls to finish
    /// before they are cut off; lets running acquires and releases complete
    /// instead of leaving half-written keys that then only expire by TTL.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 50051),
            shutdown_grace: Duration::from_secs(10),
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
    /// Longest resource name accepted, in bytes. It bounds the size of keys
    /// written to the masters and the memory one request can use.
    pub max_resource_len: usize,
    /// Shortest pause between two acquire attempts. Pauses are drawn at
    /// random in `[retry_delay_min, retry_delay_max]`, so that clients which
    /// split the votes between them do not collide again in lock-step.
    #[serde(with = "humantime_serde")]
    pub retry_delay_min: Duration,
    /// Longest pause between two acquire attempts (see `retry_delay_min`).
    #[serde(with = "humantime_serde")]
    pub retry_delay_max: Duration,
    /// Expiry of the per-resource fencing counter key, renewed on every
    /// acquire. Fencing tokens must only ever grow. If the counter expired
    /// while a lock was held, or before a lock's last holder could still be
    /// writing, the next acquire would restart it at 1 and hand out a token
    /// lower than one already in use, so a stale writer's token would no
    /// longer be rejected by the storage. Hence it must be greater than
    /// `max_ttl`, and in practice much greater.
    #[serde(with = "humantime_serde")]
    pub fence_ttl: Duration,
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
            max_resource_len: 512,
            retry_delay_min: Duration::from_millis(5),
            retry_delay_max: Duration::from_millis(50),
            fence_ttl: Duration::from_secs(168 * 60 * 60),
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
            .field("max_resource_len", &self.max_resource_len)
            .field("retry_delay_min", &self.retry_delay_min)
            .field("retry_delay_max", &self.retry_delay_max)
            .field("fence_ttl", &self.fence_ttl)
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

fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

fn human(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

impl Config {
    /// Built-in defaults, then the TOML file at `path` (if given; it must
    /// exist), then environment variables `REDLOCKD__<SECTION>__<KEY>` from
    /// the real process environment; then [`validate`](Self::validate).
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let config = Self::read(path)?;
        config.validate()?;
        Ok(config)
    }

    /// Like [`load`](Self::load) but without [`validate`](Self::validate),
    /// for callers that fill in part of the configuration themselves first
    /// (`redlockd --dev` supplies the masters it starts).
    pub fn read(path: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_from(path, None)
    }

    /// Same as [`load`](Self::load), but with the environment given
    /// explicitly, so tests need not change the process environment.
    pub fn load_with_env(
        path: Option<&Path>,
        env: HashMap<String, String>,
    ) -> Result<Config, ConfigError> {
        let config = Self::load_from(path, Some(env.into_iter().collect()))?;
        config.validate()?;
        Ok(config)
    }

    fn load_from(
        path: Option<&Path>,
        env: Option<config::Map<String, String>>,
    ) -> Result<Config, ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(path) = path {
            builder = builder.add_source(
                config::File::from(path)
                    .format(config::FileFormat::Toml)
                    .required(true),
            );
        }
        // No `try_parsing`: it would turn a string such as a key prefix of
        // "007" into the integer 7 (and "1.50" into "1.5"). Numbers parse
        // from strings anyway when the target field is numeric, and the
        // comma-separated `nodes` list is split by `deserialize_nodes`.
        builder = builder.add_source(
            config::Environment::with_prefix(ENV_PREFIX)
                .prefix_separator(ENV_SEPARATOR)
                .separator(ENV_SEPARATOR)
                .source(env),
        );
        let loaded: Config = builder
            .build()
            .and_then(config::Config::try_deserialize)
            .map_err(|e| ConfigError::Load(redact_text(&e.to_string())))?;
        Ok(loaded)
    }

    /// Checks every rule and returns the first broken one; the error names
    /// the key. Called by [`load`](Self::load); call it again after changing
    /// a `Config` by hand.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.redlock.validate()
    }

    /// Non-fatal advice to log at start-up: a setup that works but is weaker
    /// than it looks (too few masters, an even count, no drift allowance, a
    /// password sent in clear).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let r = &self.redlock;
        let n = r.nodes.len();
        if (1..3).contains(&n) {
            out.push(format!(
                "redlock.nodes has {n} master{}: fewer than 3 cannot survive the loss of any master \
                 (the quorum is {}); 5 independent masters are recommended",
                if n == 1 { "" } else { "s" },
                n / 2 + 1
            ));
        } else if n >= 4 && n.is_multiple_of(2) {
            out.push(format!(
                "redlock.nodes has {n} masters: an even count survives no more lost masters than \
                 {} (the quorum is {}); use an odd count",
                n - 1,
                n / 2 + 1
            ));
        }
        if r.drift_factor == 0.0 {
            out.push(
                "redlock.drift_factor is 0: no allowance for clock rate differences between \
                 masters, so a client may trust a lock a little after a master has expired it"
                    .to_owned(),
            );
        }
        for url in &r.nodes {
            if let Ok(node) = parse_node(url) {
                if node.has_password && !node.tls && !node.is_loopback() {
                    out.push(format!(
                        "redlock.nodes: {} sends its password unencrypted; use rediss://",
                        redact_url(url)
                    ));
                }
            }
        }
        out
    }

    /// Number of masters in `redlock.nodes` (the `N` of Redlock; the quorum
    /// is `N/2 + 1`).
    pub fn node_count(&self) -> usize {
        self.redlock.nodes.len()
    }
}

impl ServerConfig {
    fn validate(&self) -> Result<(), ConfigError> {
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
        if !(1..=MAX_RESOURCE_LEN_LIMIT).contains(&self.max_resource_len) {
            return Err(invalid(
                "redlock.max_resource_len",
                format!(
                    "{} is not in 1..={MAX_RESOURCE_LEN_LIMIT} bytes",
                    self.max_resource_len
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
fn check_drift_factor(drift: f64) -> Result<(), ConfigError> {
    if drift.is_finite() && (0.0..DRIFT_FACTOR_LIMIT).contains(&drift) {
        Ok(())
    } else {
        Err(invalid(
            "redlock.drift_factor",
            format!("{drift} is not a finite number in [0, {DRIFT_FACTOR_LIMIT})"),
        ))
    }
}

/// What validation needs to know about one master URL.
struct NodeAddr {
    /// Lower-cased host, without IPv6 brackets.
    host: String,
    /// Explicit port, or 6379.
    port: u16,
    tls: bool,
    has_password: bool,
}

impl NodeAddr {
    fn is_loopback(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// Port Valkey/Redis listens on when the URL gives none.
const DEFAULT_PORT: u16 = 6379;

/// Minimal parse of `redis[s]://[user[:password]@]host[:port][/db][?query]`:
/// enough to check the scheme and host and to spot the same master listed
/// twice (whatever the db number or credentials). Errors never contain the
/// URL itself.
fn parse_node(url: &str) -> Result<NodeAddr, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "it must start with redis:// or rediss://".to_owned())?;
    let tls = if scheme.eq_ignore_ascii_case("redis") {
        false
    } else if scheme.eq_ignore_ascii_case("rediss") {
        true
    } else {
        return Err("it must start with redis:// or rediss://".to_owned());
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let (userinfo, hostport) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let has_password =
        userinfo.is_some_and(|u| u.split_once(':').is_some_and(|(_, p)| !p.is_empty()));
    let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| "unclosed '[' in the host".to_owned())?;
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err("unexpected text after the IPv6 address".to_owned()),
            },
        }
    } else {
        match hostport.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("it has no host".to_owned());
    }
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the host contains whitespace or control characters".to_owned());
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(port) if port != 0 => port,
            _ => return Err("the port must be a number in 1..=65535".to_owned()),
        },
    };
    Ok(NodeAddr {
        host: host.to_ascii_lowercase(),
        port,
        tls,
        has_password,
    })
}

/// Hides the password of a node URL so it can be shown in errors and logs:
/// `redis://user:secret@host:6379/0` becomes `redis://user:***@host:6379/0`
/// (and `redis://:secret@host` becomes `redis://:***@host`).
///
/// A URL without a password, including one with only a user name
/// (`redis://user@host`, which Valkey/Redis clients send as a user name),
/// comes back unchanged. To err on the side of hiding too much, the
/// credentials are taken to end at the *last* `@`, and a string without
/// `://` is treated as starting with them, so a malformed URL does not leak
/// its password either.
pub fn redact_url(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &rest[..at];
    match userinfo.find(':') {
        Some(colon) => format!("{}{}:***{}", &url[..start], &userinfo[..colon], &rest[at..]),
        None => url.to_owned(),
    }
}

/// Applies [`redact_url`] to every URL-looking word of a free text, such as
/// a TOML parse error that quotes the offending line.
fn redact_text(text: &str) -> String {
    let is_scheme_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
    let ends_word = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        let start = rest[..pos]
            .char_indices()
            .rev()
            .find(|&(_, c)| !is_scheme_char(c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = rest[pos + 3..]
            .find(ends_word)
            .map_or(rest.len(), |i| pos + 3 + i);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `nodes` accepts a list (TOML) or one string holding a comma-separated
/// list (the environment, where every value is a string). Blank items are
/// dropped, so a trailing comma is harmless and an empty string is an empty
/// list (which validation then refuses).
fn deserialize_nodes<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Nodes;

    impl<'de> serde::de::Visitor<'de> for Nodes {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of redis:// URLs, or one string of comma-separated URLs")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect())
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(url) = seq.next_element::<String>()? {
                out.push(url);
            }
            Ok(out)
        }
    }

    deserializer.deserialize_any(Nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The example config shipped with the daemon.
    const SHIPPED: &str = include_str!("../config/redlockd.toml");

    const FIVE: [&str; 5] = [
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:6380",
        "redis://127.0.0.1:6381",
        "redis://127.0.0.1:6382",
        "redis://127.0.0.1:6383",
    ];

    /// A TOML file under the temp dir with a unique name, removed on drop.
    struct TempToml(PathBuf);

    impl TempToml {
        fn new(contents: &str) -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "redlockd-config-test-{}-{}.toml",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::write(&path, contents).unwrap();
            Self(path)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempToml {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn valid() -> Config {
        let mut c = Config::default();
        c.redlock.nodes = FIVE.iter().map(|s| (*s).to_owned()).collect();
        c
    }

    fn load_err(path: Option<&Path>, pairs: &[(&str, &str)]) -> String {
        match Config::load_with_env(path, env(pairs)) {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn invalid_key(c: &Config) -> &'static str {
        match c.validate() {
            Err(ConfigError::Invalid { key, .. }) => key,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = Config::default();
        assert_eq!(c.server.listen, "127.0.0.1:50051".parse().unwrap());
        assert_eq!(c.server.shutdown_grace, Duration::from_secs(10));
        let r = &c.redlock;
        assert!(r.nodes.is_empty());
        assert_eq!(r.key_prefix, "redlock:");
        assert_eq!(r.node_timeout, Duration::from_millis(50));
        assert_eq!(r.drift_factor, 0.01);
        assert_eq!(r.min_ttl, Duration::from_millis(10));
        assert_eq!(r.max_ttl, Duration::from_secs(3600));
        assert_eq!(r.max_wait, Duration::from_secs(300));
        assert_eq!(r.max_resource_len, 512);
        assert_eq!(r.retry_delay_min, Duration::from_millis(5));
        assert_eq!(r.retry_delay_max, Duration::from_millis(50));
        assert_eq!(r.fence_ttl, Duration::from_secs(7 * 24 * 3600));
    }

    #[test]
    fn defaults_need_only_nodes() {
        assert_eq!(invalid_key(&Config::default()), "redlock.nodes");
        let err = load_err(None, &[]);
        assert!(err.contains("redlock.nodes") && err.contains("at least one master"));

        let c = Config::load_with_env(
            None,
            env(&[("REDLOCKD__REDLOCK__NODES", "redis://10.0.0.1:6379")]),
        )
        .unwrap();
        assert_eq!(c.redlock.nodes, vec!["redis://10.0.0.1:6379"]);
        assert_eq!(c.server, ServerConfig::default());
        assert_eq!(c.node_count(), 1);
        valid().validate().unwrap();
    }

    #[test]
    fn file_overrides_defaults_and_partial_file_works() {
        let f = TempToml::new(
            r#"
            [server]
            listen = "0.0.0.0:6000"

            [redlock]
            nodes = ["redis://a:1", "rediss://b:2"]
            node_timeout = "80ms"
            drift_factor = 0.02
            max_resource_len = 100
            "#,
        );
        let c = Config::load_with_env(Some(f.path()), HashMap::new()).unwrap();
        assert_eq!(c.server.listen, "0.0.0.0:6000".parse().unwrap());
        assert_eq!(c.server.shutdown_grace, Duration::from_secs(10));
        assert_eq!(c.redlock.nodes, vec!["redis://a:1", "rediss://b:2"]);
        assert_eq!(c.redlock.node_timeout, Duration::from_millis(80));
        assert_eq!(c.redlock.drift_factor, 0.02);
        assert_eq!(c.redlock.max_resource_len, 100);
        assert_eq!(c.redlock.key_prefix, "redlock:");
        assert_eq!(c.redlock.max_ttl, Duration::from_secs(3600));
    }

    #[test]
    fn env_overrides_file() {
        let f = TempToml::new(
            r#"
            [server]
            listen = "0.0.0.0:6000"
            shutdown_grace = "20s"
            [redlock]
            nodes = ["redis://a:1", "redis://b:2", "redis://c:3"]
            node_timeout = "80ms"
            key_prefix = "file:"
            "#,
        );
        let c = Config::load_with_env(
            Some(f.path()),
            env(&[
                ("REDLOCKD__SERVER__LISTEN", "127.0.0.1:7000"),
                ("REDLOCKD__REDLOCK__NODE_TIMEOUT", "120ms"),
                ("REDLOCKD__REDLOCK__NODES", "redis://x:1"),
                ("REDLOCKD__REDLOCK__DRIFT_FACTOR", "0.02"),
                ("REDLOCKD__REDLOCK__MAX_RESOURCE_LEN", "100"),
                ("REDLOCKD__REDLOCK__FENCE_TTL", "30days"),
            ]),
        )
        .unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(c.server.shutdown_grace, Duration::from_secs(20));
        assert_eq!(c.redlock.node_timeout, Duration::from_millis(120));
        assert_eq!(c.redlock.nodes, vec!["redis://x:1"]);
        assert_eq!(c.redlock.key_prefix, "file:");
        assert_eq!(c.redlock.drift_factor, 0.02);
        assert_eq!(c.redlock.max_resource_len, 100);
        assert_eq!(c.redlock.fence_ttl, Duration::from_secs(30 * 24 * 3600));
    }

    #[test]
    fn env_nodes_comma_list() {
        let c = Config::load_with_env(
            None,
            env(&[(
                "REDLOCKD__REDLOCK__NODES",
                "redis://127.0.0.1:7001,redis://127.0.0.1:7002, rediss://u:p@h:7003 ,",
            )]),
        )
        .unwrap();
        assert_eq!(
            c.redlock.nodes,
            vec![
                "redis://127.0.0.1:7001",
                "redis://127.0.0.1:7002",
                "rediss://u:p@h:7003"
            ]
        );
        assert_eq!(c.node_count(), 3);
        let err = load_err(None, &[("REDLOCKD__REDLOCK__NODES", "")]);
        assert!(err.contains("redlock.nodes"), "{err}");
    }

    #[test]
    fn env_strings_are_kept_verbatim() {
        let c = Config::load_with_env(
            None,
            env(&[
                ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
                ("REDLOCKD__REDLOCK__KEY_PREFIX", "007"),
            ]),
        )
        .unwrap();
        assert_eq!(c.redlock.key_prefix, "007");
        let c = Config::load_with_env(
            None,
            env(&[
                ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
                ("REDLOCKD__REDLOCK__KEY_PREFIX", ""),
            ]),
        )
        .unwrap();
        assert_eq!(c.redlock.key_prefix, "");
    }

    #[test]
    fn env_names_are_case_insensitive_and_others_ignored() {
        let c = Config::load_with_env(
            None,
            env(&[
                ("redlockd__redlock__nodes", "redis://a:1"),
                ("REDLOCKD_LOG", "debug"),
                ("REDLOCKD_CONFIG", "/nowhere.toml"),
                ("REDLOCK__SERVER__LISTEN", "garbage"),
                ("PATH", "/usr/bin"),
                ("XREDLOCKD__SERVER__LISTEN", "garbage"),
            ]),
        )
        .unwrap();
        assert_eq!(c.redlock.nodes, vec!["redis://a:1"]);
        assert_eq!(c.server, ServerConfig::default());
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let f = TempToml::new("[redlock]\nnodes = [\"redis://a:1\"]\nnode_timout = \"5ms\"\n");
        let err = load_err(Some(f.path()), &[]);
        assert!(err.contains("node_timout"), "{err}");

        let f = TempToml::new("[servr]\nlisten = \"127.0.0.1:1\"\n");
        let err = load_err(Some(f.path()), &[]);
        assert!(err.contains("servr"), "{err}");

        let err = load_err(
            None,
            &[
                ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
                ("REDLOCKD__REDLOCK__DRIFT", "0.1"),
            ],
        );
        assert!(err.contains("drift"), "{err}");
    }

    #[test]
    fn bad_values_are_errors_naming_the_key() {
        let f = TempToml::new("[redlock]\nnodes = [\"redis://a:1\"]\nmin_ttl = \"5 parsecs\"\n");
        let err = load_err(Some(f.path()), &[]);
        assert!(err.contains("redlock.min_ttl"), "{err}");

        let err = load_err(
            None,
            &[
                ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
                ("REDLOCKD__REDLOCK__NODE_TIMEOUT", "fast"),
            ],
        );
        assert!(err.contains("redlock.node_timeout"), "{err}");

        let err = load_err(
            None,
            &[
                ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
                ("REDLOCKD__REDLOCK__MAX_RESOURCE_LEN", "-3"),
            ],
        );
        assert!(err.contains("redlock.max_resource_len"), "{err}");

        let err = load_err(None, &[("REDLOCKD__SERVER__LISTEN", "not-an-address")]);
        assert!(err.contains("server.listen"), "{err}");

        // A duration must be a string with a unit, not a bare number.
        let f = TempToml::new("[redlock]\nnodes = [\"redis://a:1\"]\nmax_ttl = 60\n");
        let err = load_err(Some(f.path()), &[]);
        assert!(err.contains("redlock.max_ttl"), "{err}");
    }

    #[test]
    fn missing_or_broken_file_is_a_load_error() {
        let missing = std::env::temp_dir().join("redlockd-config-test-does-not-exist.toml");
        let r = Config::load_with_env(Some(&missing), HashMap::new());
        assert!(matches!(r, Err(ConfigError::Load(_))), "{r:?}");

        let f = TempToml::new("[redlock\nnodes = 1");
        let r = Config::load_with_env(Some(f.path()), HashMap::new());
        assert!(matches!(r, Err(ConfigError::Load(_))), "{r:?}");
    }

    #[test]
    fn every_rule_names_its_key() {
        type Case = (&'static str, fn(&mut Config));
        let cases: &[Case] = &[
            ("redlock.nodes", |c| c.redlock.nodes.clear()),
            ("redlock.nodes", |c| {
                c.redlock.nodes[0] = "127.0.0.1:6379".into()
            }),
            ("redlock.nodes", |c| {
                c.redlock.nodes[0] = "http://h:1".into()
            }),
            ("redlock.nodes", |c| c.redlock.nodes[0] = "redis://".into()),
            ("redlock.nodes", |c| {
                c.redlock.nodes[0] = "redis://:pw@/0".into()
            }),
            ("redlock.nodes", |c| {
                c.redlock.nodes[0] = "redis://h:port".into()
            }),
            ("redlock.nodes", |c| {
                c.redlock.nodes[0] = "redis://h:0".into()
            }),
            ("redlock.nodes", |c| {
                c.redlock.nodes[0] = "redis://[::1".into()
            }),
            ("redlock.nodes", |c| c.redlock.nodes[1] = FIVE[0].into()),
            ("redlock.nodes", |c| {
                c.redlock.nodes = vec!["redis://h".into(), "rediss://u:p@H:6379/2".into()];
            }),
            ("redlock.key_prefix", |c| {
                c.redlock.key_prefix = "a b".into()
            }),
            ("redlock.key_prefix", |c| {
                c.redlock.key_prefix = "a\u{7}".into()
            }),
            ("redlock.node_timeout", |c| {
                c.redlock.node_timeout = Duration::ZERO
            }),
            ("redlock.node_timeout", |c| {
                c.redlock.node_timeout = NODE_TIMEOUT_LIMIT + Duration::from_millis(1);
            }),
            ("redlock.drift_factor", |c| {
                c.redlock.drift_factor = f64::NAN
            }),
            ("redlock.drift_factor", |c| c.redlock.drift_factor = -0.01),
            ("redlock.drift_factor", |c| c.redlock.drift_factor = 0.5),
            ("redlock.drift_factor", |c| {
                c.redlock.drift_factor = f64::INFINITY
            }),
            ("redlock.min_ttl", |c| c.redlock.min_ttl = Duration::ZERO),
            ("redlock.min_ttl", |c| {
                c.redlock.min_ttl = c.redlock.max_ttl + Duration::from_millis(1);
            }),
            ("redlock.max_ttl", |c| {
                c.redlock.max_ttl = MAX_TTL_LIMIT + Duration::from_secs(1);
                c.redlock.fence_ttl = MAX_TTL_LIMIT * 10;
            }),
            ("redlock.max_resource_len", |c| {
                c.redlock.max_resource_len = 0
            }),
            ("redlock.max_resource_len", |c| {
                c.redlock.max_resource_len = MAX_RESOURCE_LEN_LIMIT + 1;
            }),
            ("redlock.retry_delay_min", |c| {
                c.redlock.retry_delay_min = c.redlock.retry_delay_max + Duration::from_millis(1);
            }),
            ("redlock.retry_delay_max", |c| {
                c.redlock.retry_delay_min = Duration::ZERO;
                c.redlock.retry_delay_max = Duration::ZERO;
            }),
            ("redlock.fence_ttl", |c| {
                c.redlock.fence_ttl = c.redlock.max_ttl
            }),
            ("redlock.fence_ttl", |c| {
                c.redlock.fence_ttl = Duration::from_secs(60)
            }),
            ("server.shutdown_grace", |c| {
                c.server.shutdown_grace = SHUTDOWN_GRACE_LIMIT + Duration::from_secs(1);
            }),
        ];
        for (i, (key, break_it)) in cases.iter().enumerate() {
            let mut c = valid();
            break_it(&mut c);
            assert_eq!(invalid_key(&c), *key, "case {i}");
            let msg = c.validate().unwrap_err().to_string();
            assert!(msg.contains(key), "case {i}: {msg}");
        }
    }

    #[test]
    fn limits_themselves_are_accepted() {
        type Case = fn(&mut Config);
        let cases: &[Case] = &[
            |c| c.redlock.node_timeout = NODE_TIMEOUT_LIMIT,
            |c| c.redlock.drift_factor = 0.0,
            |c| c.redlock.max_ttl = MAX_TTL_LIMIT,
            |c| c.redlock.min_ttl = c.redlock.max_ttl,
            |c| c.redlock.max_resource_len = 1,
            |c| c.redlock.max_resource_len = MAX_RESOURCE_LEN_LIMIT,
            |c| c.redlock.retry_delay_min = c.redlock.retry_delay_max,
            |c| c.redlock.retry_delay_min = Duration::ZERO,
            |c| c.redlock.fence_ttl = c.redlock.max_ttl + Duration::from_millis(1),
            |c| c.redlock.key_prefix = String::new(),
            |c| c.redlock.key_prefix = "app:locks/é:".into(),
            |c| c.server.shutdown_grace = SHUTDOWN_GRACE_LIMIT,
            |c| c.server.shutdown_grace = Duration::ZERO,
            |c| {
                c.redlock.nodes = vec![
                    "redis://h:1/0".into(),
                    "rediss://u:p@h:2".into(),
                    "redis://[::1]:1".into(),
                    "redis://[::1]".into(),
                    "REDIS://other".into(),
                ];
            },
        ];
        for (i, tweak) in cases.iter().enumerate() {
            let mut c = valid();
            tweak(&mut c);
            assert!(c.validate().is_ok(), "case {i}: {:?}", c.validate());
        }
    }

    #[test]
    fn duplicate_node_message_explains_the_quorum() {
        let mut c = valid();
        c.redlock.nodes[1] = "redis://127.0.0.1:6379/1".into();
        let msg = c.validate().unwrap_err().to_string();
        assert!(msg.contains("twice") && msg.contains("quorum"), "{msg}");
    }

    #[test]
    fn redact_url_hides_passwords_only() {
        let r = redact_url("redis://user:secret@host:1");
        assert!(!r.contains("secret"), "{r}");
        assert_eq!(r, "redis://user:***@host:1");
        assert_eq!(redact_url("rediss://:secret@h/0"), "rediss://:***@h/0");
        assert_eq!(redact_url("redis://u:se@cr/et@h:1"), "redis://u:***@h:1");
        assert_eq!(redact_url("u:secret@h:1"), "u:***@h:1");
        for plain in [
            "redis://host:1",
            "redis://127.0.0.1:6379/0",
            "rediss://user@host",
            "redis://[::1]:6379",
            "",
            "not a url",
        ] {
            assert_eq!(redact_url(plain), plain);
        }
    }

    #[test]
    fn no_password_in_errors_warnings_or_debug() {
        let secret = "s3cr3t-pw";
        let url = format!("redis://admin:{secret}@db.example:6379");
        let mut c = valid();
        c.redlock.nodes = vec![url.clone(), url.clone()];
        let msg = c.validate().unwrap_err().to_string();
        assert!(
            msg.contains("redlock.nodes") && !msg.contains(secret),
            "{msg}"
        );

        c.redlock.nodes = vec![format!("http://admin:{secret}@h:1")];
        let msg = c.validate().unwrap_err().to_string();
        assert!(!msg.contains(secret), "{msg}");

        c.redlock.nodes = vec![url.clone()];
        let warnings = c.warnings().join("\n");
        assert!(warnings.contains("unencrypted"), "{warnings}");
        assert!(!warnings.contains(secret), "{warnings}");
        let debug = format!("{c:?}");
        assert!(debug.contains("admin:***@db.example"), "{debug}");
        assert!(!debug.contains(secret), "{debug}");

        // A TOML syntax error quotes the broken line.
        let f = TempToml::new(&format!("[redlock]\nnodes = [\"{url}\" \"x\"]\n"));
        let msg = load_err(Some(f.path()), &[]);
        assert!(!msg.contains(secret), "{msg}");
    }

    #[test]
    fn redact_text_finds_urls_in_prose() {
        let t = "bad: nodes = [\"redis://u:pw1@a:1\", 'rediss://:pw2@b'] at redis://u:pw3@c\n";
        let r = redact_text(t);
        assert!(
            !r.contains("pw1") && !r.contains("pw2") && !r.contains("pw3"),
            "{r}"
        );
        assert!(
            r.contains("redis://u:***@a:1") && r.contains("rediss://:***@b"),
            "{r}"
        );
        assert_eq!(redact_text("no urls here é"), "no urls here é");
    }

    #[test]
    fn warnings_give_advice() {
        let mut c = valid();
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());

        c.redlock.nodes.truncate(2);
        let w = c.warnings();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("redlock.nodes has 2 masters")
                && w[0].contains("cannot survive the loss of any master"),
            "{w:?}"
        );

        c.redlock.nodes.truncate(1);
        assert!(
            c.warnings()[0].contains("has 1 master:"),
            "{:?}",
            c.warnings()
        );

        let mut c = valid();
        c.redlock.nodes.truncate(4);
        assert!(c.warnings()[0].contains("even"), "{:?}", c.warnings());

        let mut c = valid();
        c.redlock.drift_factor = 0.0;
        assert!(
            c.warnings()[0].contains("drift_factor"),
            "{:?}",
            c.warnings()
        );

        // A password to a loopback master does not leave the host.
        let mut c = valid();
        c.redlock.nodes[0] = "redis://u:pw@127.0.0.1:6379".into();
        c.redlock.nodes[1] = "redis://u:pw@localhost:6380".into();
        c.redlock.nodes[2] = "rediss://u:pw@db.example:6381".into();
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    }

    #[test]
    fn shipped_example_parses_and_documents_the_defaults() {
        let f = TempToml::new(SHIPPED);
        let c = Config::load_with_env(Some(f.path()), HashMap::new()).unwrap();
        assert_eq!(c.redlock.nodes, FIVE);
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
        // Apart from the example nodes, the file states exactly the defaults.
        assert_eq!(c, valid());
        for key in [
            "listen",
            "shutdown_grace",
            "nodes",
            "key_prefix",
            "node_timeout",
            "drift_factor",
            "min_ttl",
            "max_ttl",
            "max_wait",
            "max_resource_len",
            "retry_delay_min",
            "retry_delay_max",
            "fence_ttl",
        ] {
            let documented = SHIPPED
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{key} =")));
            assert!(documented, "{key} is missing from config/redlockd.toml");
        }
    }

    proptest! {
        #[test]
        fn drift_factor_accepted_iff_finite_in_range(d in proptest::num::f64::ANY) {
            let mut c = valid();
            c.redlock.drift_factor = d;
            let ok = d.is_finite() && (0.0..0.5).contains(&d);
            match c.validate() {
                Ok(()) => prop_assert!(ok, "{d} accepted"),
                Err(ConfigError::Invalid { key, .. }) => {
                    prop_assert!(!ok, "{d} rejected");
                    prop_assert_eq!(key, "redlock.drift_factor");
                }
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }

        #[test]
        fn drift_factor_in_range_is_accepted(d in 0.0f64..0.5) {
            let mut c = valid();
            c.redlock.drift_factor = d;
            prop_assert!(c.validate().is_ok());
        }

        #[test]
        fn drift_factor_out_of_range_is_rejected(
            d in prop_oneof![
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
                0.5f64..1e300,
                -1e300f64..-1e-300,
            ]
        ) {
            prop_assert!(check_drift_factor(d).is_err());
        }
    }
}
