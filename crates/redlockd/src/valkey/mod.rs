//! One Valkey/Redis master over fred: the [`Node`] the engine talks to.
//!
//! fred's defaults are wrong for Redlock (no command timeout, three attempts
//! per command, commands queued while disconnected). Here every command
//! carries `node_timeout`, a single attempt and fail-fast, so a slow or dead
//! master costs a call at most `node_timeout` and a disconnected one nothing;
//! reconnection is a separate, backed-off policy. Each master is one
//! multiplexed connection shared by all requests.

pub(crate) mod auth;
pub(crate) mod batch;
pub(crate) mod boot;
pub(crate) mod clock_jump;
pub(crate) mod connection;
pub(crate) mod horizon;
pub(crate) mod offset;
pub(crate) mod quarantine;
pub(crate) mod scripts;
pub(crate) mod scripts_multi;
pub(crate) mod scripts_rw;
pub(crate) mod scripts_semaphore;
pub(crate) mod server_info;
pub(crate) mod state;
pub(crate) mod subscriber;
mod watch;

pub use watch::mark_duplicates;

use crate::redlock::claim::{self, Claim, Epoch};
use crate::redlock::fence::{FenceRead, Proposal};
use crate::redlock::node::{Record, Seen};
use crate::redlock::{AcquireVote, ExtendVote, Holder, LockKeys, Node, NodeError, Token};
use batch::Batcher;
use fred::bytes::Bytes;
use fred::clients::WithOptions;
use fred::prelude::{
    Builder, Client, ClientLike, Config as FredConfig, ErrorKind, Options, ReconnectPolicy,
    TcpConfig, Value,
};
use fred::types::{ClusterHash, CustomCommand};
use futures::future::BoxFuture;
use futures::FutureExt;
use quarantine::Peers;
use scripts::{BatchScript, Op};
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
pub struct NodeSetupError {
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
}

