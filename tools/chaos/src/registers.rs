//! The two shared registers each contended resource protects, as Jepsen's
//! lock tests use them. They live in this process: the lock is what is
//! under test, not the storage.
//!
//! - The plain register is updated read-modify-write: read at the start of
//!   the critical section, written (+1) at its end, only if the holder is
//!   still within its validity at that moment. Two holders at once make one
//!   of the increments vanish: a lost acknowledged update.
//! - The fenced register is the resource of Kleppmann's argument: it knows
//!   the highest fence it has seen. A holder checks in first with its fence,
//!   which must be above every fence seen so far (and reads the value); its
//!   write (+1) is applied only if no higher fence checked in since. Even a
//!   holder paused past its validity then cannot overwrite the work of the
//!   holder after it, provided the fences the lock service hands out grow
//!   in grant order: exactly what the checkers verify.

use crate::history::{Clock, FencedOp, PlainWrite, RegisterLog, Time};
use std::sync::{Mutex, PoisonError};

/// The registers of one resource.
#[derive(Debug)]
pub(crate) struct Registers {
    /// The resource they belong to.
    resource: String,
    /// Serialises every operation: the order of the log is the order the
    /// operations took effect.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    plain: u64,
    plain_writes: Vec<PlainWrite>,
    highest_fence: u64,
    fenced: u64,
    fenced_ops: Vec<FencedOp>,
}

impl Registers {
    /// Empty registers for `resource`.
    pub(crate) fn new(resource: String) -> Registers {
        Registers {
            resource,
            state: Mutex::new(State::default()),
        }
    }

    /// The resource they belong to.
    pub(crate) fn resource(&self) -> &str {
        &self.resource
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the plain register.
    pub(crate) fn read_plain(&self) -> u64 {
        self.state().plain
    }

    /// Writes `read + 1` to the plain register if the clock, read while the
    /// register is held, is still before `valid_until`. Returns whether it
    /// was written (and so acknowledged).
    pub(crate) fn write_plain(
        &self,
        clock: &Clock,
        grant: u64,
        read: u64,
        valid_until: Time,
    ) -> bool {
        let mut state = self.state();
        if clock.now() >= valid_until {
            return false;
        }
        state.plain = read + 1;
        state.plain_writes.push(PlainWrite { grant, read });
        true
    }

    /// A new holder presents its fence: accepted (returning the value) only
    /// if it is above every fence seen so far.
    pub(crate) fn check_in(
        &self,
        clock: &Clock,
        grant: u64,
        fence: u64,
        valid_until: Time,
    ) -> Option<u64> {
        let mut state = self.state();
        let at = clock.now();
        let accepted = fence > state.highest_fence;
        if accepted {
            state.highest_fence = fence;
        }
        let read = state.fenced;
        state.fenced_ops.push(FencedOp {
            grant,
            write: false,
            fence,
            at,
            accepted,
            within_validity: at < valid_until,
            read,
        });
        accepted.then_some(read)
    }

    /// Writes `read + 1` with `fence`: applied only if no higher fence has
    /// checked in since this holder did. Returns whether it was applied.
    pub(crate) fn write_fenced(
        &self,
        clock: &Clock,
        grant: u64,
        fence: u64,
        read: u64,
        valid_until: Time,
    ) -> bool {
        let mut state = self.state();
        let at = clock.now();
        let accepted = fence == state.highest_fence;
        if accepted {
            state.fenced = read + 1;
        }
        state.fenced_ops.push(FencedOp {
            grant,
            write: true,
            fence,
            at,
            accepted,
            within_validity: at < valid_until,
            read,
        });
        accepted
    }

    /// Everything the registers saw.
    pub(crate) fn log(&self) -> RegisterLog {
        let state = self.state();
        RegisterLog {
            resource: self.resource.clone(),
            plain_final: state.plain,
            plain_writes: state.plain_writes.clone(),
            fenced_final: state.fenced,
            fenced_ops: state.fenced_ops.clone(),
        }
    }
}
