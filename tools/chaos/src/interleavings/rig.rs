//! The set-up every interleaving shares: five masters, each behind its own
//! fault proxy (master 0 optionally a server whose wall clock is offset,
//! see [`crate::interleavings::skewed`]), one `redlockd` replica over the
//! proxies, and the few calls the scenarios make: Acquire/Release on a
//! channel, and one gauge of the replica's `/metrics` by master.

use super::skewed::Skewed;
use crate::cluster::BoxError;
use crate::replicas::{ReplicaConfig, Replicas};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, Lock, ReleaseRequest, ValidateRequest};
use redlockd_testkit::masters::LocalMasters;
use redlockd_testkit::proxy::{Mode, Proxy};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Channel;

/// Longest a metrics scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
/// Added to a call's own wait or deadline for the client's guard timeout.
const CALL_SLACK: Duration = Duration::from_secs(2);

/// Five masters behind proxies and one replica over them.
pub(crate) struct Rig {
    /// The ordinary masters: nodes `first_local..`.
    local: Arc<Mutex<LocalMasters>>,
    /// Master 0 when its clock is offset.
    skewed: Option<Arc<Mutex<Skewed>>>,
    /// One proxy per node, index-aligned.
    proxies: Vec<Proxy>,
    /// The replica (one).
    pub replicas: Replicas,
    /// Its channel.
    pub channel: Channel,
}

impl Rig {
    /// Starts the masters (master 0 `skewed` if given), their proxies and
    /// one replica with `extra` settings (`quarantine` off only for the
    /// counterfactual that shows a check can fail).
    pub(crate) async fn start(
        daemon: &super::Daemon,
        skewed: Option<Skewed>,
        log_dir: PathBuf,
        extra: Vec<(String, String)>,
    ) -> Result<Rig, BoxError> {
        let server = daemon.server.clone();
        let n_local = 5 - usize::from(skewed.is_some());
        let local =
            tokio::task::spawn_blocking(move || LocalMasters::start(&server, n_local)).await??;
        let mut upstreams: Vec<u16> = Vec::new();
        if let Some(s) = &skewed {
            upstreams.push(s.port());
        }
        upstreams.extend((0..local.len()).map(|i| local.port(i)));
        let mut proxies = Vec::with_capacity(upstreams.len());
        for port in upstreams {
            proxies.push(Proxy::start(SocketAddr::from(([127, 0, 0, 1], port))).await?);
        }
        let config = ReplicaConfig {
            binary: daemon.binary.clone(),
            nodes: proxies
                .iter()
                .map(|p| format!("redis://{}", p.addr()))
                .collect(),
            max_ttl: daemon.max_ttl,
            quarantine: daemon.quarantine,
            log_dir,
            extra,
            counterfactual: daemon.counterfactual.clone(),
        };
        let replicas = Replicas::start(config, 1).await?;
        let (_, channel) = replicas.routes().pick(0);
        Ok(Rig {
            local: Arc::new(Mutex::new(local)),
            skewed: skewed.map(|s| Arc::new(Mutex::new(s))),
            proxies,
            replicas,
            channel,
        })
    }

    /// The ordinary masters' own ports (not their proxies'), to read keys
    /// directly.
    pub(crate) fn master_ports(&self) -> Vec<u16> {
        let local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        (0..local.len()).map(|i| local.port(i)).collect()
    }

    /// The daemon's name of master `i` (its proxy's `host:port`).
    pub(crate) fn node(&self, i: usize) -> String {
        self.proxies
            .get(i)
            .map_or_else(String::new, |p| p.addr().to_string())
    }

    /// Master `i`'s proxy.
    pub(crate) fn proxy(&self, i: usize) -> Option<&Proxy> {
        self.proxies.get(i)
    }

    /// Sets master `i`'s proxy mode.
    pub(crate) fn set_mode(&self, i: usize, mode: Mode) {
        if let Some(proxy) = self.proxies.get(i) {
            proxy.set(mode);
        }
    }

    /// SIGKILLs master `i` and starts it again empty on its port.
    pub(crate) async fn restart_empty(&self, i: usize) -> Result<(), BoxError> {
        match (&self.skewed, i) {
            (Some(skewed), 0) => {
                let skewed = Arc::clone(skewed);
                tokio::task::spawn_blocking(move || {
                    skewed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .restart()
                })
                .await?
            }
            _ => {
                let index = i - usize::from(self.skewed.is_some());
                let local = Arc::clone(&self.local);
                tokio::task::spawn_blocking(move || {
                    local
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .restart(index)
                })
                .await??;
                Ok(())
            }
        }
    }

