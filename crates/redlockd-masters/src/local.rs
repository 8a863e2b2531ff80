//! [`LocalMasters`]: the set of running masters, and its lifecycle (start,
//! stop, restart, clean-up on drop).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use crate::find::query_version;
use crate::probe::{wait_ready, Readiness, READY_DEADLINE};
use crate::process::{
    free_port, free_port_listener, kill_and_reap, log_tail, make_temp_dir, spawn_server,
};
use crate::{io_err, MastersError};

/// How many times a server that exits early (port race, TIME_WAIT) is respawned.
pub(crate) const MAX_SPAWN_ATTEMPTS: u32 = 5;

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
    pub(crate) dir: PathBuf,
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

    /// The process id of master `i` while it runs: for fault injection
    /// (SIGSTOP/SIGCONT) by tests and the chaos checker.
    pub fn pid(&self, i: usize) -> Option<u32> {
        let master = self.masters.get(i)?;
        let slot = master.child.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().map(Child::id)
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
    pub(crate) fn ports(&self) -> Vec<u16> {
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
