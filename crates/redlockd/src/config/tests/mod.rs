//! Unit tests of the configuration, split by theme: [`load`] (defaults,
//! file and environment layers, load errors, the shipped example),
//! [`rules`] (validation rules, redaction, warnings) and [`security`]
//! (auth, TLS and flood-limit keys; property tests of parsing). This file
//! holds the fixtures they use.

mod load;
mod rules;
mod security;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Config, ConfigError};

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
