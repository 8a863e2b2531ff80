//! One Valkey/Redis master over fred: the [`Master`](crate::redlock::Master) the engine talks to.
//!
//! fred's defaults are wrong for Redlock (no command timeout, three attempts
//! per command, commands queued while disconnected). Here every command
//! carries `node_timeout`, a single attempt and fail-fast, so a slow or dead
//! master costs a call at most `node_timeout` and a disconnected one nothing;
//! reconnection is a separate, backed-off policy. Each master is one
//! multiplexed connection shared by all requests.

mod acquire_all;
pub(crate) mod auth;
pub(crate) mod batch;
pub(crate) mod boot;
pub(crate) mod clock_jump;
pub(crate) mod connection;
pub(crate) mod horizon;
pub(crate) mod offset;
mod ops;
pub(crate) mod pace;
pub(crate) mod quarantine;
pub(crate) mod scripts;
pub(crate) mod server_info;
pub(crate) mod state;
pub(crate) mod subscriber;
mod watch;
mod wire;

/// For `redlockd-bench --workloads script` only: the batch script, and the
/// same without the fence's record, to run on a master directly.
#[doc(hidden)]
pub use scripts::cost as script_cost;
pub use watch::mark_duplicates;

use crate::redlock::NodeError;
use batch::Batcher;
use fred::clients::WithOptions;
use fred::prelude::{
    Builder, Client, ClientLike, Config as FredConfig, Options, ReconnectPolicy, TcpConfig, Value,
};
use quarantine::Peers;
use scripts::{BatchScript, Constants, Op};
use state::NodeState;
use std::sync::Arc;
use std::time::Duration;

/// How long fred may take to open a TCP connection to a master; commands do
/// not wait for it (fail-fast), only reconnection does.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Longest pause between reconnection attempts to a lost master (the
/// delays double from 20 ms, plus fred's jitter of up to 100 ms). Short: a
/// master that comes back is in service again within about half a second,
/// and a connection attempt every half second costs nothing.
const RECONNECT_MAX_DELAY_MS: u32 = 500;

/// A master could not even be configured (bad URL).
#[derive(Debug, thiserror::Error)]
#[error("redlock.nodes: master {name}: {reason}")]
pub(crate) struct NodeSetupError {
    name: String,
    reason: String,
}

/// A master reached through one multiplexed fred connection.
pub struct ValkeyMaster {
    name: String,
    client: Client,
    /// The same connection with per-command options: timeout, one attempt, fail-fast.
    command: WithOptions<Client>,
    /// Every lock command goes through here, batched (`batch.rs`).
    batcher: Batcher,
    /// Connection, trust and features, kept by the watchers (`watch.rs`).
    /// fred keeps its own state "connected" until its first reconnection
    /// attempt fails, and queues commands meanwhile; the `down` flag makes
    /// them fail at once instead.
    state: Arc<NodeState>,
    /// The daemon's other masters, and its own grants (`quarantine.rs`).
    peers: Arc<Peers>,
    /// How recently the master must have answered to count as up
    /// ([`watch::answer_window`]).
    answer_window: Duration,
    /// The values the batch script has written in, which the operations
    /// therefore do not send (`ops.rs` checks an acquire's proposal
    /// against them).
    constants: Constants,
}

/// How a master is watched, from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeSettings {
    /// Bound of every command.
    pub node_timeout: Duration,
    /// Blanket restart quarantine length (`max_ttl` plus drift); `None`: off.
    pub quarantine: Option<Duration>,
    /// Whether the horizons may shorten it (`super::horizon`): the default.
    pub horizon: bool,
    /// Drift allowance, for clock-jump detection.
    pub drift_factor: f64,
    /// Largest accepted clock offset of a master (`offset.rs`).
    pub max_clock_offset: Duration,
}

