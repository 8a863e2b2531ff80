//! `redlock.restart_quarantine`: how long a master that may have lost its
//! keys (a restart, a new `run_id`, a clock jump) is kept from voting. The
//! arithmetic and the safety argument live in `crate::valkey::horizon`.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// Which restart quarantine the daemon applies.
///
/// Written `"horizon"`, `"max_ttl"` or `"off"`. The booleans of earlier
/// versions are still accepted, in TOML and in the environment
/// (`REDLOCKD__REDLOCK__RESTART_QUARANTINE=true`): `true` means the default,
/// `"horizon"`; `false` means `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartQuarantine {
    /// The default. A restarted master sits out until every lock it may
    /// have lost has expired, as the other masters' horizons (and this
    /// daemon's own grants) tell, plus drift; with nothing at risk (a new
    /// cluster), not at all. When too few other masters can be asked, it
    /// falls back to [`RestartQuarantine::MaxTtl`].
    #[default]
    Horizon,
    /// The blanket quarantine: a restarted master sits out until it has
    /// been up for `max_ttl` plus drift, whatever was locked. Also covers
    /// every master losing its data at once, at the price of an hour of
    /// refusals on a fresh cluster at the default `max_ttl`.
    MaxTtl,
    /// No quarantine: only for masters that persist every write
    /// (`appendfsync always`), or tests about turning it off.
    Off,
}

impl RestartQuarantine {
    /// The value as written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            RestartQuarantine::Horizon => "horizon",
            RestartQuarantine::MaxTtl => "max_ttl",
            RestartQuarantine::Off => "off",
        }
    }

    /// Parses a configuration value: the three names, or the old booleans
    /// (as the environment delivers them, as text).
    pub fn parse(text: &str) -> Option<RestartQuarantine> {
        match text.trim().to_ascii_lowercase().as_str() {
            "horizon" | "true" => Some(RestartQuarantine::Horizon),
            "max_ttl" => Some(RestartQuarantine::MaxTtl),
            "off" | "false" => Some(RestartQuarantine::Off),
            _ => None,
        }
    }
}

impl fmt::Display for RestartQuarantine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RestartQuarantine {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Mode;
        impl Visitor<'_> for Mode {
            type Value = RestartQuarantine;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#""horizon", "max_ttl" or "off" (or true / false)"#)
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
                Ok(match value {
                    true => RestartQuarantine::Horizon,
                    false => RestartQuarantine::Off,
                })
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
                RestartQuarantine::parse(value)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(value), &self))
            }
        }
        deserializer.deserialize_any(Mode)
    }
}
