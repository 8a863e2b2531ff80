//! The start-up warnings: a configuration that is valid, and works, but is
//! weaker than it looks.

use super::nodes::parse_node;
use super::{redact_url, security, Config, RestartQuarantine};

impl Config {
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
        if r.quarantine == RestartQuarantine::Off {
            out.push(
                "redlock.restart_quarantine is off: a master that restarts without its data \
                 votes at once and can grant a lock that is still held; keep it off only for \
                 masters that persist every write (appendfsync always)"
                    .to_owned(),
            );
        }
        if self.testing.counterfactuals.any() {
            out.push(format!(
                "testing.counterfactuals = {:?}: the masters' scripts re-introduce fixed defects \
                 that let two clients hold one lock; for the safety checkers only, never in \
                 production",
                self.testing.counterfactuals.names()
            ));
        }
        if r.drift_factor == 0.0 {
            out.push(
                "redlock.drift_factor is 0: no allowance for clock rate differences between \
                 masters, so a client may trust a lock a little after a master has expired it"
                    .to_owned(),
            );
        }
        // A password from [masters] (file or variable) goes to every
        // master whose URL has none of its own.
        let shared = if self.masters.password_file.is_some() {
            Some("masters.password_file")
        } else if self.masters.password_env.is_some() {
            Some("masters.password_env")
        } else {
            None
        };
        for url in &r.nodes {
            if let Ok(node) = parse_node(url) {
                if node.tls || node.is_loopback() {
                    continue;
                }
                if node.has_password {
                    out.push(format!(
                        "redlock.nodes: {} sends its password unencrypted; use rediss://",
                        redact_url(url)
                    ));
                } else if let Some(source) = shared {
                    out.push(format!(
                        "redlock.nodes: {} is sent the password of {source} unencrypted; use \
                         rediss://",
                        redact_url(url)
                    ));
                }
            }
        }
        for client in &self.auth.clients {
            if client
                .token_sha256
                .as_deref()
                .is_some_and(security::is_weak_token_hash)
            {
                out.push(format!(
                    "auth.clients: the token of {:?} is a common word; generate one with \
                     `openssl rand -hex 32`",
                    client.name
                ));
            }
        }
        out
    }
}
