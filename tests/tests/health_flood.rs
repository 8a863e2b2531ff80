//! A flood of health watches against the real daemon binary, over raw
//! HTTP/2: health and reflection sit outside authentication, and
//! a `Watch` stream stays open for as long as its client likes. Four
//! connections open 10,000 watches each, written as raw frames so that the
//! client ignores every limit the daemon announces, as an attacker would.
//! The daemon, at its default settings, keeps at most
//! `limits.max_unauthenticated_calls` of them open, refuses the rest
//! (counted), keeps its memory bounded, and serves a lock client
//! throughout; health checks work again once the flood ends.

mod common;

use common::frames::{self as frame, header_block, put_frame};
use common::process::{free_addr, DaemonCommand, DaemonProcess};
use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use redlockd_testkit::metrics::counter;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous bound on each phase, on a machine shared with other builds.
const LIMIT: Duration = Duration::from_secs(60);
/// Connections of the flood.
const CONNECTIONS: usize = 4;
/// Watch streams opened on each.
const STREAMS: u32 = 10_000;
/// `limits.max_unauthenticated_calls` at its default.
const DEFAULT_MAX_UNAUTHENTICATED: usize = 1_024;

/// The bytes of one connection's flood: the preface, then `STREAMS`
/// `grpc.health.v1.Health/Watch` calls, each a HEADERS frame and a DATA
/// frame holding an empty request (the whole server's status).
fn flood_bytes() -> Vec<u8> {
    let headers = header_block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/grpc.health.v1.Health/Watch"),
        (":authority", "redlockd"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]);
    let mut out = Vec::with_capacity(STREAMS as usize * (headers.len() + 32));
    for i in 0..STREAMS {
        let stream = 2 * i + 1;
        put_frame(
            &mut out,
            frame::HEADERS,
            frame::END_HEADERS,
            stream,
            &headers,
        );
        put_frame(&mut out, frame::DATA, frame::END_STREAM, stream, &[0; 5]);
    }
    out
}

/// What the daemon answered on one flooding connection.
#[derive(Debug, Default, Clone, Copy)]
struct Answers {
    /// Streams answered with response headers that keep them open: served
    /// watches.
    open: u32,
    /// Streams answered and closed in their first HEADERS frame
    /// (trailers-only: the daemon refused the call).
    closed_at_once: u32,
    /// Streams reset by HTTP/2 (past the connection's stream limit).
    reset: u32,
    /// Whether the daemon sent GOAWAY.
    goaway: bool,
}

impl Answers {
    fn accounted(&self) -> u32 {
        self.open + self.closed_at_once + self.reset
    }
}

/// One flooding connection: writes every stream at once while reading the
/// daemon's frames, answering its SETTINGS and PINGs, until each stream is
/// accounted for, the daemon sends GOAWAY or closes, or `LIMIT` passes.
/// Returns the answers and the still-open socket halves (the served
/// watches stay open while they are held).
async fn flood(addr: SocketAddr) -> (Answers, TcpStream) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut preface = frame::PREFACE.to_vec();
    put_frame(&mut preface, frame::SETTINGS, 0, 0, &[]);
    stream.write_all(&preface).await.expect("preface");
    let (mut rd, mut wr) = stream.into_split();
    let (control, mut control_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        // The server's SETTINGS are acknowledged before the flood, so its
        // stream limit is in force.
        let first = control_rx.recv().await.unwrap_or_default();
        wr.write_all(&first).await?;
        wr.write_all(&flood_bytes()).await?;
        while let Some(bytes) = control_rx.recv().await {
            wr.write_all(&bytes).await?;
        }
        Ok::<_, std::io::Error>(wr)
    });
    let mut answers = Answers::default();
    let mut seen = std::collections::HashSet::new();
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let started = Instant::now();
    'read: while answers.accounted() < STREAMS && !answers.goaway {
        let left = LIMIT.saturating_sub(started.elapsed());
        let n = match tokio::time::timeout(left, rd.read(&mut chunk)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => break,
            Ok(Ok(n)) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        loop {
            if buf.len() < 9 {
                continue 'read;
            }
            let len = usize::from(buf[0]) << 16 | usize::from(buf[1]) << 8 | usize::from(buf[2]);
            if buf.len() < 9 + len {
                continue 'read;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let id = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let payload = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            match kind {
                frame::SETTINGS if flags & frame::ACK == 0 => {
                    let mut ack = Vec::new();
                    put_frame(&mut ack, frame::SETTINGS, frame::ACK, 0, &[]);
                    let _ = control.send(ack);
                }
                frame::PING if flags & frame::ACK == 0 => {
                    let mut pong = Vec::new();
                    put_frame(&mut pong, frame::PING, frame::ACK, 0, &payload);
                    let _ = control.send(pong);
                }
                frame::HEADERS if seen.insert(id) => {
                    if flags & frame::END_STREAM != 0 {
                        answers.closed_at_once += 1;
                    } else {
                        answers.open += 1;
                    }
                }
                frame::RST_STREAM if seen.insert(id) => answers.reset += 1,
                frame::GOAWAY => answers.goaway = true,
                _ => {}
            }
        }
    }
    drop(control);
    let wr = writer
        .await
        .expect("writer task")
        .expect("the flood was written");
    let stream = rd.reunite(wr).expect("halves of one stream");
    (answers, stream)
}

/// The daemon's resident memory now, from `/proc/<pid>/status`.
fn rss_mib(pid: u32) -> f64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kib / 1024.0
}