    /// The replica's gauge `name` for master `i`, if it exports one.
    pub(crate) async fn gauge(&self, name: &str, i: usize) -> Result<Option<f64>, BoxError> {
        let (_, metrics) = self.replicas.addrs(0).ok_or("no replica")?;
        let text = scrape(metrics).await?;
        let node = format!("node=\"{}\"", self.node(i));
        Ok(text
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
            .filter(|l| l.contains(&node))
            .find_map(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok())))
    }

    /// Polls gauge `name` of master `i` until `pred` holds or `limit`
    /// passes; the last value seen, and whether `pred` held.
    pub(crate) async fn await_gauge(
        &self,
        name: &str,
        i: usize,
        limit: Duration,
        pred: impl Fn(f64) -> bool,
    ) -> Result<(Option<f64>, bool), BoxError> {
        let until = tokio::time::Instant::now() + limit;
        let mut last = None;
        loop {
            last = self.gauge(name, i).await?.or(last);
            if last.is_some_and(&pred) {
                return Ok((last, true));
            }
            if tokio::time::Instant::now() >= until {
                return Ok((last, false));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the replica and every master.
    pub(crate) async fn stop(self) {
        self.replicas.stop_all().await;
        let (local, skewed) = (self.local, self.skewed);
        let _ = tokio::task::spawn_blocking(move || {
            drop(local);
            drop(skewed);
        })
        .await;
    }
}

/// `GET /metrics` on `addr`: the exposition text.
async fn scrape(addr: SocketAddr) -> Result<String, BoxError> {
    let get = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut body = Vec::new();
        stream.read_to_end(&mut body).await?;
        Ok::<_, BoxError>(String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(SCRAPE_TIMEOUT, get)
        .await
        .map_err(|_| format!("no metrics from {addr} within {SCRAPE_TIMEOUT:?}"))?
}

fn proto(d: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(d).ok()
}

/// A lock's validity as answered.
pub(crate) fn validity(lock: &Lock) -> Duration {
    lock.validity
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// Acquire on `channel`, with a gRPC deadline if `deadline` is given; a
/// local guard ends the call at the deadline (or wait) plus a slack.
pub(crate) async fn acquire(
    channel: Channel,
    resource: &str,
    ttl: Duration,
    wait: Duration,
    deadline: Option<Duration>,
) -> Result<Lock, tonic::Status> {
    acquire_as(channel, resource, ttl, wait, deadline, "").await
}

/// [`acquire`] with `AcquireRequest.request_id` (empty: none).
pub(crate) async fn acquire_as(
    channel: Channel,
    resource: &str,
    ttl: Duration,
    wait: Duration,
    deadline: Option<Duration>,
    request_id: &str,
) -> Result<Lock, tonic::Status> {
    let mut request = tonic::Request::new(AcquireRequest {
        resource: resource.to_owned(),
        ttl: proto(ttl),
        wait: proto(wait),
        owner: "chaos-interleavings".to_owned(),
        request_id: request_id.to_owned(),
        ..Default::default()
    });
    if let Some(deadline) = deadline {
        request.set_timeout(deadline);
    }
    let guard = deadline.unwrap_or(wait) + CALL_SLACK;
    let mut client = LockServiceClient::new(channel);
    match tokio::time::timeout(guard, client.acquire(request)).await {
        Ok(Ok(answer)) => answer
            .into_inner()
            .lock
            .ok_or_else(|| tonic::Status::internal("granted without a lock")),
        Ok(Err(status)) => Err(status),
        Err(_) => Err(tonic::Status::deadline_exceeded("the client's guard")),
    }
}

/// Validate on `channel`; whether the lock is held.
pub(crate) async fn held(channel: Channel, lock: &Lock) -> Result<bool, tonic::Status> {
    let request = ValidateRequest {
        resource: lock.resource.clone(),
        token: lock.token.clone(),
    };
    let mut client = LockServiceClient::new(channel);
    match tokio::time::timeout(CALL_SLACK, client.validate(request)).await {
        Ok(Ok(answer)) => Ok(answer.into_inner().held),
        Ok(Err(status)) => Err(status),
        Err(_) => Err(tonic::Status::deadline_exceeded("the client's guard")),
    }
}

/// Release on `channel`; whether the lock was still held.
pub(crate) async fn release(channel: Channel, lock: &Lock) -> Result<bool, tonic::Status> {
    release_token(channel, &lock.resource, &lock.token).await
}

/// Releases `token`'s lock on `resource` (a lock the caller never saw, by
/// its request id's derived token, included): `was_held`.
pub(crate) async fn release_token(
    channel: Channel,
    resource: &str,
    token: &str,
) -> Result<bool, tonic::Status> {
    let request = ReleaseRequest {
        resource: resource.to_owned(),
        token: token.to_owned(),
    };
    let mut client = LockServiceClient::new(channel);
    match tokio::time::timeout(CALL_SLACK, client.release(request)).await {
        Ok(Ok(answer)) => Ok(answer.into_inner().was_held),
        Ok(Err(status)) => Err(status),
        Err(_) => Err(tonic::Status::deadline_exceeded("the client's guard")),
    }
}
