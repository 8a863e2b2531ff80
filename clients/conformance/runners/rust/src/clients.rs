//! The named clients a step may use (the environment's `clients`), each
//! built on first use and kept for the whole run, as every runner does.
//! Built lazily (`connect_lazy`): a daemon that cannot be reached, or a
//! TLS handshake that fails (`tls_untrusted`), is the outcome of the
//! step's call, where the scenario expects it, not a failure to set up.

use crate::spec::ClientSpec;
use redlockd_client::Client;
use std::collections::HashMap;

/// The specs, and the clients made of them so far.
pub(crate) struct Clients {
    specs: HashMap<String, ClientSpec>,
    made: HashMap<String, Client>,
}

impl Clients {
    /// No client made yet.
    pub(crate) fn new(specs: HashMap<String, ClientSpec>) -> Clients {
        Clients {
            specs,
            made: HashMap::new(),
        }
    }

    /// The client called `name` (a cheap clone of the shared one).
    pub(crate) fn get(&mut self, name: &str) -> Result<Client, String> {
        if let Some(client) = self.made.get(name) {
            return Ok(client.clone());
        }
        let spec = self
            .specs
            .get(name)
            .ok_or_else(|| format!("unknown client {name:?}"))?;
        let mut builder = match (&spec.ca_file, spec.tls) {
            (Some(ca_file), _) => {
                let pem = std::fs::read(ca_file).map_err(|e| format!("{ca_file}: {e}"))?;
                Client::builder(&spec.address).ca_certificate(pem)
            }
            (None, true) => Client::builder(format!("https://{}", spec.address)),
            (None, false) => Client::builder(&spec.address),
        };
        if let Some(token) = &spec.token {
            builder = builder.bearer_token(token);
        }
        let client = builder
            .connect_lazy()
            .map_err(|e| format!("client {name}: {e}"))?;
        self.made.insert(name.to_owned(), client.clone());
        Ok(client)
    }

    /// Closes every client, waiting for their background releases.
    pub(crate) async fn close(self) {
        for client in self.made.into_values() {
            client.close().await;
        }
    }
}