impl ValkeyMaster {
    /// Configures the client for `url` and starts connecting in the
    /// background; the node is usable at once (calls fail fast until the
    /// connection is up). It joins `peers`, the daemon's masters, in the
    /// order of the calls.
    pub(crate) fn connect(
        url: &str,
        settings: NodeSettings,
        script: Arc<BatchScript>,
        access: &auth::MasterAccess,
        peers: &Arc<Peers>,
    ) -> Result<ValkeyMaster, NodeSetupError> {
        let node_timeout = settings.node_timeout;
        let name = node_name(url);
        let mut config = FredConfig::from_url(url).map_err(|e| NodeSetupError {
            name: name.clone(),
            reason: e.details().to_owned(),
        })?;
        access.apply(&mut config);
        let state = Arc::new(NodeState::new(
            name.clone(),
            settings.quarantine,
            settings.horizon,
        ));
        // Numbers each connection as fred sets it up (`connection.rs`).
        config.credential_provider = Some(Arc::new(connection::ConnectionCounter::new(
            &state,
            config.username.clone(),
            config.password.clone(),
        )));
        // Client-level fail-fast would also give up on the *first* connection
        // (a master down at start-up would never be retried); commands get
        // fail-fast through their own options instead.
        config.fail_fast = false;
        let mut builder = Builder::from_config(config);
        builder
            .with_connection_config(|c| {
                c.connection_timeout = CONNECT_TIMEOUT;
                c.internal_command_timeout = CONNECT_TIMEOUT;
                c.max_command_attempts = 1;
                c.tcp = TcpConfig {
                    nodelay: Some(true),
                    ..TcpConfig::default()
                };
            })
            .with_performance_config(|p| p.default_command_timeout = node_timeout)
            .set_policy(ReconnectPolicy::new_exponential(
                0,
                20,
                RECONNECT_MAX_DELAY_MS,
                2,
            ));
        let client = builder.build().map_err(|e| NodeSetupError {
            name: name.clone(),
            reason: e.details().to_owned(),
        })?;
        let command = client.with_options(&Options {
            timeout: Some(node_timeout),
            max_attempts: Some(1),
            fail_fast: true,
            ..Options::default()
        });
        // Lock commands go in batches, which bound them by `node_timeout`
        // themselves and give more time only while the daemon runs late
        // (`batch.rs`); fred's timeout is only their backstop.
        let batch_command = client.with_options(&Options {
            timeout: Some(pace::backstop(node_timeout)),
            max_attempts: Some(1),
            fail_fast: true,
            ..Options::default()
        });
        let index = peers.join(Arc::clone(&state), command.clone());
        let constants = script.constants;
        let node = ValkeyMaster {
            constants,
            batcher: Batcher::start(
                name.as_str().into(),
                batch_command,
                node_timeout,
                Arc::clone(&state),
                script,
                Value::from(peers.horizon_key()),
                Arc::clone(peers),
            ),
            state,
            peers: Arc::clone(peers),
            answer_window: watch::answer_window(node_timeout),
            name,
            client,
            command,
        };
        node.client.connect();
        watch::spawn(&node, settings);
        if settings.horizon && settings.quarantine.is_some() {
            quarantine::spawn_settler(peers, index, &node.state);
        }
        Ok(node)
    }

    /// Waits until the first connection is up and the master's `INFO` was
    /// read (its answers count only from then on), or `timeout` passes.
    pub(crate) async fn wait_connected(&self, timeout: Duration) -> bool {
        let verified = async {
            while !self.state.verified() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(timeout, verified).await.is_ok()
    }

    /// Whether the master is up: connected, and it answered something (a
    /// command, or the watcher's PING) within the answer window. A hung
    /// master keeps its connection open; it is not up.
    pub fn is_up(&self) -> bool {
        !self.state.is_down()
            && self.client.is_connected()
            && self.state.responsive(self.answer_window)
    }

    /// What the daemon knows of this master: trust, quarantine, run_id.
    pub fn state(&self) -> &NodeState {
        &self.state
    }

    /// Closes the connection (at daemon shutdown). Bounded: fred's QUIT
    /// waits for a master that is down to come back.
    pub(crate) async fn close(&self) {
        let _ = tokio::time::timeout(CONNECT_TIMEOUT, self.client.quit()).await;
    }

    /// Queues `op` in this master's next batch (at once: the order of
    /// submission is the order on the master) and waits for its reply.
    fn run(
        &self,
        op: Op,
        keys: Vec<Value>,
        args: Vec<Value>,
    ) -> impl std::future::Future<Output = Result<Value, NodeError>> + Send + 'static {
        self.batcher.submit(op, keys, args)
    }
}

/// A master's name for logs and metrics: `host:port` from its URL, never the
/// user or password.
pub(crate) fn node_name(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    host.split(['/', '?']).next().unwrap_or(host).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node names never carry credentials.
    #[test]
    fn names_hide_credentials() {
        assert_eq!(node_name("redis://127.0.0.1:6379"), "127.0.0.1:6379");
        assert_eq!(
            node_name("rediss://user:secret@db.example:6380/0"),
            "db.example:6380"
        );
        assert_eq!(node_name("redis://:p@ss@h:1"), "h:1");
    }
}
