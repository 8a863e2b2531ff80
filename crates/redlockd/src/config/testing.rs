//! `[testing]`: switches that exist only so that the safety checkers (the
//! chaos checker, `tools/chaos`) can show they catch defects that were
//! fixed. Never set in production: each one re-introduces a way for two
//! clients to hold one lock, and the daemon says so at start-up.

use serde::Deserialize;
use std::fmt;

/// The `[testing]` section (empty by default).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TestingConfig {
    /// Fixed defects to re-introduce, by name (a list, or one
    /// comma-separated string, as `REDLOCKD__TESTING__COUNTERFACTUALS`):
    /// `recreate-without-limit`, `per-kind-fences`,
    /// `release-ignores-hold-at-least`, `resign-ignores-token`,
    /// `release-silent-sessions`.
    #[serde(deserialize_with = "deserialize_counterfactuals")]
    pub counterfactuals: Counterfactuals,
}

/// Which fixed defects to re-introduce: most in the masters' scripts
/// (`crate::valkey::scripts::batch_script`), one in the sessions
/// (`crate::service::hold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counterfactuals {
    /// An Extend puts a permit's lost key back without its semaphore's
    /// limit record, so plain locks can be granted beside the permit after
    /// its masters restart.
    pub recreate_without_limit: bool,
    /// A permit's fence comes from a counter of its own instead of the
    /// resource's one fence sequence, so it can be below the fence of the
    /// plain holder before it.
    pub per_kind_fences: bool,
    /// A holder's Release deletes the lock before its `hold_at_least` ran,
    /// so the next holder is granted inside it.
    pub release_ignores_hold_at_least: bool,
    /// An election's `Resign` ends whoever leads, not only the leadership
    /// whose token it names, so a Resign retried after its leadership
    /// ended ends the next leader's while that leader still holds a
    /// validity.
    pub resign_ignores_token: bool,
    /// A Hold or Campaign session whose connection the daemon closed for
    /// an unanswered keepalive (a frozen or cut-off client) releases its
    /// lock at once, inside the validity the client was last told.
    pub release_silent_sessions: bool,
}

impl Counterfactuals {
    /// Whether any is on.
    pub fn any(&self) -> bool {
        self.recreate_without_limit
            || self.per_kind_fences
            || self.release_ignores_hold_at_least
            || self.resign_ignores_token
            || self.release_silent_sessions
    }

    /// The names of those that are on.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.recreate_without_limit {
            names.push(RECREATE_WITHOUT_LIMIT);
        }
        if self.per_kind_fences {
            names.push(PER_KIND_FENCES);
        }
        if self.release_ignores_hold_at_least {
            names.push(RELEASE_IGNORES_HOLD_AT_LEAST);
        }
        if self.resign_ignores_token {
            names.push(RESIGN_IGNORES_TOKEN);
        }
        if self.release_silent_sessions {
            names.push(RELEASE_SILENT_SESSIONS);
        }
        names
    }

    fn set(&mut self, name: &str) -> Result<(), String> {
        match name {
            RECREATE_WITHOUT_LIMIT => self.recreate_without_limit = true,
            PER_KIND_FENCES => self.per_kind_fences = true,
            RELEASE_IGNORES_HOLD_AT_LEAST => self.release_ignores_hold_at_least = true,
            RESIGN_IGNORES_TOKEN => self.resign_ignores_token = true,
            RELEASE_SILENT_SESSIONS => self.release_silent_sessions = true,
            other => {
                return Err(format!(
                    "unknown counterfactual {other:?} (known: {RECREATE_WITHOUT_LIMIT}, \
                     {PER_KIND_FENCES}, {RELEASE_IGNORES_HOLD_AT_LEAST}, {RESIGN_IGNORES_TOKEN}, \
                     {RELEASE_SILENT_SESSIONS})"
                ))
            }
        }
        Ok(())
    }
}

const RECREATE_WITHOUT_LIMIT: &str = "recreate-without-limit";
const PER_KIND_FENCES: &str = "per-kind-fences";
const RELEASE_IGNORES_HOLD_AT_LEAST: &str = "release-ignores-hold-at-least";
const RESIGN_IGNORES_TOKEN: &str = "resign-ignores-token";
const RELEASE_SILENT_SESSIONS: &str = "release-silent-sessions";

fn deserialize_counterfactuals<'de, D>(deserializer: D) -> Result<Counterfactuals, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Names;

    impl<'de> serde::de::Visitor<'de> for Names {
        type Value = Counterfactuals;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of counterfactual names, or one comma-separated string")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            let mut out = Counterfactuals::default();
            for name in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                out.set(name).map_err(E::custom)?;
            }
            Ok(out)
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Counterfactuals::default();
            while let Some(name) = seq.next_element::<String>()? {
                out.set(&name).map_err(serde::de::Error::custom)?;
            }
            Ok(out)
        }
    }

    deserializer.deserialize_any(Names)
}
