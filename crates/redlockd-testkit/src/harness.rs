//! The integration tests' fixture: five real masters (Valkey or Redis,
//! started on free loopback ports), one or more in-process daemons served
//! through `redlockd::run` on ephemeral ports, gRPC clients, and a raw
//! connection to each master to look at what the daemon left there; plus
//! the small call helpers every test uses.

use crate::daemon::Daemon;
use crate::masters::{find_server, Flavor, LocalMasters};
use fred::prelude::{Builder, Client, ClientLike, Config as FredConfig, ReconnectPolicy, Value};
use fred::types::{ClusterHash, CustomCommand};
use redlockd::config::Config;
use redlockd_proto::pb;
use std::time::Duration;

pub use crate::client::LockClient;

/// Runs each named `async fn case(flavor: Flavor)` against Valkey and Redis,
/// as tests `case::valkey` and `case::redis`.
#[macro_export]
macro_rules! against_both_servers {
    ($($case:ident),+ $(,)?) => {$(
        mod $case {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn valkey() {
                super::$case($crate::masters::Flavor::Valkey).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                super::$case($crate::masters::Flavor::Redis).await
            }
        }
    )+};
}

/// Five masters and the daemons serving them.
pub struct Harness {
    /// The master processes.
    pub masters: LocalMasters,
    /// The daemons started so far.
    pub daemons: Vec<Daemon>,
    /// Raw connections to each master, for inspection.
    raw: Vec<Client>,
    /// Which software the masters run.
    pub flavor: Flavor,
    /// Changes to the default test configuration, for every daemon.
    tweak: fn(&mut Config),
}

/// Node timeout used by the tests (the default).
pub const NODE_TIMEOUT: Duration = Duration::from_millis(50);

impl Harness {
    /// Starts five masters of `flavor` and one daemon. Fails the test (with
    /// the reason) if the server binary is missing: never skips silently.
    pub async fn start(flavor: Flavor) -> Harness {
        Harness::start_with(flavor, |_| {}).await
    }

    /// Like [`Harness::start`], with `tweak` applied to every daemon's
    /// configuration.
    pub async fn start_with(flavor: Flavor, tweak: fn(&mut Config)) -> Harness {
        let binary = find_server(flavor).unwrap_or_else(|e| panic!("{flavor}: {e}"));
        let masters = LocalMasters::start(&binary, 5).unwrap_or_else(|e| panic!("{flavor}: {e}"));
        let mut raw = Vec::new();
        for url in masters.urls() {
            // Reconnects after a master restarts, and never waits forever.
            let client = Builder::from_config(FredConfig::from_url(&url).expect("url"))
                .with_performance_config(|p| p.default_command_timeout = Duration::from_secs(2))
                .set_policy(ReconnectPolicy::new_constant(0, 50))
                .build()
                .expect("client");
            client.init().await.expect("raw connection to a master");
            raw.push(client);
        }
        let mut harness = Harness {
            masters,
            daemons: Vec::new(),
            raw,
            flavor,
            tweak,
        };
        harness.start_daemon().await;
        harness
    }

    /// The configuration the test daemons run with.
    pub fn config(&self) -> Config {
        let mut config = Config::default();
        config.redlock.nodes = self.masters.urls();
        config.redlock.node_timeout = NODE_TIMEOUT;
        // The restart quarantine is the default (horizon), as users run it:
        // fresh masters hold no horizon, so they vote at once.
        // Many daemons run at once in the test suite: never the fixed port.
        config.metrics.listen = "127.0.0.1:0".parse().expect("address");
        (self.tweak)(&mut config);
        config
    }

    /// Starts one more daemon over the same masters; returns its index.
    pub async fn start_daemon(&mut self) -> usize {
        let config = self.config().validated().expect("test config is valid");
        let daemon = Daemon::start(config).await.expect("start a daemon");
        // Ready as a readiness probe sees it: SERVING (a quorum of masters
        // trusted), before the test stops any master.
        let channel = crate::client::endpoint(daemon.addr)
            .expect("endpoint")
            .connect_lazy();
        crate::client::wait_serving(channel, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("daemon at {}: {e}", daemon.addr));
        self.daemons.push(daemon);
        self.daemons.len() - 1
    }

