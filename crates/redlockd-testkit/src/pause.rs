//! Hung masters: SIGSTOPped, so their connections stay open and silent
//! and their keys are kept, as a master stuck in a long command or a
//! frozen VM; resumed when the guard goes, whatever the test's outcome.

use crate::harness::Harness;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

impl Harness {
    /// Hangs masters `which` (SIGSTOP) until the returned guard is
    /// dropped.
    pub fn pause_masters(&self, which: &[usize]) -> Paused {
        let paused = Paused(
            which
                .iter()
                .map(|&i| self.masters.pid(i).expect("master running"))
                .collect(),
        );
        paused.signal(Signal::SIGSTOP);
        paused
    }
}

/// Masters hung by [`Harness::pause_masters`]; dropping it resumes them
/// (SIGCONT), so that a failing assertion leaves no hung process behind.
#[must_use = "the masters resume when this is dropped"]
pub struct Paused(Vec<u32>);

impl Paused {
    fn signal(&self, signal: Signal) {
        for &pid in &self.0 {
            let pid = Pid::from_raw(i32::try_from(pid).expect("pid"));
            kill(pid, signal).unwrap_or_else(|e| panic!("{signal} to master {pid}: {e}"));
        }
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // Not `signal`: no panic while a failed test unwinds.
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            }
        }
    }
}
