//! One server process: picking a free port, spawning it with persistence
//! off, killing and reaping it, reading its log, and the temp dir it runs in.

use std::fs::{self, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{io_err, MastersError};

/// How many lines of a server's log go into a start-up error.
const LOG_TAIL_LINES: usize = 20;

/// A port that was free a moment ago: bind `127.0.0.1:0`, read it, let go.
/// Racy by nature; `await_up` respawns on a new port if the server loses.
pub(crate) fn free_port() -> Result<u16, MastersError> {
    let port = free_port_listener()?
        .local_addr()
        .map_err(io_err("reading the port of 127.0.0.1:0"))?
        .port();
    Ok(port)
}

/// A listener on `127.0.0.1:0`; its port is free once it is dropped.
pub(crate) fn free_port_listener() -> Result<TcpListener, MastersError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(io_err("binding 127.0.0.1:0 to find a free port"))
}

/// Spawns one server on `port`, stdout/stderr appended to `log`.
pub(crate) fn spawn_server(
    binary: &Path,
    dir: &Path,
    port: u16,
    log: &Path,
) -> Result<Child, MastersError> {
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io_err(format!("opening log file {}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(io_err(format!("duplicating log file {}", log.display())))?;
    let child = Command::new(binary)
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", "no"])
        .args(["--protected-mode", "yes"])
        .args(["--daemonize", "no"])
        .args(["--loglevel", "warning"])
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(io_err(format!(
            "spawning {} on port {port}",
            binary.display()
        )))?;
    tracing::trace!(port, pid = child.id(), "spawned master");
    Ok(child)
}

/// SIGKILLs `child` (unless it already exited) and reaps it.
pub(crate) fn kill_and_reap(child: &mut Child) -> io::Result<()> {
    if child.try_wait()?.is_none() {
        match child.kill() {
            // Older std reports an already-exited child this way.
            Err(err) if err.kind() == io::ErrorKind::InvalidInput => {}
            other => other?,
        }
    }
    child.wait().map(drop)
}

/// The last [`LOG_TAIL_LINES`] lines of a log file (or why it can't be read).
pub(crate) fn log_tail(log: &Path) -> String {
    match fs::read(log) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
            if tail.trim().is_empty() {
                "(empty)".to_owned()
            } else {
                tail
            }
        }
        Err(err) => format!("(could not read it: {err})"),
    }
}

/// Creates a fresh, empty temp dir for one `LocalMasters`.
pub(crate) fn make_temp_dir() -> Result<PathBuf, MastersError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    let mut last_err = None;
    for _ in 0..16 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!(
            "redlockd-masters-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last_err = Some(err),
            Err(err) => {
                return Err(io_err(format!("creating temp dir {}", dir.display()))(err));
            }
        }
    }
    let err = last_err.unwrap_or_else(|| io::Error::other("no attempt made"));
    Err(io_err(format!(
        "creating a temp dir under {}",
        base.display()
    ))(err))
}
