//! Helpers for tests that run programs against the harness's daemon: the
//! `redlockctl` binary, scratch directories, bounded waits on output,
//! files and processes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

/// `redlockctl ARGS...` against the daemon at `addr`, killed if dropped.
pub fn redlockctl(addr: SocketAddr, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(crate::bin::require("redlockctl"));
    command
        .args(args)
        .env("REDLOCK_ADDR", format!("http://{addr}"))
        .env_remove("REDLOCK_RESOURCE")
        .env_remove("REDLOCK_TOKEN")
        .env_remove("REDLOCK_AUTH_TOKEN")
        .env_remove("REDLOCK_TOKEN_FILE")
        .env_remove("REDLOCK_CACERT")
        .env_remove("REDLOCK_CERT")
        .env_remove("REDLOCK_KEY")
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

/// A finished command's exit code, stdout and stderr, for messages.
pub fn describe(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts a finished command's exit code, showing its output if it differs.
pub fn assert_exit(out: &std::process::Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}", describe(out));
}

/// The value of `NAME=value` in a command's stdout (as `redlockctl
/// acquire` prints the lock); fails the test if there is none.
pub fn assignment(out: &std::process::Output, name: &str) -> String {
    let prefix = format!("{name}=");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in {}", describe(out)))
        .to_owned()
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
    crate::harness::eventually(limit, &what, || async {
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
