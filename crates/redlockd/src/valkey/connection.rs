//! Numbering a master's connections from inside fred's connection set-up,
//! so that trust can be tied to the connection that carried a reply.
//!
//! fred announces a reconnection on a broadcast channel that a watcher task
//! reads later; a flag that task clears (`verified`) lags the reconnection
//! by as long as the task is not scheduled, and meanwhile replies from a
//! just-restarted master on its new connection would count. fred fetches credentials at the start of every connection's set-up,
//! before that connection carries any command, from the connection's own
//! task. [`ConnectionCounter`] is that credential source: it hands over
//! the configured user and password unchanged and numbers the connection
//! in [`NodeState`]. A reply then counts only if the connection current
//! when its command was queued is still current and had `INFO` read on it
//! (`NodeState::verified_on_connection`, checked by `super::batch`).

use super::state::NodeState;
use fred::error::Error;
use fred::types::config::CredentialProvider;
use fred::types::config::Server;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

/// fred's credential source for one master: the configured credentials,
/// plus a new connection number at each fetch.
pub(crate) struct ConnectionCounter {
    state: Weak<NodeState>,
    username: Option<String>,
    password: Option<String>,
}

impl ConnectionCounter {
    /// Numbers `state`'s connections and hands fred `username` and
    /// `password` (what the URL or `[masters]` said).
    pub(crate) fn new(
        state: &Arc<NodeState>,
        username: Option<String>,
        password: Option<String>,
    ) -> ConnectionCounter {
        ConnectionCounter {
            state: Arc::downgrade(state),
            username,
            password,
        }
    }
}

impl fmt::Debug for ConnectionCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionCounter")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

type Credentials = Result<(Option<String>, Option<String>), Error>;

impl CredentialProvider for ConnectionCounter {
    fn fetch<'a, 'b, 'f>(
        &'a self,
        _server: Option<&'b Server>,
    ) -> Pin<Box<dyn Future<Output = Credentials> + Send + 'f>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        if let Some(state) = self.state.upgrade() {
            state.connection_opened();
        }
        let credentials = (self.username.clone(), self.password.clone());
        Box::pin(async move { Ok(credentials) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each fetch (one per connection set-up) numbers a new connection,
    /// which is not verified until INFO is read on it; the credentials
    /// pass through and the password never shows.
    #[tokio::test]
    async fn each_connection_is_numbered_and_starts_unverified() {
        let state = Arc::new(NodeState::new("m".into(), None, true));
        let counter = ConnectionCounter::new(&state, Some("u".into()), Some("hunter2".into()));
        assert!(!format!("{counter:?}").contains("hunter2"));
        let credentials = counter.fetch(None).await.expect("credentials");
        assert_eq!(credentials, (Some("u".into()), Some("hunter2".into())));
        assert_eq!(state.connection(), 1);
        assert!(!state.verified());
    }
}
