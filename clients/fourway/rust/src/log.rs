//! The log every contender appends its critical sections to, and the
//! harness reads: `rust <fence> <what> <ns>` lines. Each line is one
//! write(2) on an O_APPEND file, so the five processes' lines never
//! interleave; times are CLOCK_MONOTONIC nanoseconds, the one clock the
//! other contenders and the harness's window read (`Instant` hides its
//! value, hence `clock_gettime`).

use nix::time::{clock_gettime, ClockId};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};

/// This contender's name in the log.
const RUNTIME: &str = "rust";

/// The shared log, opened for appending.
pub(crate) struct SharedLog {
    file: File,
}

impl SharedLog {
    /// Opens (or creates) the log at `path` for appending.
    pub(crate) fn open(path: &str) -> io::Result<SharedLog> {
        let file = OpenOptions::new().append(true).create(true).open(path)?;
        Ok(SharedLog { file })
    }

    /// Appends `rust <fence> <what> <now>`.
    pub(crate) fn line(&self, fence: u64, what: &str) -> io::Result<()> {
        let line = format!("{RUNTIME} {fence} {what} {}\n", monotonic_ns()?);
        (&self.file).write_all(line.as_bytes())
    }
}

/// CLOCK_MONOTONIC, in nanoseconds.
fn monotonic_ns() -> io::Result<u64> {
    let now = clock_gettime(ClockId::CLOCK_MONOTONIC)?;
    let ns = i128::from(now.tv_sec()) * 1_000_000_000 + i128::from(now.tv_nsec());
    u64::try_from(ns).map_err(|_| io::Error::other("CLOCK_MONOTONIC before its epoch"))
}