    /// A daemon process (the workspace's binary, default settings) over
    /// these masters, with its metrics endpoint on a free port, SERVING:
    /// for tests that read a real daemon's metrics. The process, the
    /// metrics address and a channel to its gRPC port.
    pub async fn metered_daemon(
        &self,
    ) -> (
        crate::process::DaemonProcess,
        std::net::SocketAddr,
        tonic::transport::Channel,
    ) {
        let metrics = crate::process::free_addr().expect("a free port");
        let daemon = crate::process::DaemonCommand::workspace(&self.masters.urls())
            .expect("redlockd binary")
            .set("metrics.enabled", true)
            .set("metrics.listen", metrics)
            .spawn()
            .expect("start redlockd");
        let channel = crate::client::endpoint(daemon.addr)
            .expect("endpoint")
            .connect_lazy();
        crate::client::wait_serving(channel.clone(), Duration::from_secs(10))
            .await
            .expect("SERVING at start");
        (daemon, metrics, channel)
    }

    /// A client of daemon `i`.
    pub async fn client_of(&self, i: usize) -> LockClient {
        crate::client::connect(self.daemons[i].addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A client of the first daemon.
    pub async fn client(&self) -> LockClient {
        self.client_of(0).await
    }

    /// Sends a raw command to master `i`.
    pub async fn raw(&self, i: usize, command: &'static str, args: Vec<Value>) -> Value {
        let cmd = CustomCommand::new_static(command, ClusterHash::FirstKey, false);
        self.raw[i]
            .custom::<Value, Value>(cmd, args)
            .await
            .unwrap_or_else(|e| panic!("{command} on master {i}: {e}"))
    }

    /// Keys matching `pattern` on every running master, as (master, key).
    pub async fn keys(&self, pattern: &str) -> Vec<(usize, String)> {
        let mut found = Vec::new();
        for i in 0..self.masters.len() {
            if !self.masters.is_running(i) {
                continue;
            }
            if let Value::Array(keys) = self.raw(i, "KEYS", vec![pattern.into()]).await {
                found.extend(keys.iter().filter_map(|k| k.as_string()).map(|k| (i, k)));
            }
        }
        found
    }

    /// The value of the lock key of `resource` on master `i` (None: absent).
    pub async fn lock_value(&self, i: usize, resource: &str) -> Option<String> {
        self.raw(i, "GET", vec![format!("redlock:lock:{resource}").into()])
            .await
            .as_string()
    }

    /// How many masters have `field` = `value` in `resource`'s fence hash
    /// (a grant's record is on a quorum at least when it is answered).
    pub async fn fence_field_on(&self, resource: &str, field: &str, value: &str) -> usize {
        let mut n = 0;
        for i in 0..self.masters.len() {
            let key = format!("redlock:fence:{resource}");
            let found = self.raw(i, "HGET", vec![key.into(), field.into()]).await;
            n += usize::from(found.as_string().as_deref() == Some(value));
        }
        n
    }

    /// How many masters hold `token` on `resource`'s lock key.
    pub async fn holders(&self, resource: &str, token: &str) -> usize {
        let mut n = 0;
        for i in 0..self.masters.len() {
            if self.masters.is_running(i)
                && self.lock_value(i, resource).await.as_deref() == Some(token)
            {
                n += 1;
            }
        }
        n
    }

    /// Waits (at most 2 s) until all five masters hold `token` for
    /// `resource`. An Acquire is answered once a quorum holds the lock
    /// (its round stops there); the last masters follow.
    pub async fn held_everywhere(&self, resource: &str, token: &str) {
        eventually(
            Duration::from_secs(2),
            &format!("{resource} held on all five masters"),
            || async { self.holders(resource, token).await == 5 },
        )
        .await;
    }

    /// Calls of the lock scripts and DELIFEQ so far on master `i` (from
    /// `INFO commandstats`): how many lock commands reached it.
    pub async fn lock_commands(&self, i: usize) -> u64 {
        let info = self.raw(i, "INFO", vec!["commandstats".into()]).await;
        let text = info.as_string().unwrap_or_default();
        crate::commandstats::calls(&text, &["evalsha", "eval", "delifeq"])
    }
}

/// Opens a `Hold` session on `resource` and waits for its first event.
pub async fn hold(
    client: &mut LockClient,
    resource: &str,
    ttl_ms: u64,
    wait_ms: u64,
) -> (
    tokio::sync::mpsc::Sender<pb::HoldRequest>,
    tonic::Streaming<pb::HoldEvent>,
    pb::Lock,
) {
    let request = pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(ttl_ms),
        wait: ms(wait_ms),
        owner: "test".into(),
        request_id: String::new(),
        ..Default::default()
    };
    hold_asking(client, request).await
}

/// Opens a `Hold` session whose first message asks `acquire` (a request
/// id, a kind, terms) and waits for `acquired`.
pub async fn hold_asking(
    client: &mut LockClient,
    acquire: pb::AcquireRequest,
) -> (
    tokio::sync::mpsc::Sender<pb::HoldRequest>,
    tonic::Streaming<pb::HoldEvent>,
    pb::Lock,
) {
    use pb::hold_event::Event;
    use pb::hold_request::Request;
    let (requests, outgoing) = tokio::sync::mpsc::channel(4);
    requests
        .send(pb::HoldRequest {
            request: Some(Request::Acquire(acquire)),
        })
        .await
        .expect("queue the first message");
    let mut events = client
        .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect("Hold opens")
        .into_inner();
    match events.message().await {
        Ok(Some(pb::HoldEvent {
            event: Some(Event::Acquired(lock)),
        })) => (requests, events, lock),
        other => panic!("expected `acquired`, got {other:?}"),
    }
}

/// The `release` message of a Hold session.
pub fn release_message() -> pb::HoldRequest {
    pb::HoldRequest {
        request: Some(pb::hold_request::Request::Release(
            pb::hold_request::Release {},
        )),
    }
}

/// A protobuf duration of `ms` milliseconds.
pub fn ms(ms: u64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration::try_from(Duration::from_millis(ms)).expect("small duration"))
}

