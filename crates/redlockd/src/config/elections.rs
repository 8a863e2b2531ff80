//! `[[election]]`: elections the daemon campaigns in on behalf of its pod
//! (`crate::campaigns`), for programs that embed no client: the result is
//! an HTTP answer on the metrics endpoint (200 only while this daemon
//! leads: a readiness probe) and, if asked, a file kept up to date.

use super::ConfigError;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// Longest `value` (the daemon's `owner` label bound).
const MAX_VALUE_LEN: usize = 128;

/// One election the daemon campaigns in.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElectionConfig {
    /// The election's name (as a resource name: non-empty, no control
    /// characters, at most `redlock.max_resource_len` bytes).
    pub name: String,
    /// What the daemon publishes while it leads (what `Leader` and
    /// `Observe` answer), such as the pod's address. `${VAR}` is replaced
    /// by the environment variable VAR (a Kubernetes pod's `POD_IP` from
    /// the downward API); an unset variable is a configuration error.
    #[serde(default)]
    pub value: String,
    /// The leadership's ttl: how long a frozen or killed daemon keeps it.
    #[serde(default = "default_ttl", with = "humantime_serde")]
    pub ttl: Duration,
    /// A file the daemon keeps up to date with one JSON object:
    /// `{"leader":true,"term":N,"value":"..."}` while it leads,
    /// `{"leader":false}` otherwise (replaced atomically).
    #[serde(default)]
    pub file: Option<PathBuf>,
}

/// A broken rule of `key` (built here rather than with the validator's
/// helper, which calls this module).
fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

fn default_ttl() -> Duration {
    Duration::from_secs(10)
}

impl ElectionConfig {
    /// `value` with its `${VAR}` references replaced.
    pub(crate) fn expanded_value(&self) -> Result<String, ConfigError> {
        expand(&self.value, |name| std::env::var(name).ok())
    }

    pub(super) fn validate(
        &self,
        max_name_len: usize,
        (min_ttl, max_ttl): (Duration, Duration),
    ) -> Result<(), ConfigError> {
        if self.name.is_empty() || self.name.len() > max_name_len {
            return Err(invalid(
                "election.name",
                format!("{:?} must be 1 to {max_name_len} bytes", self.name),
            ));
        }
        if self.name.chars().any(char::is_control) {
            return Err(invalid(
                "election.name",
                format!("{:?} contains control characters", self.name),
            ));
        }
        let value = self.expanded_value()?;
        if value.len() > MAX_VALUE_LEN || value.chars().any(char::is_control) {
            return Err(invalid(
                "election.value",
                format!("{value:?}: at most {MAX_VALUE_LEN} bytes, no control characters"),
            ));
        }
        if self.ttl < min_ttl || self.ttl > max_ttl {
            return Err(invalid(
                "election.ttl",
                format!(
                    "{} is outside [session.min_ttl, redlock.max_ttl] = [{}, {}]",
                    humantime::format_duration(self.ttl),
                    humantime::format_duration(min_ttl),
                    humantime::format_duration(max_ttl)
                ),
            ));
        }
        Ok(())
    }
}

/// Every election's checks, and no name twice.
pub(super) fn validate(
    elections: &[ElectionConfig],
    max_name_len: usize,
    ttls: (Duration, Duration),
) -> Result<(), ConfigError> {
    for (i, election) in elections.iter().enumerate() {
        election.validate(max_name_len, ttls)?;
        if elections[..i].iter().any(|e| e.name == election.name) {
            return Err(invalid(
                "election.name",
                format!("{:?} is configured twice", election.name),
            ));
        }
    }
    Ok(())
}

/// `text` with each `${NAME}` replaced by `lookup(NAME)`.
fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(invalid(
                "election.value",
                format!("{text:?}: an unclosed ${{"),
            ));
        };
        let name = &after[..end];
        let Some(value) = lookup(name) else {
            return Err(invalid(
                "election.value",
                format!("{text:?}: the environment variable {name} is not set"),
            ));
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn election(name: &str, value: &str) -> ElectionConfig {
        ElectionConfig {
            name: name.into(),
            value: value.into(),
            ttl: default_ttl(),
            file: None,
        }
    }

    const TTLS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(3600));

    #[test]
    fn values_expand_environment_variables() {
        let lookup = |name: &str| (name == "POD_IP").then(|| "10.1.2.3".to_owned());
        assert_eq!(
            expand("${POD_IP}:8080", lookup).expect("expands"),
            "10.1.2.3:8080"
        );
        assert_eq!(expand("plain", lookup).expect("as is"), "plain");
        assert!(expand("${NOPE}", lookup).is_err());
        assert!(expand("${POD_IP", lookup).is_err());
    }

    #[test]
    fn names_are_checked_and_unique() {
        assert!(validate(&[election("jobs", "a")], 512, TTLS).is_ok());
        assert!(validate(&[election("", "a")], 512, TTLS).is_err());
        assert!(validate(&[election("a\nb", "a")], 512, TTLS).is_err());
        assert!(validate(&[election("jobs", "a"), election("jobs", "b")], 512, TTLS).is_err());
        let mut short = election("jobs", "a");
        short.ttl = Duration::from_millis(10);
        assert!(validate(&[short], 512, TTLS).is_err());
    }
}
