//! A `redlockd` process, started from the workspace's binary and
//! configured the way operators configure it: `REDLOCKD__SECTION__KEY`
//! environment variables. Its memory and CPU are its own (the bench reads
//! them from `/proc`), and it can be signalled, killed and started again.

use crate::BoxError;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// How to start one daemon process: binary, settings, arguments, log.
#[derive(Debug, Clone)]
pub struct DaemonCommand {
    binary: PathBuf,
    /// `(key, value)` with keys as in the configuration file
    /// (`redlock.nodes`), turned into environment variables at spawn.
    settings: Vec<(String, String)>,
    args: Vec<String>,
    /// Where stdout and stderr go (appended); none: stderr inherited,
    /// stdout discarded.
    log: Option<PathBuf>,
    /// Other environment variables (a `${VAR}` in the configuration).
    env: Vec<(String, String)>,
}

impl DaemonCommand {
    /// The workspace's `redlockd` over `nodes` (see [`DaemonCommand::new`]).
    pub fn workspace(nodes: &[String]) -> Result<DaemonCommand, BoxError> {
        Ok(DaemonCommand::new(crate::bin::path("redlockd")?, nodes))
    }

    /// `binary` over `nodes`, metrics off (set `metrics.listen` and
    /// `metrics.enabled` to have them), logs at `warn` unless `RUST_LOG`
    /// says otherwise.
    pub fn new(binary: PathBuf, nodes: &[String]) -> DaemonCommand {
        DaemonCommand {
            binary,
            settings: Vec::new(),
            args: Vec::new(),
            log: None,
            env: Vec::new(),
        }
        .set("redlock.nodes", nodes.join(","))
        .set("metrics.enabled", "false")
    }

    /// Sets configuration key `key` (e.g. `limits.max_sessions`) to
    /// `value`, replacing an earlier setting of it.
    pub fn set(mut self, key: &str, value: impl ToString) -> DaemonCommand {
        self.settings.retain(|(k, _)| k != key);
        self.settings.push((key.to_owned(), value.to_string()));
        self
    }

    /// Adds a command-line argument.
    pub fn arg(mut self, arg: impl Into<String>) -> DaemonCommand {
        self.args.push(arg.into());
        self
    }

    /// Sets environment variable `name` (not a configuration key: for a
    /// `${VAR}` the configuration names).
    pub fn env(mut self, name: &str, value: &str) -> DaemonCommand {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Appends the daemon's output to `path`.
    pub fn log_to(mut self, path: &Path) -> DaemonCommand {
        self.log = Some(path.to_path_buf());
        self
    }

    /// The `listen` address set, if any.
    fn listen(&self) -> Option<SocketAddr> {
        self.settings
            .iter()
            .find(|(k, _)| k == "server.listen")
            .and_then(|(_, v)| v.parse().ok())
    }

    /// The command, with every inherited `REDLOCKD__*` variable removed so
    /// that nothing outside changes the set-up, killed if dropped.
    pub fn command(&self) -> Result<Command, BoxError> {
        let mut command = Command::new(&self.binary);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("REDLOCKD__") {
                command.env_remove(key);
            }
        }
        for (key, value) in &self.settings {
            command.env(env_name(key), value);
        }
        for (name, value) in &self.env {
            command.env(name, value);
        }
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "warn");
        }
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        match &self.log {
            Some(path) => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?;
                command.stdout(log.try_clone()?).stderr(log);
            }
            None => {
                command.stdout(Stdio::null());
            }
        }
        Ok(command)
    }

    /// Starts the daemon; on a free loopback port unless `server.listen`
    /// was set. A port picked here is free a moment before the daemon
    /// binds it; callers that must not race use [`crate::daemon`].
    pub fn spawn(self) -> Result<DaemonProcess, BoxError> {
        let (this, addr) = match self.listen() {
            Some(addr) => (self, addr),
            None => {
                let addr = free_addr()?;
                (self.set("server.listen", addr), addr)
            }
        };
        let child = this.command()?.spawn().map_err(|e| {
            format!(
                "cannot start {} (build it: cargo build --workspace --bins): {e}",
                this.binary.display()
            )
        })?;
        let pid = child.id().ok_or("the daemon process exited at once")?;
        Ok(DaemonProcess { addr, pid, child })
    }
}

/// `redlock.nodes` -> `REDLOCKD__REDLOCK__NODES`.
pub fn env_name(key: &str) -> String {
    format!("REDLOCKD__{}", key.replace('.', "__").to_uppercase())
}

/// A loopback address whose port was free a moment ago.
pub fn free_addr() -> Result<SocketAddr, BoxError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// A running daemon process; killed if dropped.
#[derive(Debug)]
pub struct DaemonProcess {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its process id, for `/proc/<pid>/` and signals.
    pub pid: u32,
    child: Child,
}

impl DaemonProcess {
    /// The child process, to wait on or kill.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> Result<(), BoxError> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid)?);
        nix::sys::signal::kill(pid, signal)?;
        Ok(())
    }

    /// SIGTERM, then waits at most `limit` for it to exit (SIGKILL after);
    /// how it exited.
    pub async fn stop(mut self, limit: Duration) -> Result<std::process::ExitStatus, BoxError> {
        self.signal(nix::sys::signal::Signal::SIGTERM)?;
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(format!("the daemon process did not stop within {limit:?}; killed").into())
            }
        }
    }
}