/// How a master is watched, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct NodeSettings {
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
    pub fn connect(
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
            timeout: Some(batch::backstop(node_timeout)),
            max_attempts: Some(1),
            fail_fast: true,
            ..Options::default()
        });
        let index = peers.join(Arc::clone(&state), command.clone());
        let node = ValkeyMaster {
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
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
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
    pub async fn close(&self) {
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

impl Node for ValkeyMaster {
    fn name(&self) -> &str {
        &self.name
    }

    fn trusted(&self) -> bool {
        self.state.trusted()
    }

    /// fred times each command out `node_timeout` after the batcher hands
    /// it its batch, which is when the batch is written (`batch.rs`).
    fn bounds_own_commands(&self) -> bool {
        true
    }

    fn answered_since(&self, at: tokio::time::Instant) -> bool {
        self.state.answered_since(at)
    }

    fn is_silent(&self) -> bool {
        self.state.is_silent()
    }

    fn acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        proposal: Proposal,
        waiter_marker: Duration,
        holder: &Holder,
    ) -> BoxFuture<'static, Result<AcquireVote, NodeError>> {
        let reply = if let Some(readers) = &keys.readers {
            self.run(
                Op::AcquireShared,
                vec![key(&keys.lock), key(&keys.fence), key(readers)],
                vec![token.expose().into(), millis(ttl), millis(waiter_marker)],
            )
        } else if keys.limit > 1 {
            self.run(
                Op::AcquirePermit,
                vec![
                    key(&keys.lock),
                    key(&keys.fence),
                    key(&keys.base),
                    key(&keys.base_fence),
                ],
                vec![
                    token.expose().into(),
                    millis(ttl),
                    keys.limit.to_string().into(),
                    millis(keys.limit_ttl),
                    millis(waiter_marker),
                ],
            )
        } else {
            if proposal.fence > 0 {
                // The grant may stand without a commit (see `commit_fence`).
                self.peers.local().record(ttl);
            }
            let wire = Wire::of(keys, token);
            self.run(
                Op::Acquire,
                vec![
                    shared(wire.map(|w| &w.lock), &keys.lock),
                    shared(wire.map(|w| &w.fence), &keys.fence),
                ],
                vec![
                    shared(wire.map(|w| &w.token), token.expose()),
                    millis(ttl),
                    Value::String(proposal.fence.to_string().into()),
                    Value::String(proposal.window.as_micros().to_string().into()),
                    millis(proposal.fence_ttl),
                    millis(waiter_marker),
                    holder.owner.as_ref().into(),
                    holder.kind.as_ref().into(),
                    millis(holder.lock_delay),
                    millis(holder.hold_at_least),
                    millis(keys.writer_mark),
                    claim::encode(holder.epoch).into(),
                ],
            )
        };
        async move {
            let fields = array(reply.await?)?;
            match fields.as_slice() {
                [flag, max, now, took] if integer(flag)? == 1 => {
                    Ok(AcquireVote::Granted(FenceRead {
                        max: unsigned(max)?,
                        now_micros: unsigned(now)?,
                        took: integer(took)? == 1,
                    }))
                }
                // A permit's or shared grant's: no proposal taken.
                [flag, max, now] if integer(flag)? == 1 => Ok(AcquireVote::Granted(FenceRead {
                    max: unsigned(max)?,
                    now_micros: unsigned(now)?,
                    took: false,
                })),
                [_, pttl] => Ok(AcquireVote::Refused {
                    holder_ttl: u64::try_from(integer(pttl)?)
                        .ok()
                        .map(Duration::from_millis),
                    delayed: false,
                }),
                [_, _, tag] if tag.as_str().as_deref() == Some("own") => Ok(AcquireVote::Own),
                [_, left, _delay] => Ok(AcquireVote::Refused {
                    holder_ttl: Some(Duration::from_millis(unsigned(left)?)),
                    delayed: true,
                }),
                [_, _, _, _limit] => Ok(AcquireVote::Conflict),
                other => Err(NodeError::Protocol(format!("acquire: {other:?}"))),
            }
        }
        .boxed()
    }

    fn acquire_all(
        &self,
        keys: &[LockKeys],
        token: &Token,
        ttl: Duration,
        waiter_marker: Duration,
    ) -> BoxFuture<'static, Result<crate::redlock::AcquireAllVote, NodeError>> {
        self.run_acquire_all(keys, token, ttl, waiter_marker)
    }

    fn commit_fence(
        &self,
        keys: &LockKeys,
        token: &Token,
        fence: u64,
        fence_ttl: Duration,
        ttl: Duration,
        holder: &Holder,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        // A grant is being committed: no holder of it believes in it past
        // now + ttl (the attempt started earlier).
        self.peers.local().record(ttl);
        let (op, mut script_keys) = match &keys.readers {
            Some(readers) => (Op::CommitShared, vec![key(readers)]),
            None => (Op::CommitFence, Vec::new()),
        };
        let wire = Wire::of(keys, token);
        script_keys.splice(
            0..0,
            [
                shared(wire.map(|w| &w.lock), &keys.lock),
                shared(wire.map(|w| &w.fence), &keys.fence),
            ],
        );
        if keys.readers.is_none() {
            // The resource's own hash keeps its one fence sequence.
            script_keys.push(shared(wire.map(|w| &w.base_fence), &keys.base_fence));
        }
        let reply = self.run(
            op,
            script_keys,
            vec![
                shared(wire.map(|w| &w.token), token.expose()),
                Value::String(fence.to_string().into()),
                millis(fence_ttl),
                millis(ttl),
                holder.owner.as_ref().into(),
                holder.kind.as_ref().into(),
                millis(holder.lock_delay),
                millis(holder.hold_at_least),
                claim::encode(holder.epoch).into(),
            ],
        );
        async move { Ok(integer(&reply.await?)? == 1) }.boxed()
    }

    fn extend(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
        claim: Claim,
    ) -> BoxFuture<'static, Result<ExtendVote, NodeError>> {
        self.peers.local().record(ttl);
        let (op, mut script_keys) = match &keys.readers {
            Some(readers) => (Op::ExtendShared, vec![key(readers)]),
            None => (Op::Extend, Vec::new()),
        };
        script_keys.splice(0..0, [key(&keys.lock), key(&keys.fence)]);
        script_keys.push(key(&keys.base_fence));
        let reply = self.run(
            op,
            script_keys,
            vec![
                token.expose().into(),
                millis(ttl),
                millis(fence_ttl),
                permit_limit(token),
                claim.encode().into(),
            ],
        );
        async move {
            let fields = array(reply.await?)?;
            match fields.as_slice() {
                [flag] if integer(flag)? == 0 => Ok(ExtendVote::NotHeld),
                [flag] if integer(flag)? == 2 => Ok(ExtendVote::Missing),
                [flag] if integer(flag)? == 3 => Ok(ExtendVote::Superseded),
                [_, fence] => Ok(ExtendVote::Extended {
                    fence: Some(unsigned(fence)?).filter(|f| *f > 0),
                }),
                other => Err(NodeError::Protocol(format!("extend: {other:?}"))),
            }
        }
        .boxed()
    }

    fn recreate(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        let reply = match &keys.readers {
            Some(readers) => self.run(
                Op::RecreateShared,
                vec![key(&keys.lock), key(&keys.fence), key(readers)],
                vec![token.expose().into(), millis(ttl)],
            ),
            None => self.run(
                Op::Recreate,
                vec![key(&keys.lock), key(&keys.base_fence), key(&keys.base)],
                vec![
                    token.expose().into(),
                    millis(ttl),
                    permit_limit(token),
                    millis(fence_ttl),
                ],
            ),
        };
        async move { Ok(integer(&reply.await?)? == 1) }.boxed()
    }

    fn release(
        &self,
        keys: &LockKeys,
        token: &Token,
        notice: &str,
        honour_minimum: bool,
        epoch: Option<Epoch>,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        // Static flags: no copy per command.
        let flag = |on: bool| Value::Bytes(Bytes::from_static(if on { b"1" } else { b"0" }));
        let delifeq = flag(self.state.has_delifeq());
        let minimum = flag(honour_minimum);
        let (op, mut script_keys) = match &keys.readers {
            Some(readers) => (Op::ReleaseShared, vec![key(readers)]),
            None => (Op::Release, Vec::new()),
        };
        let wire = Wire::of(keys, token);
        script_keys.splice(
            0..0,
            [
                shared(wire.map(|w| &w.lock), &keys.lock),
                shared(wire.map(|w| &w.fence), &keys.fence),
            ],
        );
        script_keys.push(shared(wire.map(|w| &w.base_fence), &keys.base_fence));
        let reply = self.run(
            op,
            script_keys,
            vec![
                shared(wire.map(|w| &w.token), token.expose()),
                shared(wire.map(|w| &w.channel), &keys.channel),
                notice.into(),
                delifeq,
                minimum,
                claim::encode(epoch).into(),
            ],
        );
        async move { Ok(integer(&reply.await?)? == 1) }.boxed()
    }

    fn check(
        &self,
        keys: &LockKeys,
        token: &Token,
    ) -> BoxFuture<'static, Result<Option<Duration>, NodeError>> {
        let reply = match &keys.readers {
            Some(readers) => self.run(
                Op::CheckShared,
                vec![key(&keys.lock), key(&keys.fence), key(readers)],
                vec![token.expose().into()],
            ),
            None => self.run(
                Op::Check,
                vec![key(&keys.lock)],
                vec![token.expose().into()],
            ),
        };
        async move {
            // -3: not ours; -2: gone; -1: no expiry (never set by us): not held.
            Ok(u64::try_from(integer(&reply.await?)?)
                .ok()
                .map(Duration::from_millis))
        }
        .boxed()
    }

    fn inspect(&self, keys: &LockKeys) -> BoxFuture<'static, Result<Option<Seen>, NodeError>> {
        let reply = self.run(
            Op::Inspect,
            vec![key(&keys.lock), key(&keys.fence)],
            Vec::new(),
        );
        async move { seen(array(reply.await?)?) }.boxed()
    }

    fn scan(
        &self,
        pattern: &str,
        cursor: u64,
        count: usize,
    ) -> BoxFuture<'static, Result<(u64, Vec<String>), NodeError>> {
        // Not batched: SCAN names no key, and its work is bounded by COUNT.
        let command = self.command.clone();
        let down = self.state.is_down();
        let args: Vec<Value> = vec![
            cursor.to_string().into(),
            "MATCH".into(),
            pattern.into(),
            "COUNT".into(),
            Value::Integer(i64::try_from(count).unwrap_or(i64::MAX)),
        ];
        async move {
            if down {
                return Err(NodeError::Unavailable("master is down".into()));
            }
            let cmd = CustomCommand::new_static("SCAN", ClusterHash::FirstKey, false);
            let reply: Value = command.custom(cmd, args).await.map_err(node_error)?;
            match array(reply)?.as_slice() {
                [next, Value::Array(found)] => Ok((
                    unsigned(next)?,
                    found.iter().filter_map(Value::as_string).collect(),
                )),
                other => Err(NodeError::Protocol(format!("scan: {other:?}"))),
            }
        }
        .boxed()
    }
}

