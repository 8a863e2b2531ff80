//! The two files the harness hands over: the scenarios
//! (`clients/conformance/scenarios.json`) and the environment (the prefix
//! and the clients a step may name). One flat [`Step`] with every field of
//! every step kind, as in the other runners: an unknown `op` fails its own
//! scenario instead of the whole file.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::HashMap;

/// `scenarios.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct ScenarioFile {
    pub(crate) scenarios: Vec<Scenario>,
}

/// One scenario: an id and its steps (its `about` is for readers).
#[derive(Debug, Deserialize)]
pub(crate) struct Scenario {
    pub(crate) id: String,
    pub(crate) steps: Vec<Step>,
}

/// One step; which fields matter depends on `op` (the README's table).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Step {
    pub(crate) op: String,
    pub(crate) client: String,
    pub(crate) resource: String,
    pub(crate) ttl_ms: u64,
    pub(crate) wait_ms: Option<u64>,
    pub(crate) deadline_ms: Option<u64>,
    pub(crate) within_ms: Option<u64>,
    pub(crate) ms: u64,
    pub(crate) save: Option<String>,
    pub(crate) lock: String,
    pub(crate) lease: String,
    pub(crate) pending: String,
    pub(crate) name: String,
    pub(crate) error: Option<String>,
    pub(crate) may_succeed: bool,
    pub(crate) field: Option<String>,
    pub(crate) was_held: Option<bool>,
    pub(crate) held: Option<bool>,
    pub(crate) fence_above: Option<FenceRef>,
    pub(crate) fence_equal: Option<FenceRef>,
}

/// A fence to compare with: a number, or the name a lock or lease was
/// saved under.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum FenceRef {
    Number(u64),
    Saved(String),
}

/// The environment file.
#[derive(Debug, Deserialize)]
pub(crate) struct Environment {
    /// Put in place of `{prefix}` in resource names.
    pub(crate) prefix: String,
    /// The clients a step may name.
    pub(crate) clients: HashMap<String, ClientSpec>,
}

/// How to reach one named client's daemon.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ClientSpec {
    /// `HOST:PORT`.
    pub(crate) address: String,
    /// A bearer token.
    pub(crate) token: Option<String>,
    /// PEM of the CA to trust: TLS.
    pub(crate) ca_file: Option<String>,
    /// TLS with the system's roots.
    pub(crate) tls: bool,
}

/// Reads and parses a JSON file.
pub(crate) fn read<T: DeserializeOwned>(path: &str) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))
}
