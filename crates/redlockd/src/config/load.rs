//! Loading: built-in defaults, then the TOML file, then the environment
//! (the load order in the module's documentation), then validation.

use super::redact::redact_text;
use super::{Config, ConfigError, ENV_PREFIX, ENV_SEPARATOR};
use std::collections::HashMap;
use std::path::Path;

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
}
