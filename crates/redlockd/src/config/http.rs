//! The `[http]` section: the HTTP/JSON gateway, a second way into the same
//! lock API for callers without a gRPC stack (PHP, shell scripts with curl).

use serde::Deserialize;
use std::net::SocketAddr;

/// Where the HTTP/JSON gateway listens; off unless `listen` is set
/// (`redlockd --dev` sets it to 127.0.0.1:8080). It shares the gRPC
/// port's TLS (`[server.tls]`), authentication, limits and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Address the gateway binds to; `None`: no gateway.
    pub listen: Option<SocketAddr>,
}