/// The inspect script's reply (see `scripts::INSPECT`) as a [`Seen`].
fn seen(fields: Vec<Value>) -> Result<Option<Seen>, NodeError> {
    let text = |v: &Value| v.as_string().unwrap_or_default();
    match fields.as_slice() {
        [_] => Ok(None),
        [token, pttl, holder, fence, owner, kind, at] => {
            let token = text(token);
            let record = (text(holder) == token && !text(fence).is_empty()).then(|| Record {
                fence: text(fence).parse().unwrap_or(0),
                owner: text(owner),
                kind: text(kind),
                at_micros: text(at).parse().unwrap_or(0),
            });
            Ok(Some(Seen {
                token,
                // -1 (no expiry: set by hand) reads as no time left.
                pttl: Duration::from_millis(u64::try_from(integer(pttl)?).unwrap_or(0)),
                record,
            }))
        }
        _ => Err(NodeError::Protocol("inspect: unexpected reply".into())),
    }
}

/// A master's name for logs and metrics: `host:port` from its URL, never the
/// user or password.
pub(crate) fn node_name(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    host.split(['/', '?']).next().unwrap_or(host).to_owned()
}

fn key(name: &str) -> Value {
    Value::from(name)
}

/// The strings every master's command about one subject carries, as shared
/// bytes: copied once per round, then cloned (a reference count) for each
/// master (see `LockKeys::encoded`).
struct Wire {
    lock: Bytes,
    fence: Bytes,
    base_fence: Bytes,
    channel: Bytes,
    token: Bytes,
}