/// A lock taken and released on `c`'s own connection, at once.
async fn works(c: &mut client::LockClient, resource: &str) {
    let granted = c
        .acquire(pb::AcquireRequest {
            resource: resource.into(),
            ttl: Some(client::proto_duration(Duration::from_secs(5))),
            ..Default::default()
        })
        .await
        .expect("Acquire during the flood")
        .into_inner();
    c.release(pb::ReleaseRequest {
        resource: resource.into(),
        token: granted.lock.map(|l| l.token).unwrap_or_default(),
    })
    .await
    .expect("Release during the flood");
}

/// A lock taken and released while the daemon may be saturated by the
/// flood: on a 2-core machine the flood's 40,000 calls can take every core
/// for a moment, and a lock call in that moment can run out of
/// `redlock.node_timeout`: UNAVAILABLE, or RESOURCE_EXHAUSTED when the
/// daemon sees that its own backlog held the commands. Either is retried,
/// as a client would, within `LIMIT`. Returns how many such answers came
/// (printed, not asserted: a figure, not a timing test).
async fn works_eventually(c: &mut client::LockClient, resource: &str) -> u32 {
    let started = Instant::now();
    let mut unavailable = 0;
    for attempt in 0.. {
        assert!(started.elapsed() < LIMIT, "no lock within {LIMIT:?}");
        let name = format!("{resource}/{attempt}");
        let granted = match c
            .acquire(pb::AcquireRequest {
                resource: name.clone(),
                ttl: Some(client::proto_duration(Duration::from_secs(5))),
                ..Default::default()
            })
            .await
        {
            Ok(granted) => granted.into_inner(),
            Err(status) if retryable(&status) => {
                unavailable += 1;
                continue;
            }
            Err(status) => panic!("Acquire during the flood: {status}"),
        };
        let token = granted.lock.map(|l| l.token).unwrap_or_default();
        loop {
            assert!(started.elapsed() < LIMIT, "no release within {LIMIT:?}");
            match c
                .release(pb::ReleaseRequest {
                    resource: name.clone(),
                    token: token.clone(),
                })
                .await
            {
                Ok(_) => return unavailable,
                Err(status) if retryable(&status) => unavailable += 1,
                Err(status) => panic!("Release during the flood: {status}"),
            }
        }
    }
    unreachable!("the loop returns or panics")
}

/// Whether a lock call's failure says "try again" (the daemon or the
/// masters were too busy), as opposed to a wrong answer.
fn retryable(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::ResourceExhausted
    )
}

/// One health Check on a fresh connection.
async fn health_check(addr: SocketAddr) -> Result<(), tonic::Status> {
    let channel = client::endpoint(addr)
        .expect("endpoint")
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_watch_flood_is_bounded() {
    let h = Harness::start(Flavor::Valkey).await;
    let metrics = free_addr().expect("port");
    let d: DaemonProcess = DaemonCommand::workspace(&h.masters.urls())
        .expect("redlockd binary")
        .set("metrics.enabled", "true")
        .set("metrics.listen", metrics.to_string())
        .spawn()
        .expect("start redlockd");
    let channel = client::endpoint(d.addr).expect("endpoint").connect_lazy();
    client::wait_serving(channel, LIMIT)
        .await
        .expect("the daemon serves");
    let mut good = client::connect(d.addr).await.expect("client");
    works(&mut good, "flood/before").await;
    let rss_before = rss_mib(d.pid);
    let refused_before = counter(
        metrics,
        "redlock_auth_denied_total",
        "unauthenticated_calls",
    );

    let floods: Vec<_> = (0..CONNECTIONS)
        .map(|_| tokio::spawn(flood(d.addr)))
        .collect();
    // The lock client is served while the flood is under way.
    let unavailable = works_eventually(&mut good, "flood/during").await;
    let mut held = Vec::new();
    let mut total = Answers::default();
    for f in floods {
        let (answers, stream) = f.await.expect("flood task");
        println!("one flooding connection: {answers:?}");
        total.open += answers.open;
        total.closed_at_once += answers.closed_at_once;
        total.reset += answers.reset;
        total.goaway |= answers.goaway;
        held.push(stream);
    }
    let rss_during = rss_mib(d.pid);
    let refused = counter(
        metrics,
        "redlock_auth_denied_total",
        "unauthenticated_calls",
    ) - refused_before;
    println!(
        "{CONNECTIONS} x {STREAMS} health watches: {} open, {} refused by the daemon \
         ({refused} counted), {} reset by HTTP/2; RSS {rss_before:.1} MiB before, \
         {rss_during:.1} MiB with the watches held; the lock client was told \
         to retry {unavailable} times during the flood",
        total.open, total.closed_at_once, total.reset
    );
    // 40,000 attempts take every place there is, and no more.
    assert_eq!(
        total.open as usize, DEFAULT_MAX_UNAUTHENTICATED,
        "exactly limits.max_unauthenticated_calls watches are open"
    );
    assert!(
        total.closed_at_once > 0 && refused >= f64::from(total.closed_at_once),
        "refusals are answered and counted ({} answered, {refused} counted)",
        total.closed_at_once
    );
    assert!(
        rss_during - rss_before < 64.0,
        "RSS grew from {rss_before:.1} to {rss_during:.1} MiB"
    );
    works(&mut good, "flood/held").await;
    assert!(
        health_check(d.addr).await.is_err(),
        "with every place taken, a new health check is refused"
    );

    // The flood's connections close: their places come back.
    drop(held);
    let started = Instant::now();
    while let Err(status) = health_check(d.addr).await {
        assert!(
            started.elapsed() < LIMIT,
            "health checks work again after the flood ({status})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    works(&mut good, "flood/after").await;
    d.stop(LIMIT).await.expect("stop");
}
