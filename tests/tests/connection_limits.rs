//! Connection-level denial of service against the real daemon binary, over
//! real sockets: connections that send nothing, a half-sent
//! HTTP/2 preface and a TLS handshake that never comes are closed within
//! their timeouts, while a silent `Hold` session is not; at the connection
//! cap new connections are refused and counted while a client on an
//! existing connection keeps working; with the file descriptors gone
//! (EMFILE) the daemon pauses its accepts instead of spinning a core.
//! Every wait is bounded.

mod common;

use common::process::{free_addr, DaemonCommand, DaemonProcess};
use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use redlockd_testkit::metrics::counter;
use redlockd_testkit::pki::Pki;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous bound on anything the daemon should do within a second or so,
/// on a machine shared with other builds.
const LIMIT: Duration = Duration::from_secs(20);

/// The binary over `h`'s masters with `settings`, SERVING.
async fn daemon(h: &Harness, settings: &[(&str, String)]) -> DaemonProcess {
    let mut command = DaemonCommand::workspace(&h.masters.urls()).expect("redlockd binary");
    for (key, value) in settings {
        command = command.set(key, value);
    }
    let daemon = command.spawn().expect("start redlockd");
    let channel = client::endpoint(daemon.addr)
        .expect("endpoint")
        .connect_lazy();
    client::wait_serving(channel, LIMIT)
        .await
        .expect("the daemon serves");
    daemon
}

/// How long from `since` until the daemon closes `stream` (reads EOF or an
/// error), failing the test past `LIMIT`. Anything the daemon sends before
/// is ignored (an HTTP/2 SETTINGS frame). For a lower bound on the daemon's
/// timeout, `since` is taken before the connect: the daemon cannot start
/// its timer earlier (after it, the daemon may have accepted first).
async fn closed_after(mut stream: TcpStream, since: Instant) -> Duration {
    let started = since;
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(LIMIT, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("the connection is still open after {LIMIT:?}"),
        }
    }
}

/// The daemon's CPU time so far (user + system), from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 here.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // USER_HZ is 100 on every Linux the suite runs on.
    Duration::from_millis(ticks * 10)
}

/// The daemon's open file descriptors.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/<pid>/fd")
        .count()
}

/// The share of one core the daemon used over `window`.
async fn cpu_share(pid: u32, window: Duration) -> f64 {
    let before = cpu_time(pid);
    tokio::time::sleep(window).await;
    (cpu_time(pid) - before).as_secs_f64() / window.as_secs_f64()
}

/// A new connection to `addr`, if the daemon admits it: an admitted one
/// receives the server's HTTP/2 SETTINGS at once, a refused one is closed.
async fn admitted(addr: SocketAddr) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(addr).await.expect("the kernel accepts");
    let mut buf = [0u8; 64];
    match tokio::time::timeout(LIMIT, stream.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => Some(stream),
        Ok(_) => None,
        Err(_) => panic!("neither served nor closed within {LIMIT:?}"),
    }
}

/// A lock taken and released on `c`'s existing connection.
async fn works(c: &mut client::LockClient, resource: &str) {
    let granted = c
        .acquire(pb::AcquireRequest {
            resource: resource.into(),
            ttl: Some(client::proto_duration(Duration::from_secs(5))),
            wait: None,
            owner: String::new(),
            request_id: String::new(),
            ..Default::default()
        })
        .await
        .expect("Acquire on the existing connection")
        .into_inner();
    c.release(pb::ReleaseRequest {
        resource: resource.into(),
        token: granted.lock.map(|l| l.token).unwrap_or_default(),
    })
    .await
    .expect("Release on the existing connection");
}