impl Wire {
    /// `keys`' cached encoding, made now from them and `token` if this is
    /// the round's first command.
    fn of<'k>(keys: &'k LockKeys, token: &Token) -> Option<&'k Wire> {
        let bytes = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        keys.encoded.get_or_init(|| Wire {
            lock: bytes(&keys.lock),
            fence: bytes(&keys.fence),
            base_fence: bytes(&keys.base_fence),
            channel: bytes(&keys.channel),
            token: bytes(token.expose()),
        })
    }
}

/// `current` as a command argument: the cached copy if it still says the
/// same (always, unless a field changed after the cache was made), else a
/// fresh one.
fn shared(cached: Option<&Bytes>, current: &str) -> Value {
    match cached {
        Some(bytes) if bytes.as_ref() == current.as_bytes() => Value::Bytes(bytes.clone()),
        _ => Value::from(current),
    }
}

/// A permit's semaphore limit as its token carries it, for the scripts that
/// keep the limit record beside a permit's key; '0' for any other token.
fn permit_limit(token: &Token) -> Value {
    Value::String(token.limit().unwrap_or(0).to_string().into())
}

fn millis(duration: Duration) -> Value {
    Value::Integer(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn node_error(error: fred::error::Error) -> NodeError {
    match error.kind() {
        ErrorKind::Timeout => NodeError::Timeout,
        ErrorKind::IO | ErrorKind::Canceled | ErrorKind::Backpressure | ErrorKind::Routing => {
            NodeError::Unavailable(error.details().to_owned())
        }
        _ => NodeError::Server(error.details().to_owned()),
    }
}

fn array(value: Value) -> Result<Vec<Value>, NodeError> {
    match value {
        Value::Array(fields) => Ok(fields),
        other => Err(NodeError::Protocol(format!(
            "expected an array, got {other:?}"
        ))),
    }
}

fn integer(value: &Value) -> Result<i64, NodeError> {
    match value {
        Value::Integer(i) => Some(*i),
        Value::String(s) => s.parse().ok(),
        Value::Bytes(b) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
        _ => None,
    }
    .ok_or_else(|| NodeError::Protocol(format!("expected an integer, got {value:?}")))
}

fn unsigned(value: &Value) -> Result<u64, NodeError> {
    u64::try_from(integer(value)?)
        .map_err(|_| NodeError::Protocol(format!("expected a non-negative integer, got {value:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inspect script's replies: absent, held with this token's record,
    /// held with another token's record (no record shown).
    #[test]
    fn inspect_replies() {
        let s = |t: &str| Value::String(t.to_owned().into());
        assert_eq!(seen(vec![s("")]).expect("absent"), None);
        let held = seen(vec![
            s("tok"),
            Value::Integer(1500),
            s("tok"),
            s("42"),
            s("cron"),
            s("unary"),
            s("1700000000000000"),
        ])
        .expect("held")
        .expect("some");
        assert_eq!(held.pttl, Duration::from_millis(1500));
        let record = held.record.expect("this token's record");
        assert_eq!((record.fence, record.owner.as_str()), (42, "cron"));
        assert_eq!(record.at_micros, 1_700_000_000_000_000);
        let other = seen(vec![
            s("tok"),
            Value::Integer(-1),
            s("older"),
            s("41"),
            s(""),
            s(""),
            s(""),
        ])
        .expect("held")
        .expect("some");
        assert_eq!((other.record, other.pttl), (None, Duration::ZERO));
        assert!(seen(vec![s("a"), s("b")]).is_err());
    }

    /// A round's commands share one copy of the keys and token; a cached
    /// string that no longer says what its field says is never sent.
    #[test]
    fn keys_are_encoded_once_per_subject_and_never_stale() {
        let token = Token::generate().expect("OS RNG");
        let mut keys = LockKeys::new("redlock:", "orders/42");
        let first = Wire::of(&keys, &token).expect("made") as *const Wire;
        let again = Wire::of(&keys, &token).expect("cached") as *const Wire;
        assert_eq!(first, again, "made once, then reused");
        let wire = Wire::of(&keys, &token);
        let lock = shared(wire.map(|w| &w.lock), &keys.lock);
        assert_eq!(lock.as_str().as_deref(), Some("redlock:lock:orders/42"));
        assert!(matches!(lock, Value::Bytes(_)), "the shared copy");
        let other = Token::generate().expect("OS RNG");
        let sent = shared(wire.map(|w| &w.token), other.expose());
        assert_eq!(sent.as_str().as_deref(), Some(other.expose()));
        // A field changed after the cache was made: its current value goes.
        keys.lock = "redlock:lock:other".into();
        let wire = Wire::of(&keys, &token);
        let lock = shared(wire.map(|w| &w.lock), &keys.lock);
        assert_eq!(lock.as_str().as_deref(), Some("redlock:lock:other"));
        // A clone starts without the cache (and compares equal).
        assert_eq!(keys.clone(), keys);
    }

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
