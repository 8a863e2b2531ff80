//! The `[metrics]` and `[log]` sections: the Prometheus scrape endpoint,
//! and how log lines are written.

use serde::Deserialize;

/// The `[metrics]` section: the Prometheus scrape endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Serve `/metrics` at all.
    pub enabled: bool,
    /// Address of the plain-HTTP `/metrics` endpoint, separate from the gRPC
    /// port. Loopback by default: expose it deliberately.
    pub listen: std::net::SocketAddr,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 9464)),
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// The `[log]` section. The level comes from `RUST_LOG` (default `info`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `"text"` or `"json"`.
    pub format: LogFormat,
}