/// Idle TCP and a half-sent HTTP/2 preface are closed after
/// `server.idle_timeout`; a Hold session that stays silent for several
/// idle timeouts keeps its connection and its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_but_not_silent_sessions() {
    let h = Harness::start(Flavor::Valkey).await;
    let idle = Duration::from_millis(500);
    let d = daemon(&h, &[("server.idle_timeout", "500ms".into())]).await;

    let connecting = Instant::now();
    let silent = TcpStream::connect(d.addr).await.expect("connect");
    let mut half = TcpStream::connect(d.addr).await.expect("connect");
    half.write_all(b"PRI * HTTP/2.0\r\n")
        .await
        .expect("half a preface");
    let (silent, half) = tokio::join!(
        closed_after(silent, connecting),
        closed_after(half, connecting)
    );
    for (what, after) in [("idle TCP", silent), ("half-sent preface", half)] {
        assert!(
            after >= idle,
            "{what} closed after {after:?}, before the idle timeout"
        );
        println!("{what}: closed after {after:?} (idle_timeout {idle:?})");
    }

    // A Hold session with a 1 s ttl: the daemon extends it (server to
    // client traffic only); the client sends nothing after its first
    // message. Three idle timeouts later the stream still delivers events.
    let mut c = client::connect(d.addr).await.expect("client");
    let (tx, outgoing) = tokio::sync::mpsc::channel::<pb::HoldRequest>(1);
    tx.send(pb::HoldRequest {
        request: Some(pb::hold_request::Request::Acquire(pb::AcquireRequest {
            resource: "silent-session".into(),
            ttl: Some(client::proto_duration(Duration::from_secs(1))),
            wait: None,
            owner: String::new(),
            request_id: String::new(),
            ..Default::default()
        })),
    })
    .await
    .expect("first message");
    let mut events = c
        .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect("Hold")
        .into_inner();
    let until = Instant::now() + idle * 3;
    let mut seen = 0;
    while Instant::now() < until {
        let event = tokio::time::timeout(LIMIT, events.message())
            .await
            .expect("an event in time")
            .expect("the session stream stays healthy")
            .expect("the stream is not over");
        seen += usize::from(event.event.is_some());
    }
    assert!(seen >= 2, "granted and extended at least once");
    drop(tx);
    d.stop(LIMIT).await.expect("stop");
}

/// A TCP connection that never starts its TLS handshake is closed after
/// `server.tls_handshake_timeout` (the idle timeout is far longer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tls_handshake_is_closed() {
    let h = Harness::start(Flavor::Valkey).await;
    let dir = tempdir();
    let files = Pki::new().write(&dir, "server");
    let d = daemon_tls(&h, &files).await;
    let connecting = Instant::now();
    let stream = TcpStream::connect(d.addr).await.expect("connect");
    let after = closed_after(stream, connecting).await;
    assert!(
        after >= Duration::from_millis(300),
        "closed after {after:?}, before the timeout"
    );
    println!("idle TLS: closed after {after:?} (tls_handshake_timeout 300ms)");
    d.stop(LIMIT).await.expect("stop");
}