/// A std duration from an optional protobuf one (zero when absent).
pub fn std_duration(d: Option<prost_types::Duration>) -> Duration {
    d.and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// Acquire `resource` for `ttl_ms`, waiting up to `wait_ms`.
pub async fn acquire(
    client: &mut LockClient,
    resource: &str,
    ttl_ms: u64,
    wait_ms: u64,
) -> Result<pb::Lock, tonic::Status> {
    let response = client
        .acquire(pb::AcquireRequest {
            resource: resource.into(),
            ttl: ms(ttl_ms),
            wait: ms(wait_ms),
            owner: "test".into(),
            request_id: String::new(),
            ..Default::default()
        })
        .await?;
    Ok(response
        .into_inner()
        .lock
        .expect("a granted Acquire carries the lock"))
}

/// Release `lock`; returns `was_held`.
pub async fn release(client: &mut LockClient, lock: &pb::Lock) -> Result<bool, tonic::Status> {
    Ok(client
        .release(pb::ReleaseRequest {
            resource: lock.resource.clone(),
            token: lock.token.clone(),
        })
        .await?
        .into_inner()
        .was_held)
}

/// Validate `lock`.
pub async fn validate(
    client: &mut LockClient,
    lock: &pb::Lock,
) -> Result<pb::ValidateResponse, tonic::Status> {
    Ok(client
        .validate(pb::ValidateRequest {
            resource: lock.resource.clone(),
            token: lock.token.clone(),
        })
        .await?
        .into_inner())
}

/// Extend `lock` to `ttl_ms`.
pub async fn extend(
    client: &mut LockClient,
    lock: &pb::Lock,
    ttl_ms: u64,
) -> Result<pb::Lock, tonic::Status> {
    Ok(client
        .extend(pb::ExtendRequest {
            resource: lock.resource.clone(),
            token: lock.token.clone(),
            ttl: ms(ttl_ms),
        })
        .await?
        .into_inner()
        .lock
        .expect("a successful Extend carries the lock"))
}

/// Polls `condition` every 5 ms until it holds, failing the test after
/// `limit`. A bounded wait for a state change, not a sleep.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let give_up = tokio::time::Instant::now() + limit;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < give_up,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
