//! Helpers for tests that run programs against the harness's daemon: the
//! `redlockctl` binary, scratch directories, bounded waits on files and
//! processes, and a TCP proxy that can black-hole connections (a network
//! partition between a client and the daemon).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

/// The `redlockctl` binary under test.
pub const REDLOCKCTL: &str = env!("CARGO_BIN_EXE_redlockctl");

/// `redlockctl ARGS...` against the daemon at `addr`, killed if dropped.
pub fn redlockctl(addr: SocketAddr, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(REDLOCKCTL);
    command
        .args(args)
        .env("REDLOCK_ADDR", format!("http://{addr}"))
        .env_remove("REDLOCK_RESOURCE")
        .env_remove("REDLOCK_TOKEN")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs a command to completion within `limit`; panics past it.
pub async fn output_within(
    mut command: tokio::process::Command,
    limit: Duration,
) -> std::process::Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().expect("spawn");
    tokio::time::timeout(limit, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("no exit within {limit:?}"))
        .expect("wait")
}

/// Waits for a child's exit, failing the test after `limit`.
pub async fn exit_within(child: &mut tokio::process::Child, limit: Duration) -> ExitStatus {
    tokio::time::timeout(limit, child.wait())
        .await
        .unwrap_or_else(|_| panic!("no exit within {limit:?}"))
        .expect("wait")
}

/// Collects a child's output stream line by line, echoing it to the test's
/// stderr; the receiver gets every line.
pub fn lines_of(
    stream: impl AsyncRead + Unpin + Send + 'static,
    tag: &'static str,
) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[{tag}] {line}");
            let _ = tx.send(line);
        }
    });
    rx
}

/// Waits until a line containing `needle` arrives; returns every line so far.
pub async fn line_containing(
    lines: &mut mpsc::UnboundedReceiver<String>,
    needle: &str,
    limit: Duration,
) -> Vec<String> {
    let mut seen = Vec::new();
    let found = tokio::time::timeout(limit, async {
        while let Some(line) = lines.recv().await {
            let hit = line.contains(needle);
            seen.push(line);
            if hit {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "no line with {needle:?} within {limit:?}; saw {seen:?}"
    );
    seen
}

/// A scratch directory, removed when dropped.
pub struct Scratch {
    /// Its path.
    pub path: PathBuf,
}

impl Scratch {
    /// A new, empty, uniquely named directory under the system temp dir.
    pub fn new(tag: &str) -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "redlockd-{tag}-{}-{n}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&path).expect("create scratch dir");
        Scratch { path }
    }

    /// A path inside it, as a string for shell scripts.
    pub fn file(&self, name: &str) -> String {
        self.path.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The lines of a file (empty if it does not exist yet).
pub fn read_lines(path: impl AsRef<Path>) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Polls `path` until a line contains `needle`; fails the test after `limit`.
pub async fn file_has_line(path: &str, needle: &str, limit: Duration) {
    let what = format!("a line with {needle:?} in {path}");
    super::eventually(limit, &what, || async {
        read_lines(path).iter().any(|l| l.contains(needle))
    })
    .await;
}

/// Nanoseconds since the Unix epoch, the clock `date +%s%N` prints.
pub fn unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// A TCP proxy in front of the daemon that can stop forwarding without
/// closing anything: a black hole, as a network partition looks to both
/// ends (neither sees a reset, so the daemon keeps the session open).
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Connections opened before the value was raised are frozen.
    cut: watch::Sender<u64>,
    /// Whether connections opened from now on are frozen at once.
    refuse: watch::Sender<bool>,
    /// Connections opened before the value was raised are closed.
    close: watch::Sender<u64>,
    /// Connections accepted so far (each one's id is its number).
    opened: std::sync::Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Starts forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (cut, cuts) = watch::channel(0u64);
        let (refuse, refusing) = watch::channel(false);
        let (close, closes) = watch::channel(0u64);
        let opened = std::sync::Arc::new(AtomicU64::new(0));
        let counter = std::sync::Arc::clone(&opened);
        let task = tokio::spawn(async move {
            let mut pipes = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let id = counter.fetch_add(1, Ordering::SeqCst) + 1;
                let (cuts, closes) = (cuts.clone(), closes.clone());
                let frozen_now = *refusing.borrow();
                pipes.spawn(pipe(client, upstream, id, (cuts, closes), frozen_now));
            }
        });
        Proxy {
            addr,
            cut,
            refuse,
            close,
            opened,
            task,
        }
    }

    /// Freezes every connection open now; later ones still forward.
    pub fn freeze_existing(&self) {
        self.cut.send_replace(self.opened.load(Ordering::SeqCst));
    }

    /// Closes every connection open now, as a reset would; later ones
    /// still forward.
    pub fn close_existing(&self) {
        self.close.send_replace(self.opened.load(Ordering::SeqCst));
    }

    /// Freezes every connection, now and to come.
    pub fn freeze_all(&self) {
        self.refuse.send_replace(true);
        self.freeze_existing();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Forwards one connection until `cuts` passes `id` (then holds both
/// sockets open, silent, until the proxy is dropped) or `closes` does (then
/// closes both).
async fn pipe(
    client: TcpStream,
    upstream: SocketAddr,
    id: u64,
    (mut cuts, mut closes): (watch::Receiver<u64>, watch::Receiver<u64>),
    frozen_now: bool,
) {
    if frozen_now {
        let _held = client;
        return std::future::pending().await;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let frozen = tokio::select! {
        _ = async {
            tokio::join!(
                tokio::io::copy(&mut client_read, &mut server_write),
                tokio::io::copy(&mut server_read, &mut client_write),
            )
        } => false,
        cut = cuts.wait_for(|cut| *cut >= id) => cut.is_ok(),
        _ = closes.wait_for(|close| *close >= id) => false,
    };
    if frozen {
        let _held = (client_read, client_write, server_read, server_write);
        std::future::pending::<()>().await;
    }
}