/// Failed TLS handshakes (a plaintext HTTP/2 client on the TLS port) are
/// closed at once and counted as
/// `redlock_connections_refused_total{reason="tls_handshake"}` (and logged
/// at info, at most every 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_tls_handshakes_are_counted() {
    const TRIES: usize = 20;
    let h = Harness::start(Flavor::Valkey).await;
    let dir = tempdir();
    let files = Pki::new().write(&dir, "server");
    let metrics = free_addr().expect("port");
    let d = daemon_tls_with(
        &h,
        &files,
        &[
            ("metrics.enabled", "true".into()),
            ("metrics.listen", metrics.to_string()),
        ],
    )
    .await;
    // The gRPC port accepts (the kernel's backlog) before the daemon has
    // bound its metrics endpoint: wait for that too.
    let started = Instant::now();
    while redlockd_testkit::metrics::scrape(metrics).is_err() {
        assert!(
            started.elapsed() < LIMIT,
            "the metrics endpoint answers within {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = counter(
        metrics,
        "redlock_connections_refused_total",
        "tls_handshake",
    );
    for _ in 0..TRIES {
        let mut stream = TcpStream::connect(d.addr).await.expect("connect");
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .expect("a plaintext preface");
        // An upper bound: timed from after the preface was sent.
        let after = closed_after(stream, Instant::now()).await;
        assert!(
            after < Duration::from_millis(300),
            "a failed handshake is closed at once, not at the timeout ({after:?})"
        );
    }
    let started = Instant::now();
    loop {
        let counted = counter(
            metrics,
            "redlock_connections_refused_total",
            "tls_handshake",
        ) - before;
        if counted >= TRIES as f64 {
            break;
        }
        assert!(
            started.elapsed() < LIMIT,
            "{TRIES} failed handshakes counted, saw {counted}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    d.stop(LIMIT).await.expect("stop");
}

/// A TLS daemon; SERVING is not polled (the test client is plaintext), the
/// port is polled for a TCP accept instead.
async fn daemon_tls(h: &Harness, files: &redlockd_testkit::pki::PkiFiles) -> DaemonProcess {
    daemon_tls_with(h, files, &[]).await
}

/// [`daemon_tls`] with more `settings`.
async fn daemon_tls_with(
    h: &Harness,
    files: &redlockd_testkit::pki::PkiFiles,
    settings: &[(&str, String)],
) -> DaemonProcess {
    let mut command = DaemonCommand::workspace(&h.masters.urls()).expect("redlockd binary");
    for (key, value) in settings {
        command = command.set(key, value);
    }
    let d = command
        .set("server.tls.cert", files.cert.display())
        .set("server.tls.key", files.key.display())
        .set("server.tls_handshake_timeout", "300ms")
        .set("server.idle_timeout", "1h")
        .spawn()
        .expect("start redlockd");
    let started = Instant::now();
    while TcpStream::connect(d.addr).await.is_err() {
        assert!(
            started.elapsed() < LIMIT,
            "the daemon listens within {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    d
}

/// A fresh scratch directory.
fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "redlockd-conn-{}-{}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// With `limits.max_connections` reached, new connections are closed at
/// once and counted, the client on an existing connection keeps working,
/// and the daemon stays nearly idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_refuses_new_connections_cheaply() {
    const CAP: usize = 16;
    let h = Harness::start(Flavor::Valkey).await;
    let metrics = free_addr().expect("port");
    let d = daemon(
        &h,
        &[
            ("limits.max_connections", CAP.to_string()),
            ("server.idle_timeout", "1h".into()),
            ("metrics.enabled", "true".into()),
            ("metrics.listen", metrics.to_string()),
        ],
    )
    .await;
    // The good client takes one place; silent connections take the rest
    // until the first refusal (a place is given back asynchronously when a
    // connection closes, such as the one the SERVING check used).
    let mut good = client::connect(d.addr).await.expect("client");
    works(&mut good, "before").await;
    let mut held = Vec::new();
    while let Some(stream) = admitted(d.addr).await {
        held.push(stream);
        assert!(held.len() < CAP, "the cap of {CAP} holds");
    }
    // Every further connection is closed by the daemon at once (a late
    // freed place may admit one).
    let refused_before = counter(
        metrics,
        "redlock_connections_refused_total",
        "max_connections",
    );
    let mut refusals = 0;
    for _ in 0..50 {
        match admitted(d.addr).await {
            Some(stream) => held.push(stream),
            None => refusals += 1,
        }
    }
    assert!(
        refusals >= 48,
        "50 connections past the cap, {refusals} refused"
    );
    let counted = counter(
        metrics,
        "redlock_connections_refused_total",
        "max_connections",
    ) - refused_before;
    assert!(
        counted >= f64::from(refusals),
        "{refusals} refusals counted, saw {counted}"
    );
    works(&mut good, "at-the-cap").await;
    let share = cpu_share(d.pid, Duration::from_secs(2)).await;
    println!("CPU at the connection cap: {:.1}% of a core", share * 100.0);
    assert!(
        share < 0.1,
        "the daemon used {:.0}% of a core at the cap",
        share * 100.0
    );
    // Places come back when connections close.
    drop(held);
    let started = Instant::now();
    loop {
        if let Some(_stream) = admitted(d.addr).await {
            break;
        }
        assert!(
            started.elapsed() < LIMIT,
            "a new connection is admitted again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut fresh = client::connect(d.addr).await.expect("a fresh client");
    works(&mut fresh, "after").await;
    d.stop(LIMIT).await.expect("stop");
}

/// Out of file descriptors (the daemon's limit lowered with prlimit while
/// it runs): accepts fail with EMFILE, the daemon pauses them instead of
/// spinning a core, its existing client keeps working, and once
/// descriptors are free again new connections are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_does_not_spin() {
    let h = Harness::start(Flavor::Valkey).await;
    let d = daemon(&h, &[("server.idle_timeout", "1h".into())]).await;
    let mut good = client::connect(d.addr).await.expect("client");
    works(&mut good, "before").await;
    let open = fds(d.pid);
    let limit = open + 8;
    let status = std::process::Command::new("prlimit")
        .arg(format!("--pid={}", d.pid))
        .arg(format!("--nofile={limit}:{limit}"))
        .status()
        .expect("prlimit");
    assert!(status.success(), "prlimit lowers the daemon's limit");
    let mut held = Vec::new();
    for _ in 0..40 {
        held.push(
            TcpStream::connect(d.addr)
                .await
                .expect("the kernel accepts"),
        );
    }
    // Every descriptor is taken once the daemon accepted what it could.
    let started = Instant::now();
    while fds(d.pid) < limit {
        assert!(
            started.elapsed() < LIMIT,
            "descriptors run out within {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let share = cpu_share(d.pid, Duration::from_secs(2)).await;
    println!(
        "CPU with accepts failing (EMFILE): {:.1}% of a core",
        share * 100.0
    );
    assert!(
        share < 0.1,
        "the daemon used {:.0}% of a core on EMFILE",
        share * 100.0
    );
    works(&mut good, "out-of-fds").await;
    drop(held);
    let started = Instant::now();
    while admitted(d.addr).await.is_none() {
        assert!(
            started.elapsed() < LIMIT,
            "new connections are served again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    d.stop(LIMIT).await.expect("stop");
}
